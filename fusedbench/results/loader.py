"""Read asv's results (any machines, any commits) into one tidy table, a row per cell and run.

asv's own loader parses each results file; fusedbench adds what asv does not keep: each cell's
dtype and shape (from its benchmark class and parameters), the status and reason of cells asv
skipped and the environment (from the records beside asv's results, `fusedbench.measure.records`), and,
each cell's TFLOP/s and floor, max(FLOPs / rate, bytes / bandwidth), from the best its machine
was seen to reach for the dtype over every run read (`machine_roofs`): the rate is the ceiling
GEMM's or the fastest cell's FLOP/s where one ran faster (large LLM shapes beat the 8192^3 ceiling
GEMM by a few per cent, an autotuned algorithm beats the default one), the bandwidth the best
copy's. So a workload has one floor per machine, whichever run (ladder or peers) timed it, and no
floor of the work is above a time the GPU was seen to reach.

What cannot be read is never dropped silently: each unreadable file, missing record or empty
folder becomes a line in `ResultSet.problems` that names the file and what was lost.
"""

from __future__ import annotations

import ast
import functools
import itertools
import math
import os
import statistics
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone

import pandas as pd

from fusedbench.catalog.deliberate import PAIRED_MARK
from fusedbench.catalog.dtypes import dtype_spec
from fusedbench.catalog.epilogs import EPILOGS, Epilog, epilog_spec
from fusedbench.catalog.model import Cell, CellKey, FormatError, Status, sample_clocks, sample_watts
from fusedbench.catalog.providers import GEMM
from fusedbench.catalog.shapes import parse_shape, shape_label
from fusedbench.catalog.suites import (
    ACCURACY_TRACK,
    BENCHMARK_MODULE,
    CEILING_CLASSES,
    CEILING_COPY_BYTES,
    CEILING_GEMM_SHAPE,
    CEILINGS_MODULE,
    EPOCH_TIME,
    GPU_TIME,
    GROUPS,
    MLP_GROUPS,
    MLP_MODULE,
    WALL,
)
from fusedbench.errors import DataProblem, FusedbenchError
from fusedbench.files import RefusedFile, regular_file
from fusedbench.measure.records import GroupRecord, load_records
from fusedbench.measure.sampling import PAIRED_SAMPLINGS
from fusedbench.results.cache import cached
from fusedbench.results.derived import flags, paired_metrics, pass_bandwidths
from fusedbench.stats import clock_explains, relative_iqr

