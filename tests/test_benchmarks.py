"""The asv suite hands the recorded GPU samples to asv unchanged (driven through asv_runner, no GPU)."""

import os

import pytest
from asv_runner.discovery import get_benchmark_from_name

from fusedbench.asv_bridge import GroupCache, ReplayClock
from fusedbench.model import Cell, CellKey
from fusedbench.providers import PROVIDERS
from fusedbench.sampling import SAMPLES
from fusedbench.suites import ASV_VERSIONS, GROUPS

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
    keys = [get_setup_cache_key(b._setup_cache) for b in benchmarks]
    assert len(keys) == len(set(keys))  # asv shares a cache between benchmarks with the same key
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
