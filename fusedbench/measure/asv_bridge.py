"""What the asv benchmarks call: measure a group on the GPU (or say in one line why not), record its
cells beside asv's results, and hand the recorded samples to asv's timer.

asv runs each benchmark class's `setup_cache` in its own process, importing the suite from the
checkout's `benchmarks/`, which hands its checkout root here; as the run started, asv rewrote the
machine.json of the machine it records under. So the measurement knows where asv's results go
and under which machine, and refuses to measure under a name that is not the GPU's (asv's
default is the host name, which on CI runners changes with every job). Every cell's status and
reason, and the environment, go into a `records.GroupRecord` there, whichever command started asv.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone

from fusedbench.catalog.deliberate import deliberate_from_environment
from fusedbench.catalog.model import Cell, CellKey
from fusedbench.catalog.suites import GROUPS, BenchmarkGroup, MlpGroup
from fusedbench.errors import FusedbenchError, GpuUnavailable
from fusedbench.measure.checkout import asv_machine_in_use, asv_results_dir, is_fusedbench_root, read_checkout
from fusedbench.measure.machine import gpu_machine_name
from fusedbench.measure.records import GroupRecord, write_record
from fusedbench.measure.sampling import BACK_TO_BACK, PROTOCOL

SUITE = "the fusedbench asv suite"


@dataclass(frozen=True)
class GroupCache:
    """What a group's setup_cache hands every cell's process: its cells, or one line why none was measured."""

    # (epilog, shape, provider) -> cell; an mlp group's: its asv parameters and the clock (gpu.mlp_bench)
    cells: dict[tuple, Cell] = field(default_factory=dict)
    why_not: str = ""


@dataclass(frozen=True)
class AsvRun:
    """Where the running `asv run` keeps its results, and under which machine and commit."""

    results_dir: str
    machine: str | None
    commit: str
    dirty: bool


def current_asv_run(root: str) -> AsvRun | None:
    """The asv run of the checkout at `root` (None where `root` holds no fusedbench checkout)."""
    if not is_fusedbench_root(root):
        return None
    checkout = read_checkout(root)
    results_dir = asv_results_dir(root)
    return AsvRun(results_dir, asv_machine_in_use(results_dir), checkout.commit, checkout.dirty)


def _group_keys(group: BenchmarkGroup) -> list[CellKey]:
    return [key for workload in group.workloads() for key in workload.cell_keys(group.providers)]


def _cache(cells: Iterable[Cell]) -> GroupCache:
    return GroupCache({(c.key.epilog, c.key.shape, c.key.provider): c for c in cells})


def _record(run: AsvRun | None, group: BenchmarkGroup | MlpGroup, cells, started, seconds, environment) -> None:
    if run is None or run.machine is None:
        return
    record = GroupRecord(
        machine=run.machine,
        commit=run.commit,
        group=group.name,
        started=started.isoformat(),
        seconds=seconds,
        # the mlp suite's steps run warm and back to back, as in a training loop (gpu.mlp_bench): no lead-in
        sampling=(BACK_TO_BACK if isinstance(group, MlpGroup) else PROTOCOL).sampling,
        dirty=run.dirty,
        environment=environment,
        cells=tuple(replace(cell, key=cell.key.at(run.machine, run.commit)) for cell in cells),
    )
    write_record(run.results_dir, record)


def _where_and_what(root: str):
    """(the asv run, GPU stack, deliberate change) to measure with, or (the run, None, the one line why not).

    The machine asv records under must be the GPU's name, or a tuned or injected run's own name."""
    from fusedbench.measure.gpu import load_gpu_stack

    try:
        run = current_asv_run(root)
    except FusedbenchError as exc:  # the checkout cannot say which commit it is
        return None, None, f"cannot tell which commit is measured: {exc}"
    try:
        deliberate = deliberate_from_environment()
    except FusedbenchError as exc:
        return run, None, str(exc)
    try:
        stack = load_gpu_stack(SUITE)
        machine = deliberate.machine(gpu_machine_name())
    except GpuUnavailable as exc:
        return run, None, f"no GPU: {exc}"
    if run is not None and run.machine != machine:
        asked = f" ({deliberate.flags.strip()})" if deliberate else ""
        return (
            run,
            None,
            (
                f"asv records this run under machine {run.machine!r}, not under this GPU's name {machine!r}{asked}; "
                f"run `fusedbench machine{deliberate.flags}` and pass `--machine {machine}` to asv run"
            ),
        )
    return run, stack, deliberate


def measure_for_asv(group_name: str, root: str) -> GroupCache:
    """A group's setup_cache: measure it, record every cell's status beside the results of the asv run
    of the checkout at `root`, and return the samples."""
    group = GROUPS[group_name]

    def measure(stack, deliberate):
        from fusedbench.measure.gpu.bench import measure_group

        cells = measure_group(stack, group, tuning=deliberate.tuning, injection=deliberate.injection)
        return cells, _cache(cells).cells

    return _measured(group, root, _group_keys(group), measure)


def measure_mlp_for_asv(group_name: str, root: str) -> GroupCache:
    """An mlp group's setup_cache, as `measure_for_asv`: the cache's keys are the asv parameters and the clock
    (fusedbench.measure.gpu.mlp_bench); a tuning or an injection does not apply to the MLP's steps."""
    from fusedbench.catalog.suites import MLP_EPOCH, MLP_GROUPS

    group = MLP_GROUPS[group_name]
    keys = group.cell_keys()

    def measure(stack, deliberate):
        from fusedbench.measure.gpu import mlp_bench

        if deliberate:
            reason = f"the mlp suite takes no deliberate change ({deliberate.flags.strip()}); run it without"
            return [Cell.skipped(key, reason) for key in keys], {}
        if group.workload == MLP_EPOCH:
            return mlp_bench.measure_mlp_epochs(stack, group)
        return mlp_bench.measure_mlp_steps(stack, group)

    return _measured(group, root, keys, measure)