COLUMNS = [
    "machine",
    "commit",
    "group",  # the asv class (benchmark group): cells of one group were timed in the same rounds
    "epilog",
    "dtype",
    "m",
    "k",
    "n",
    "provider",
    "status",
    "reason",
    "time_s",
    "ci_low_s",
    "ci_high_s",
    "samples",
    "rel_iqr",
    # The GPU's state while the cell was sampled (its record's per-sample telemetry; NaN where none was kept): the
    # median SM clock (each sample's the mean of the readings right before and after it), the median instantaneous
    # power right after, and how much of the samples' variance the clock explains (squared correlation of time
    # with cycle time): near 1, the spread is the clock's doing
    "sm_mhz",
    "power_w",
    "clock_explains",
    "tflops",
    "floor_s",
    "flops",  # the least work the provider does: the gemm provider's is the GEMM alone
    "bytes",  # what a fused kernel must move: operands, D, bias, aux
    "gemm_ratio",  # time over the plain GEMM of the same workload (1.03: the epilog costs 3%)
    "gemm_ratio_low",  # its 95% interval where the run paired samples by round; NaN where not
    "gemm_ratio_high",
    "kernels",  # how many GPU kernels the hot call launched (CUPTI); NaN where not recorded
    "kernel_names",  # their names in launch order, joined by " + "
    "algorithm",  # cuBLASLt's algorithm for the provider's GEMM, and who chose it (heuristic, autotune, a tuning)
    # A compiler's peer, before any timing: triton's seconds to compile the kernels the cell autotunes among,
    # summed (each kernel in its own process, CPUs compiling side by side; a kernel serves its dtype's shapes, and
    # where Triton's cache already held it the seconds are those of reading it), and to autotune among them;
    # torch-compile's first call (tracing, code generation, autotuning) and Inductor's benchmarking within it;
    # fused-autotuned's seconds timing the plan's algorithms
    "compile_s",
    "autotune_s",
    "regret",  # fused cells: fused / fused-autotuned, paired by round (1.05: the heuristic's choice costs 5%)
    "regret_low",
    "regret_high",
    "fidelity",  # textbook cells of a group with the blog control: textbook / blog, paired by round
    "fidelity_low",
    "fidelity_high",
    "pass_tbps",  # unfused cells: bytes of its separate passes over their kernels' time, TB/s
    "pass_of_copy",  # that over the run's copy bandwidth
    "same_size_copy_tbps",  # a plain copy moving the passes' bytes, timed alike: what a pass of that size can reach
    "flags",  # what deserves a look: multi-kernel fused cells, heuristic regret, slow unfused passes
]
CEILING_COLUMNS = ["machine", "commit", "dtype", "gemm_tflops", "gemm_at", "copy_tbps"]  # as each run measured them
ROOF_COLUMNS = ["machine", "dtype", "gemm_tflops", "gemm_at", "copy_tbps", "copy_at", "runs"]  # each machine's best
# Per cell, beside the table (same index): what comparing two runs needs and the table does not show.
DETAIL_COLUMNS = [
    "version",  # asv's version of that benchmark: runs of different versions are incomparable
    "started_ms",  # when asv started the benchmark (ms since the epoch; None where asv did not say)
    "raw",  # the raw samples, a tuple in the order they were taken (round by round where `paired`)
    "paired",  # whether the run sampled in rounds, so sample i of every cell of a workload shares a clock
    "kernel_times",  # the recorded kernels' (name, microseconds), in launch order; () where none were recorded
]
# The mlp suite's cells (benchmarks/mlp.py), a row per cell and run; never in `cells`, which holds epilog cells.
MLP_COLUMNS = [
    "machine",
    "commit",
    "group",  # MlpStep or MlpEpoch
    "workload",  # mlp-step or mlp-epoch
    "layers",  # inputs-hidden-outputs, e.g. 4096-4096-10
    "inputs",
    "hidden",
    "batch",
    "dtype",
    "version",  # fused, unfused, textbook, torch
    "status",
    "reason",
    "time_s",  # the wall clock per step (MlpStep) or per epoch (MlpEpoch), asv's median
    "ci_low_s",
    "ci_high_s",
    "samples",
    "gpu_s",  # a step's kernels' GPU time (CUPTI), median; NaN for an epoch
    "host_overhead_s",  # time_s - gpu_s: what the host adds to a step beyond its kernels
    "kernels",  # kernels per step (the median recorded step's)
    "test_accuracy",  # MlpEpoch: after the timed training
    "started_ms",  # when asv started the group's benchmark (results.runs orders runs by it)
    "benchmark_version",  # asv's version of the group's benchmark: runs of different versions are incomparable
]
NO_REASON = "asv skipped it; no fusedbench record gives the reason"
NO_TIME = "asv recorded no time for a cell the measurement timed (the asv run failed or was interrupted)"


@dataclass(frozen=True)
class ResultSet:
    """Everything under a results folder: the cells, the ceilings of each run, its records, and what was lost."""

    cells: pd.DataFrame  # COLUMNS, a row per cell and run
    ceilings: pd.DataFrame  # CEILING_COLUMNS: each run's ceiling GEMM rate and copy bandwidth
    records: list[GroupRecord]  # oldest first
    problems: list[DataProblem]  # a line per file or folder that could not be read fully, naming what was lost
    detail: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=DETAIL_COLUMNS))  # per cell
    mlp: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=MLP_COLUMNS))  # the mlp suite's cells
    # each mlp cell's raw samples by clock (catalog.suites: WALL or EPOCH_TIME, and GPU_TIME), indexed as `mlp`
    mlp_raw: pd.Series = field(default_factory=lambda: pd.Series(dtype=object))
    # ROOF_COLUMNS: per machine and dtype the best GEMM rate and copy bandwidth seen, what every floor stands on
    roofs: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=ROOF_COLUMNS))

    def run_rows(self, machine: str, commit: str) -> pd.Index:
        """The index of one run's cells, in table order: a verdict looks runs up dozens of times, and a mask over
        every cell each time cost a second a report."""
        return self._rows_by_run.get((machine, commit), self.cells.index[:0])

    @functools.cached_property
    def _rows_by_run(self) -> dict:
        return self.cells.groupby(["machine", "commit"], sort=False).groups

    def runs(self) -> pd.DataFrame:
        """The machine and commit of every cell, epilog or mlp: what --machine and --commit may name."""
        return pd.concat([self.cells[["machine", "commit"]], self.mlp[["machine", "commit"]]])


