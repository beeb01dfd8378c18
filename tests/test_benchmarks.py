"""The asv suite hands the recorded GPU samples to asv unchanged (driven through asv_runner, no GPU)."""

import os
from dataclasses import replace

import pytest
from asv_runner.discovery import get_benchmark_from_name

from fusedbench.catalog.model import Cell, CellKey
from fusedbench.catalog.providers import PROVIDERS
from fusedbench.catalog.suites import ASV_VERSIONS, EPOCH_TIME, GPU_TIME, GROUPS, MLP_EPOCHS, MLP_GROUPS, WALL
from fusedbench.measure.asv_bridge import GroupCache, ReplayClock
from fusedbench.measure.sampling import SAMPLES

BENCHMARKS = os.path.join(os.path.dirname(os.path.dirname(__file__)), "benchmarks")
SEED = "(65536,16384)x(16384,8192)"


def run_cell(benchmark_id: str, cache) -> object:
    """What asv_runner's `run` does in a benchmark's own process, minus the pickle file (None: skipped)."""
    from asv_runner.benchmarks.mark import SkipNotImplemented

    benchmark = get_benchmark_from_name(BENCHMARKS, benchmark_id)
    benchmark.set_cache(cache)
    if benchmark.do_setup():
        return None
    try:
        return benchmark.do_run()
    except SkipNotImplemented:
        return None
    finally:
        benchmark.do_teardown()


def key(epilog: str, provider: str) -> CellKey:
    return CellKey(epilog, "fp16", 65536, 16384, 8192, provider)


SAMPLES_OF_FUSED = tuple(0.010 + i * 1e-4 for i in range(SAMPLES))


def fake_group(why_not: str = "") -> GroupCache:
    cells = [
        Cell.measured(key("DEFAULT", "fused"), SAMPLES_OF_FUSED),
        Cell.refused(key("DEFAULT", "torch"), "torch has no op"),
        Cell.measured(key("DEFAULT", "textbook"), [0.02] * SAMPLES),
    ]
    return GroupCache({(c.key.epilog, c.key.shape, c.key.provider): c for c in cells}, why_not)


def test_a_cell_reports_exactly_its_recorded_samples():
    # Quick's params: 5 epilogs x 1 shape x 6 providers; DEFAULT/seed/fused is index 2.
    result = run_cell("cells.Quick.time_cell-2", fake_group())
    assert result["number"] == 1
    assert result["samples"] == pytest.approx(SAMPLES_OF_FUSED)


def test_a_refused_cell_is_an_asv_skip_and_prints_nothing(capsys):
    assert run_cell("cells.Quick.time_cell-4", fake_group()) is None  # DEFAULT/seed/torch
    assert capsys.readouterr() == ("", "")  # its reason is in the group's record, not 2880 stderr lines


def test_a_group_that_could_not_measure_says_why_once_from_its_first_cell(capsys):
    why = "Quick: every cell skipped: no GPU: needs cupy"
    skipped = [Cell.skipped(key(epilog, provider), why) for epilog in ("DEFAULT", "BIAS") for provider in PROVIDERS]
    cache = GroupCache({(c.key.epilog, c.key.shape, c.key.provider): c for c in skipped}, why)
    assert run_cell("cells.Quick.time_cell-0", cache) is None  # the first cell (DEFAULT/textbook): skipped ...
    assert capsys.readouterr().err == f"fusedbench: {why}\n"  # ... saying why, once
    assert run_cell("cells.Quick.time_cell-7", cache) is None  # BIAS/unfused
    assert capsys.readouterr().err == ""


def test_every_group_has_a_class_with_its_own_setup_cache_and_explicit_version():
    from asv_runner.benchmarks._base import get_setup_cache_key
    from asv_runner.discovery import disc_benchmarks

    benchmarks = list(disc_benchmarks(BENCHMARKS))
    classes = {b.name.split(".")[1] for b in benchmarks if b.name.startswith("cells.")}
    assert classes == set(GROUPS)
    keys = {b.name.rsplit(".", 1)[0]: get_setup_cache_key(b._setup_cache) for b in benchmarks}
    assert len(keys) == len(set(keys.values()))  # asv shares a cache between benchmarks with the same key ...
    assert len(keys) == len({b.name.rsplit(".", 1)[0] for b in benchmarks})  # ... as it should within a class
    assert {name.split(".")[1] for name in keys if name.startswith("mlp.")} == set(MLP_GROUPS)
    versions = {b.name.split(".")[1]: b.version for b in benchmarks}
    assert versions == ASV_VERSIONS  # never the hash of the source, which a refactor changes


def test_replay_clock_turns_each_call_into_the_next_recorded_sample():
    clock = ReplayClock()
    clock.load("cell", [0.25, 0.5])
    before = clock.now()
    clock.advance()
    middle = clock.now()
    clock.load("cell", [0.25, 0.5])  # asv re-runs setup before every sample: no restart
    clock.advance()
    assert (middle - before, clock.now() - middle) == (0.25, 0.5)
    with pytest.raises(StopIteration):
        clock.advance()
    clock.load("other cell", [1.0])
    clock.advance()
    assert clock.now() == 1.75


def mlp_cache() -> GroupCache:
    """MlpStep's first cell timed by both clocks, its second refused; MlpEpoch's first trained."""
    step, epoch = MLP_GROUPS["MlpStep"], MLP_GROUPS["MlpEpoch"]
    fused = step.cell_key("64-30-10", 256, "fp32", "fused")
    trained = replace(Cell.measured(epoch.cell_key("64-30-10", 256, "fp32", "fused"), [0.006] * (MLP_EPOCHS - 1)),
                      provenance={"test_accuracy": 0.931})  # fmt: skip
    return GroupCache(
        {
            ("64-30-10", 256, "fp32", "fused", WALL): Cell.measured(fused, [0.002] * SAMPLES),
            ("64-30-10", 256, "fp32", "fused", GPU_TIME): Cell.measured(fused, [0.0001] * SAMPLES),
            ("64-30-10", 256, "fp32", "unfused", WALL): Cell.refused(fused, "no"),
            ("fp32", "fused", EPOCH_TIME): trained,
        }
    )


def test_an_mlp_step_replays_its_wall_clock_and_its_gpu_time_as_two_benchmarks():
    assert run_cell("mlp.MlpStep.time_step-0", mlp_cache())["samples"] == pytest.approx([0.002] * SAMPLES)
    assert run_cell("mlp.MlpStep.time_step_gpu-0", mlp_cache())["samples"] == pytest.approx([0.0001] * SAMPLES)
    assert run_cell("mlp.MlpStep.time_step-1", mlp_cache()) is None  # refused: skipped
    assert run_cell("mlp.MlpStep.time_step_gpu-1", mlp_cache()) is None  # no GPU clock either


def test_an_mlp_epoch_replays_every_epoch_after_the_first_and_tracks_the_test_accuracy():
    assert len(run_cell("mlp.MlpEpoch.time_epoch-0", mlp_cache())["samples"]) == MLP_EPOCHS - 1
    assert run_cell("mlp.MlpEpoch.track_test_accuracy-0", mlp_cache()) == 0.931
    assert run_cell("mlp.MlpEpoch.track_test_accuracy-1", mlp_cache()) is None  # fp32 unfused: not trained


def test_each_mlp_groups_benchmarks_are_the_ones_results_reads():
    from asv_runner.discovery import disc_benchmarks

    names = {b.name for b in disc_benchmarks(BENCHMARKS)}
    assert {name for g in MLP_GROUPS.values() for name in g.benchmarks.values()} == {
        n for n in names if n.startswith("mlp.")
    }