def _measured(group: BenchmarkGroup | MlpGroup, root: str, keys: list[CellKey], measure) -> GroupCache:
    """Measure a group with `measure(stack, deliberate) -> (the record's cells, the cache's cells)`, record it beside
    the results of the asv run of the checkout at `root`, and hand asv the cache; without a GPU (or under the
    wrong machine name) every cell of `keys` is recorded skipped with the one line why."""
    from fusedbench.measure.stacks import stack_facts
    from fusedbench.measure.telemetry import TelemetrySampler

    started = datetime.now(timezone.utc)
    run, stack, deliberate_or_reason = _where_and_what(root)
    if stack is None:
        _record(run, group, [Cell.skipped(key, deliberate_or_reason) for key in keys], started, 0.0, {})
        return GroupCache(why_not=f"{group.name}: every cell skipped: {deliberate_or_reason}")
    clock = time.perf_counter()
    with TelemetrySampler() as telemetry:
        cells, cached = measure(stack, deliberate_or_reason)
    environment = {
        "gpu": telemetry.device_facts(),
        "versions": stack.versions(),
        "stack": stack_facts(),  # after the measurement: the libraries it loaded
        "telemetry": telemetry.summary.to_json(),
        **deliberate_or_reason.to_json(),
    }
    _record(run, group, cells, started, time.perf_counter() - clock, environment)
    return GroupCache(cached)


def measure_ceilings_for_asv(kind: str, root: str, dtypes: Sequence[str] = ()) -> GroupCache:
    """The ceilings' setup_cache: the GEMM per dtype ("gemm") or the copy ("copy"), as cells keyed by name.
    A tuning or an injection does not apply here: the ceilings stay the GPU's untouched best."""
    _, stack, deliberate_or_reason = _where_and_what(root)
    if stack is None:
        name = "GemmCeiling" if kind == "gemm" else "CopyCeiling"
        return GroupCache(why_not=f"{name}: every cell skipped: {deliberate_or_reason}")
    from fusedbench.measure.gpu import bench

    if kind == "gemm":
        measured = bench.measure_gemm_ceilings(stack, list(dtypes))
        return GroupCache({(dtype, "", "gemm"): cell for dtype, cell in measured.items()})
    samples = bench.measure_copy_ceiling(stack)
    key = CellKey("copy", "uint8", 0, 0, 0, "copy")
    cell = (
        Cell.failed(key, f"{type(samples).__name__}: {samples}")
        if isinstance(samples, Exception)
        else Cell.measured(key, samples)
    )
    return GroupCache({("copy", "", "copy"): cell})


class ReplayClock:
    """Hands samples measured elsewhere to asv's timing loop, one per timed call.

    asv reads `now()` before and after each call of the benchmark, which calls `advance()`: the
    difference asv records is exactly the next recorded sample. asv re-runs the benchmark's
    setup before every sample, so `load` starts a cell's samples only the first time it sees it.
    """

    def __init__(self) -> None:
        self._now = 0.0
        self._cell: object = None
        self._pending: Iterator[float] = iter(())

    def load(self, cell: object, samples: Iterable[float]) -> None:
        if cell != self._cell:
            self._cell, self._pending = cell, iter(samples)

    def advance(self) -> None:
        self._now += next(self._pending)

    def now(self) -> float:
        return self._now


def say_why_not(cache: GroupCache, first: bool) -> None:
    """Print the group's one line (no GPU, wrong machine name) from its first cell's process, which
    runs setup once (the cell is skipped): asv shows it with --show-stderr, where a traceback per
    group used to be."""
    if cache.why_not and first:
        print(f"fusedbench: {cache.why_not}", file=sys.stderr)