def _machine_folders(results_dir: str, problems: list[DataProblem]):
    """(machine, [results file paths]) for every machine folder asv's tools would read; what cannot be read (a
    folder, its machine.json, a file that is not a regular one) is a problem line, never opened."""
    from fusedbench.catalog.formats import read_machine

    for name in _listed(results_dir):
        folder = os.path.join(results_dir, name)
        if not os.path.isdir(folder):
            continue
        try:
            listed = os.listdir(folder)
        except OSError as exc:
            problems.append(
                DataProblem(
                    f"{folder} cannot be read ({exc.strerror}): its results were not read; fix its permissions", name
                )
            )
            continue
        files = []
        for path in sorted(os.path.join(folder, f) for f in listed if f.endswith(".json") and f != "machine.json"):
            try:
                regular_file(path)
                files.append(path)
            except RefusedFile as exc:
                problems.append(DataProblem(f"{path} {exc}: it was not read; move it out of {folder}", name))
        if not files:
            continue
        try:
            machine = read_machine(os.path.join(folder, "machine.json"))
        except (OSError, FormatError) as exc:
            problems.append(
                DataProblem(
                    f"{folder}/machine.json is missing or unreadable ({exc}): its {len(files)} results files were "
                    f"not read (asv skips them too); restore it with `git checkout -- {folder}/machine.json` (an "
                    f"`asv run --machine {name}` also rewrites it)",
                    name,
                )
            )
            continue
        yield machine, files


def _listed(results_dir: str) -> list[str]:
    """The names in the results folder; one error line where the folder itself cannot be read."""
    try:
        return sorted(os.listdir(results_dir))
    except OSError as exc:
        raise FusedbenchError(
            f"the results folder {results_dir} cannot be read ({exc.strerror or exc}); fix its permissions"
        ) from None


def _asv_results(results_dir: str, problems: list[DataProblem], machines: Collection[str] | None = None):
    """asv Results objects (of `machines` only, where named), each file checked against asv's format first
    (catalog.formats) and read by asv's own loader; a file that fails is a problem line naming the field."""
    from asv import util
    from asv.results import Results

    from fusedbench.catalog.formats import read_asv_results

    for machine, files in _machine_folders(results_dir, problems):
        if machines is not None and machine not in machines:
            continue
        for path in files:
            try:
                read_asv_results(path)
                yield path, Results.load(path, machine_name=machine)
            except (util.UserError, FormatError, OSError) as exc:
                problems.append(
                    DataProblem(
                        f"{path} is not an asv results file fusedbench can read ({exc}); its cells were not read; "
                        "fix or remove it",
                        machine,
                    )
                )


def _parameter_sets(result, key: str) -> list[tuple]:
    """Every parameter set of a benchmark, its values read from asv's literals (each distinct one read once)."""
    literals = {value: ast.literal_eval(value) for values in result.get_result_params(key) for value in values}
    return [tuple(literals[value] for value in combo) for combo in itertools.product(*result.get_result_params(key))]


def _median_times(result, key: str) -> dict[tuple, float]:
    """Median time per parameter set of one benchmark ({(): time} without parameters; NaN where none)."""
    if key not in result.get_all_result_keys():
        return {}
    params = result.get_result_params(key)
    values = result.get_result_value(key, params)
    if not params:
        return {(): _number(values[0] if isinstance(values, list) else values)}
    return {combo: _number(value) for combo, value in zip(_parameter_sets(result, key), values, strict=True)}


def _benchmark_results(result, benchmark: str) -> dict[tuple, tuple]:
    """Per parameter set of one benchmark: (asv's median, its stats, its samples), as many of each as there are sets
    (catalog.formats checked the file)."""
    params = result.get_result_params(benchmark)
    combos = _parameter_sets(result, benchmark)
    values = result.get_result_value(benchmark, params)
    stats = result.get_result_stats(benchmark, params)
    samples = result.get_result_samples(benchmark, params) or [None] * len(combos)
    return {c: (value, stat, sample) for c, value, stat, sample in zip(combos, values, stats, samples, strict=True)}


def _number(value) -> float:
    return math.nan if value is None else float(value)


def ceilings(result) -> tuple[dict[str, float], float]:
    """(dense GEMM FLOP/s per dtype, copy bytes/s) measured in the same run (NaN where missing)."""
    m, k, n = CEILING_GEMM_SHAPE
    gemm = _median_times(result, "ceilings.GemmCeiling.time_gemm")
    rates = {combo[0]: 2 * m * k * n / time for combo, time in gemm.items()}
    copy = _median_times(result, "ceilings.CopyCeiling.time_copy").get((), math.nan)
    return rates, 2 * CEILING_COPY_BYTES / copy  # read once and written once


def record_of(candidates: Sequence[GroupRecord], started_at_ms: int | None) -> GroupRecord | None:
    """The record of the measurement whose samples asv kept: the newest one (of the group's, machine's and
    commit's, oldest first) that began before asv started the benchmark. A later record belongs to a run
    whose results asv did not save (a dry run, an interrupted or failed group) and is passed over."""
    if started_at_ms is None:
        return candidates[-1] if candidates else None
    started = datetime.fromtimestamp(started_at_ms / 1000, timezone.utc)
    before = [record for record in candidates if record.started_at <= started]
    return before[-1] if before else None


def cell_of(key: CellKey, time: float, samples, recorded: Cell | None) -> Cell:
    """One asv cell as the model sees it: asv's time and samples, its record's status, reason, provenance and
    telemetry."""
    if not math.isnan(time):
        if recorded is None or not recorded.ok:
            return Cell.measured(key, samples or ())
        return replace(Cell.measured(key, samples or ()), provenance=recorded.provenance, telemetry=recorded.telemetry)
    if recorded is None:
        return Cell.skipped(key, NO_REASON)
    if recorded.ok:
        return Cell.failed(key, NO_TIME)
    return Cell(key, recorded.status, recorded.reason)


@dataclass
class _Run:
    """What one asv results file adds to the table."""

    ceilings: list = field(default_factory=list)
    rows: list = field(default_factory=list)
    detail: list = field(default_factory=list)  # each row's DETAIL_COLUMNS
    problems: list = field(default_factory=list)
    mlp: list = field(default_factory=list)  # MLP_COLUMNS rows, each with its "raw" samples


def _read_run(path: str, result, by_group: dict[tuple[str, str, str], list[GroupRecord]]) -> _Run:
    """The cells and ceilings of one asv results file, each cell with the record of its measurement."""
    machine, commit = result.params["machine"], result.commit_hash
    read = _Run(ceilings=_ceiling_rows(result))
    unrecorded: dict[str, int] = {}
    dirty: set[str] = set()
    read.mlp = _mlp_rows(result, by_group, unrecorded, dirty)
    for benchmark in sorted(result.get_all_result_keys()):
        parts = benchmark.split(".")
        if parts[0] != BENCHMARK_MODULE or parts[1] not in GROUPS:
            continue
        group = GROUPS[parts[1]]
        record = record_of(by_group.get((machine, commit, group.name), []), result.started_at.get(benchmark))
        if record is not None and record.dirty:
            dirty.add(group.name)
        recorded = {} if record is None else {c.key.at("", ""): c for c in record.cells}
        asked_only = record is not None and PAIRED_MARK in machine  # a paired session holds the cells it was asked for
        for combo, (value, stat, sample) in _benchmark_results(result, benchmark).items():
            epilog, shape, provider = combo
            key = CellKey(epilog, group.dtype, *parse_shape(shape), provider, machine, commit)
            if asked_only and key.at("", "") not in recorded:  # not asked (`ab --cells`), or not measured: not its run
                continue
            cell = cell_of(key, _number(value), sample, recorded.get(key.at("", "")))
            if record is None and not cell.ok:
                unrecorded[group.name] = unrecorded.get(group.name, 0) + 1
            read.rows.append(_row(cell, group.name, _number(value), stat))
            read.detail.append(
                {
                    "version": result.benchmark_version.get(benchmark),
                    "started_ms": result.started_at.get(benchmark),
                    "raw": tuple(cell.samples),
                    "paired": record is not None and record.sampling in PAIRED_SAMPLINGS,
                    "kernel_times": kernel_times(cell),
                }
            )
    read.problems += _run_problems(path, result, unrecorded, dirty)
    if not read.rows and not read.mlp and not unknown_benchmarks(result):  # timed nothing: never a silent green
        read.problems.append(
            DataProblem(
                f"{path} holds no cell of fusedbench's suite (asv ran none of its groups): nothing was read", machine
            )
        )
    return read


def _ceiling_rows(result) -> list[dict]:
    """The ceilings one results file measured (CEILING_COLUMNS), a row per dtype."""
    machine, commit = result.params["machine"], result.commit_hash
    rates, bandwidth = ceilings(result)
    return [
        {
            "machine": machine,
            "commit": commit,
            "dtype": dtype,
            "gemm_tflops": rate / 1e12,
            "gemm_at": f"{shape_label(*CEILING_GEMM_SHAPE)} ceiling",
            "copy_tbps": bandwidth / 1e12,
        }
        for dtype, rate in rates.items()
    ]


def _run_problems(path: str, result, unrecorded: dict[str, int], dirty: set[str]) -> list[DataProblem]:
    """What one results file lost: benchmarks the checkout does not know, cells without a record, records of a
    checkout with changes."""
    machine, commit = result.params["machine"], result.commit_hash
    found = []
    unknown = unknown_benchmarks(result)
    if unknown:
        found.append(
            f"{path}: benchmark(s) {', '.join(unknown)} are not in this checkout's suite (a group renamed or "
            "removed since): their cells were not read; read these results with the checkout that made them"
        )
    if unrecorded:
        found.append(
            f"{path}: no fusedbench record for group(s) {', '.join(unrecorded)} of commit {commit[:8]} on "
            f"{machine}: {sum(unrecorded.values())} cells asv skipped show as skipped with no reason, and their "
            "workloads' epilog costs are not paired by round"
        )
    if dirty:
        found.append(
            f"{path}: group(s) {', '.join(sorted(dirty))} were measured from a checkout with uncommitted changes "
            f"(their records say so), so they may not be the code of commit {commit[:8]}"
        )
    return [DataProblem(text, machine) for text in found]


def unknown_benchmarks(result) -> list[str]:
    """The results' benchmarks of fusedbench's modules whose class this checkout does not know."""
    known = {
        BENCHMARK_MODULE: set(GROUPS),
        MLP_MODULE: set(MLP_GROUPS),
        CEILINGS_MODULE: set(CEILING_CLASSES),
    }
    return sorted(
        name
        for name in result.get_all_result_keys()
        if name.split(".")[0] in known and name.split(".")[1] not in known[name.split(".")[0]]
    )


def _mlp_rows(result, by_group, unrecorded: dict[str, int], dirty: set[str]) -> list[dict]:
    """The mlp suite's cells of one asv results file (MLP_COLUMNS), each with its record's status and provenance."""
    machine, commit, rows = result.params["machine"], result.commit_hash, []
    recorded_benchmarks = set(result.get_all_result_keys())
    for group in MLP_GROUPS.values():
        clocks = {
            clock: _benchmark_results(result, name) if name in recorded_benchmarks else {}
            for clock, name in group.benchmarks.items()
        }
        if not any(clocks.values()):
            continue
        first = group.benchmarks[next(iter(group.benchmarks))]
        record = record_of(by_group.get((machine, commit, group.name), []), result.started_at.get(first))
        if record is not None and record.dirty:
            dirty.add(group.name)
        recorded = {} if record is None else {c.key.at("", ""): c for c in record.cells}
        timed_clock = WALL if clocks.get(WALL) else EPOCH_TIME  # the wall clock: a step's, or an epoch's
        timed = clocks.get(timed_clock, {})
        for combination in group.combinations():
            params = group.asv_params(*combination)
            value, stat, sample = timed.get(params, (None, None, None))
            key = group.cell_key(*combination)
            cell = cell_of(key.at(machine, commit), _number(value), sample, recorded.get(key))
            if record is None and not cell.ok:
                unrecorded[group.name] = unrecorded.get(group.name, 0) + 1
            gpu_value, _, gpu_sample = clocks.get(GPU_TIME, {}).get(params, (None, None, None))
            gpu = _number(gpu_value)
            time = _number(value) if cell.ok else math.nan
            kernels = kernel_times(cell)
            described = cell.to_json(samples=False)  # the key, status and reason in the model's own form
            rows.append(
                {
                    "group": group.name,
                    "workload": group.workload,
                    "layers": combination[0],
                    "inputs": key.k,
                    "hidden": key.m,
                    "batch": key.n,
                    "version": key.provider,
                    **{name: described[name] for name in ("machine", "commit", "dtype", "status", "reason")},
                    "time_s": time,
                    "ci_low_s": _number(stat.get("ci_99_a")) if stat and cell.ok else math.nan,
                    "ci_high_s": _number(stat.get("ci_99_b")) if stat and cell.ok else math.nan,
                    "samples": len(cell.samples),
                    "gpu_s": gpu if cell.ok else math.nan,
                    "host_overhead_s": time - gpu if cell.ok else math.nan,
                    "kernels": len(kernels) if kernels else math.nan,
                    "test_accuracy": _number(clocks.get(ACCURACY_TRACK, {}).get(params, (None,))[0]),
                    "started_ms": result.started_at.get(first),
                    "benchmark_version": result.benchmark_version.get(first),
                    "raw": {  # each clock's samples: the wall clock's, and the GPU's where recorded
                        clock: tuple(samples)
                        for clock, samples in ((timed_clock, cell.samples), (GPU_TIME, gpu_sample if cell.ok else ()))
                        if samples
                    },
                }
            )
    return rows


def machine_names(results_dir: str) -> list[str]:
    """The machines with asv results under `results_dir`, as each folder's machine.json names them."""
    return [machine for machine, _ in _machine_folders(results_dir, [])]


def load_results(results_dir: str, machines: Collection[str] | None = None) -> ResultSet:
    """Read every asv results file (and every fusedbench record) under `results_dir`, of `machines` only where named
    (a verdict on two machines need not read a long history of every other); the parse of the same files by the
    same code is kept (`results.cache`)."""
    if not os.path.isdir(results_dir):
        raise FusedbenchError(f"no results folder at {results_dir!r}; pass the folder asv writes (results/)")
    if os.path.isfile(os.path.join(results_dir, "machine.json")):
        parent = os.path.dirname(os.path.abspath(results_dir))
        raise FusedbenchError(f"{results_dir} is one machine's folder; pass the results folder above it ({parent})")
    return cached(results_dir, machines, _parse_results)


def _parse_results(results_dir: str, machines: Collection[str] | None) -> ResultSet:
    records, problems = load_records(results_dir)
    if machines is not None:
        records = [r for r in records if r.machine in machines]
    by_group: dict[tuple[str, str, str], list[GroupRecord]] = {}
    for record in records:
        by_group.setdefault((record.machine, record.commit, record.group), []).append(record)
    rows, detail, ceiling_rows, mlp, files = [], [], [], [], 0
    environments: dict[tuple[str, str], str] = {}
    for path, result in _asv_results(results_dir, problems, machines):
        files += 1
        refuse_second_environment(environments, path, result)
        read = _read_run(path, result, by_group)
        ceiling_rows += read.ceilings
        rows += read.rows
        mlp += read.mlp
        detail += read.detail
        problems += read.problems
    if machines is not None:
        problems = [p for p in problems if p.machine in machines]
    if files and not rows and not mlp:
        raise FusedbenchError(
            f"{results_dir} holds asv results, but none of fusedbench's suite; pass fusedbench's results/"
        )
    if not files and not problems and machines is None:  # a named machine without results is an error later
        problems.append(
            DataProblem(f"{results_dir} holds no asv results yet; `fusedbench run` on a GPU machine writes them")
        )
    return _result_set(rows, detail, ceiling_rows, mlp, records, problems)


def _result_set(rows: list, detail: list, ceiling_rows: list, mlp: list, records, problems) -> ResultSet:
    """The rows read, made the ResultSet's tables: each cell with its derived metrics, floor and flags."""
    work = pd.DataFrame(rows, columns=COLUMNS)
    details = pd.DataFrame(detail, columns=DETAIL_COLUMNS, index=work.index)
    work = paired_metrics(work, list(details["raw"]), details["paired"].astype(bool))
    ceilings = pd.DataFrame(ceiling_rows, columns=CEILING_COLUMNS)
    roofs = machine_roofs(work, ceilings)
    floored = with_floors(work, roofs)
    copies = work[["machine", "commit"]].merge(  # a pass is held to its own run's copy
        ceilings[["machine", "commit", "copy_tbps"]].drop_duplicates(["machine", "commit"]), how="left"
    )["copy_tbps"]
    floored = pass_bandwidths(floored, details["kernel_times"], copies.set_axis(work.index), details["version"])
    cells = floored.assign(flags=flags(floored), kernels=floored["kernels"].astype("Int64"))[COLUMNS]
    return ResultSet(
        cells=cells,
        ceilings=ceilings,
        roofs=roofs,
        records=records,
        problems=problems,
        detail=details.set_index(cells.index),
        mlp=pd.DataFrame(mlp, columns=MLP_COLUMNS).astype({"kernels": "Int64"}),
        mlp_raw=pd.Series([row["raw"] for row in mlp], dtype=object),
    )


def refuse_second_environment(seen: dict[tuple[str, str], str], path: str, result) -> None:
    """One asv environment per machine and commit: a second (asv.conf.json's matrix, or a runner whose Python path
    changed) would give every cell twice with nothing to tell them apart, so it is refused, naming both files."""
    key = (result.params.get("machine", ""), result.commit_hash)
    if key in seen:
        raise FusedbenchError(
            f"{seen[key]} and {path} hold two asv environments for commit {key[1][:8]} on {key[0]}; fusedbench "
            "reads one per commit: move one file to a results folder of its own (`fusedbench compare FOLDER1 "
            "FOLDER2` sets the two side by side)"
        )
    seen[key] = path


def machine_roofs(work: pd.DataFrame, ceilings: pd.DataFrame) -> pd.DataFrame:
    """Per machine and dtype whose runs measured ceilings, the best it was seen to reach over all of them: the GEMM
    rate (a ceiling GEMM's, or the fastest cell's FLOP/s where one beat it; the ceiling wins a tie) and the copy
    bandwidth, each with where it was reached, and how many runs measured ceilings (ROOF_COLUMNS)."""
    measured = ceilings.dropna(subset=["gemm_tflops"])
    if measured.empty:
        return pd.DataFrame(columns=ROOF_COLUMNS)
    timed = work.loc[
        work["status"] == Status.OK.value, ["machine", "dtype", "m", "k", "n", "epilog", "provider", "commit"]
    ]
    rates = timed.assign(gemm_tflops=work["flops"] / work["time_s"] / 1e12).dropna(subset=["gemm_tflops"])
    keys = ["machine", "dtype"]
    candidates = pd.concat([measured[[*keys, "gemm_tflops", "gemm_at", "commit"]], rates], ignore_index=True)
    candidates = candidates.merge(measured[keys].drop_duplicates(), on=keys)  # dtypes with ceilings only
    gemm = candidates.loc[candidates.groupby(keys, sort=False)["gemm_tflops"].idxmax()]
    gemm = gemm.assign(  # where each best was reached, labelled for the winners only (not for every cell)
        gemm_at=[
            (at if isinstance(at, str) else f"{shape_label(int(m), int(k), int(n))} {epilog} {provider}")
            + f" at {commit[:8]}"
            for at, m, k, n, epilog, provider, commit in gemm[
                ["gemm_at", "m", "k", "n", "epilog", "provider", "commit"]
            ].itertuples(index=False)
        ]
    )[[*keys, "gemm_tflops", "gemm_at"]]
    copies = measured.dropna(subset=["copy_tbps"])
    copy = copies.loc[copies.groupby(keys, sort=False)["copy_tbps"].idxmax(), [*keys, "copy_tbps", "commit"]]
    runs = measured.groupby(keys, sort=False)["commit"].nunique().rename("runs").reset_index()
    roofs = gemm.merge(copy.rename(columns={"commit": "copy_at"}), on=keys, how="left").merge(runs, on=keys)
    return roofs.assign(copy_at=roofs["copy_at"].str[:8])[ROOF_COLUMNS].reset_index(drop=True)


def with_floors(work: pd.DataFrame, roofs: pd.DataFrame) -> pd.DataFrame:
    """`floor_s` = max(flops / the machine's best GEMM rate, bytes / its best copy bandwidth) for the cell's dtype;
    NaN where no run of the machine measured ceilings for the dtype."""
    keyed = work.drop(columns="floor_s").merge(
        roofs[["machine", "dtype", "gemm_tflops", "copy_tbps"]], how="left", on=["machine", "dtype"]
    )
    floors = pd.concat(
        [keyed["flops"] / (keyed["gemm_tflops"] * 1e12), keyed["bytes"] / (keyed["copy_tbps"] * 1e12)], axis=1
    ).max(axis=1, skipna=False)
    return work.assign(floor_s=floors.to_numpy())


def select_cells(
    cells: pd.DataFrame,
    *,
    machines: Sequence[str] = (),
    commits: Sequence[str] = (),
    known: pd.DataFrame | None = None,
) -> pd.DataFrame:
    """The cells of the chosen machines (exact names) and commits (prefixes); an error names a choice matching
    nothing in `known` (the cells themselves unless given: the report passes the epilog and the mlp cells)."""
    known = cells if known is None else known
    chosen = cells
    if machines:
        unknown = sorted(set(machines) - set(known["machine"]))
        if unknown:
            have = ", ".join(sorted(set(known["machine"]))) or "none"
            raise FusedbenchError(f"--machine {unknown[0]!r} has no results; machines with results: {have}")
        chosen, known = chosen[chosen["machine"].isin(machines)], known[known["machine"].isin(machines)]
    if commits:
        unmatched = [p for p in commits if not known["commit"].str.startswith(p).any()]
        if unmatched:
            have = ", ".join(sorted({c[:8] for c in known["commit"]})) or "none"
            which = ", ".join(commits) if len(unmatched) == len(commits) else unmatched[0]
            raise FusedbenchError(f"--commit {which} matches no results here; commits: {have}")
        chosen = chosen[chosen["commit"].map(lambda c: any(c.startswith(p) for p in commits)).astype(bool)]
    return chosen


def kernel_times(cell: Cell) -> tuple[tuple[str, float], ...]:
    """The kernels a cell's record lists, as (name, microseconds); () where none were recorded."""
    return tuple((kernel["name"], float(kernel["us"])) for kernel in cell.provenance.get("kernels", ()))


def same_size_copy_tbps(cell: Cell) -> float:
    """The bandwidth of the copy an unfused cell's record measured beside its passes; NaN where there is none."""
    copy = cell.provenance.get("same_size_copy")
    return copy["bytes"] / copy["us"] / 1e6 if copy else math.nan


def power_state(cell: Cell) -> dict[str, float]:
    """The cell's median SM clock and power over its samples, and the share of their variance the clock explains."""
    clocks, power = sample_clocks(cell.telemetry), sample_watts(cell.telemetry)
    return {
        "sm_mhz": statistics.median(clocks) if clocks else math.nan,
        "power_w": statistics.median(power) if power else math.nan,
        "clock_explains": clock_explains(cell.samples, clocks) if len(clocks) == len(cell.samples) else math.nan,
    }


def _row(cell: Cell, group: str, time: float, stat) -> dict:
    """One cell of one run as a table row (its floor, paired ratios and flags come later)."""
    key = cell.key
    spec = EPILOGS[Epilog.DEFAULT] if key.provider == GEMM else epilog_spec(key.epilog)
    flops = spec.flops(key.m, key.k, key.n)
    itemsizes = dtype_spec(key.dtype).operand_itemsize, dtype_spec(key.dtype).result_itemsize
    described = cell.to_json(samples=False) | {"group": group}  # the key, status and reason in the model's own form
    kernels = kernel_times(cell)
    algorithm, chosen_by = cell.provenance.get("algorithm"), cell.provenance.get("chosen_by")
    return {column: described[column] for column in COLUMNS[: COLUMNS.index("reason") + 1]} | {
        "time_s": time if cell.ok else math.nan,
        "ci_low_s": _number(stat.get("ci_99_a")) if stat and cell.ok else math.nan,
        "ci_high_s": _number(stat.get("ci_99_b")) if stat and cell.ok else math.nan,
        "samples": len(cell.samples),
        "rel_iqr": relative_iqr(cell.samples) if cell.samples else math.nan,
        **power_state(cell),
        "tflops": flops / time / 1e12 if cell.ok and time > 0 else math.nan,
        "floor_s": math.nan,  # with_floors() fills it from the machine's roofs
        "flops": flops,
        "bytes": spec.fused_bytes(key.m, key.k, key.n, *itemsizes),
        "gemm_ratio": math.nan,  # analysis.paired_metrics() fills it from the workload's gemm cell
        "gemm_ratio_low": math.nan,
        "gemm_ratio_high": math.nan,
        "kernels": len(kernels) if kernels else math.nan,
        "kernel_names": " + ".join(name for name, _ in kernels),
        "algorithm": f"{algorithm} ({chosen_by})" if algorithm and chosen_by else algorithm or "",
        "compile_s": _number(cell.provenance.get("compile_s")),
        "autotune_s": _number(cell.provenance.get("autotune_s")),
        **dict.fromkeys(["regret", "regret_low", "regret_high", "fidelity", "fidelity_low", "fidelity_high"], math.nan),
        "pass_tbps": math.nan,  # analysis.pass_bandwidths() fills it from the kernel times and the copy ceiling
        "pass_of_copy": math.nan,
        "same_size_copy_tbps": same_size_copy_tbps(cell),
        "flags": "",
    }


def format_markdown(table: pd.DataFrame) -> str:
    """A Markdown table (no extra dependency): one header row, one row per cell."""
    header = "| " + " | ".join(table.columns) + " |"
    rule = "|" + "|".join("---" for _ in table.columns) + "|"

    def cell(value) -> str:
        if isinstance(value, float):
            return "" if math.isnan(value) else f"{value:.4g}"
        return str(value).replace("|", "\\|")

    body = ["| " + " | ".join(cell(v) for v in row) + " |" for row in table.itertuples(index=False)]
    return "\n".join([header, rule, *body]) + "\n"
