"""On the GPU: how calls are timed. The telemetry read around every sample, the heater of the sustained lead-in,
fused-autotuned's pick, and the protocol screen end to end."""

from __future__ import annotations

import json
import statistics

import pytest

from fusedbench.catalog.dtypes import dtype_spec
from fusedbench.catalog.epilogs import epilog_spec
from fusedbench.catalog.workloads import Workload
from fusedbench.measure.gpu.operands import make_operands
from fusedbench.measure.gpu.providers import prepare_provider
from fusedbench.measure.gpu.timing import CudaEventClock, Heater, Timing
from fusedbench.measure.sampling import BURST, SAMPLES, SUSTAINED
from fusedbench.measure.telemetry import SAMPLE_SERIES, THROTTLE_REASONS

pytestmark = pytest.mark.gpu


def _gemm(cupy, size: int):
    a = cupy.ones((size, size), dtype=cupy.float16)
    out = cupy.empty_like(a)
    return lambda: cupy.matmul(a, a, out=out)


@pytest.mark.parametrize("protocol", [BURST, SUSTAINED], ids=lambda p: p.name)
def test_every_sample_has_its_clock_power_and_reasons_and_a_cell_its_temperature(gpu_stack, protocol):
    timing = Timing.open(gpu_stack, protocol)
    try:
        timed = timing.sample({"small": _gemm(gpu_stack.cupy, 1024), "large": _gemm(gpu_stack.cupy, 4096)})
        series = {name: timing.probe.take(name) for name in timed}
        assert timing.probe.take("small") == {}  # taken once: the next cell starts afresh
    finally:
        timing.close()
    for name, samples in timed.items():
        assert len(samples) == SAMPLES and all(0 < s < 1 for s in samples), name
        readings = series[name]
        assert set(readings) == {*SAMPLE_SERIES, "temperature_c"}
        assert all(len(readings[key]) == SAMPLES for key in SAMPLE_SERIES)
        assert all(100 <= mhz <= 4000 for key in ("sm_mhz_before", "sm_mhz_after") for mhz in readings[key])
        assert all(watts == -1 or 20 <= watts <= 2000 for watts in readings["power_w"])
        assert all(reasons >= 0 for reasons in readings["throttle"]) and 10 <= readings["temperature_c"][0] <= 110
    # the throttle bits fusedbench names are NVML's own
    assert all(bit & (bit - 1) == 0 for bit in THROTTLE_REASONS)


def test_the_heater_keeps_the_gpu_busy_about_as_long_as_asked(gpu_stack):
    heater, clock = Heater(gpu_stack.cupy), CudaEventClock(gpu_stack.cupy)
    heater(0.01)  # at the clock the calibration ran at, or near it
    for asked in (0.02, 0.1):
        clock.start()
        heater(asked)
        took = clock.stop()
        assert asked / 2 < took < asked * 2, (asked, took)


def test_fused_autotuned_executes_the_algorithm_its_own_timing_picked(gpu_stack):
    workload = Workload(epilog_spec("RELU_BIAS"), dtype_spec("fp16"), 2048, 1024, 4096)
    operands = make_operands(gpu_stack, workload, seed=3)
    autotuned, fused = (prepare_provider(name, gpu_stack, operands) for name in ("fused-autotuned", "fused"))
    try:
        tuned, heuristic = autotuned.provenance, fused.provenance
        assert tuned["chosen_by"] == "autotune" and heuristic["chosen_by"] == "heuristic"
        assert tuned["algorithms_offered"] == heuristic["algorithms_offered"] >= 1
        assert 0 <= tuned["heuristic_rank"] < tuned["algorithms_offered"] and tuned["autotune_s"] > 0
        assert "autotune_s" not in heuristic and heuristic["heuristic_rank"] == 0
        assert autotuned.run()["result"] is operands.result
    finally:
        autotuned.release()
        fused.release()
    checked = prepare_provider("fused-autotuned", gpu_stack, operands, timed=False)  # a check: nothing timed
    try:
        offered = checked.provenance["algorithms_offered"]
        assert (
            checked.provenance["chosen_by"] == "the check's algorithm in turn"
            and "autotune_s" not in checked.provenance
        )
        assert checked.provenance["heuristic_rank"] == workload.in_turn(offered)
    finally:
        checked.release()


def test_the_protocol_screen_times_every_candidate_and_writes_the_gpu_it_ran_on(gpu_stack, tmp_path, capsys):
    from fusedbench.cli import main

    path = tmp_path / "screen.json"
    argv = ["protocols", "--group", "Fp16Membound", "--workloads", "1", "--repeats", "2"]
    code = main([*argv, "--protocol", "back-to-back", "--protocol", "burst", "--json", str(path)])
    out = capsys.readouterr().out
    assert code == 0 and "back-to-back" in out and "burst" in out
    screen = json.loads(path.read_text())
    assert screen["gpu"]["uuid"].startswith("GPU-") and screen["gpu"]["driver"] and screen["versions"]
    assert sorted((run["protocol"], run["repeat"]) for run in screen["runs"]) == [
        ("back-to-back", 0),
        ("back-to-back", 1),
        ("burst", 0),
        ("burst", 1),
    ]
    for run in screen["runs"]:
        assert run["seconds"] > 0 and {"fused", "unfused", "gemm"} <= set(run["cells"])
        for cell in run["cells"].values():
            assert len(cell["samples"]) == SAMPLES and len(cell["telemetry"]["sm_mhz_after"]) == SAMPLES
    assert {row["protocol"] for row in screen["summary"]} == {"back-to-back", "burst"}


def test_an_injected_slowdown_stretches_each_chosen_call_by_its_fraction_and_no_other(gpu_stack):
    """Three runs of one GEMM in the same rounds, two stretched: each median comes out its fraction slower than the
    untouched run's (the spin waits on the GPU's nanosecond timer, whatever the SM clock does)."""
    gemm = _gemm(gpu_stack.cupy, 16384)  # about 10 ms on an H100 or H200: a 'large' cell
    timing = Timing.open(gpu_stack, stretch=True)
    try:
        assert 0 <= timing.stretcher.overhead_ns < 50_000
        timed = timing.sample(
            {"plain": gemm, "five": gemm, "twenty": gemm}, samples=20, slower={"five": 0.05, "twenty": 0.2}
        )
    finally:
        timing.close()
    median = {name: statistics.median(samples) for name, samples in timed.items()}
    assert median["five"] / median["plain"] == pytest.approx(1.05, abs=0.015), median
    assert median["twenty"] / median["plain"] == pytest.approx(1.20, abs=0.02), median


def test_an_injected_run_records_its_injection_under_its_own_machine_and_slows_only_its_target(
    gpu_stack, tmp_path, monkeypatch
):
    from conftest import make_checkout

    import fusedbench.measure.asv_bridge as bridge
    from fusedbench.catalog.deliberate import Deliberate
    from fusedbench.catalog.injection import INJECT_VARIABLE, parse_injection
    from fusedbench.catalog.suites import GROUPS, BenchmarkGroup
    from fusedbench.measure.machine import gpu_machine_name
    from fusedbench.measure.records import load_records

    group = BenchmarkGroup("Fp16Injected", "fp16", "llm", ("DEFAULT",), ("fused", "gemm"))
    target = next(key for w in group.workloads() for key in w.cell_keys(["fused"]))
    injection = parse_injection(f"{target.label}=30%")
    root = make_checkout(tmp_path / "fusedbench")
    machine = Deliberate(None, injection).machine(gpu_machine_name())
    (root / "results" / machine).mkdir(parents=True)
    (root / "results" / machine / "machine.json").write_text(json.dumps({"machine": machine, "version": 1}))
    monkeypatch.setitem(GROUPS, group.name, group)
    monkeypatch.setenv(INJECT_VARIABLE, injection.label)
    cache = bridge.measure_for_asv(group.name, str(root))
    assert cache.why_not == "" and all(c.ok for c in cache.cells.values())
    (record,), _ = load_records(str(root / "results"))
    assert record.machine == machine and record.environment["injection"] == injection.to_json()
    cells = list(cache.cells.values())  # the samples: asv keeps them, the record does not
    ratios = {}
    for cell in cells:
        gemm = next(c for c in cells if c.key.workload == cell.key.workload and c.key.provider == "gemm")
        ratios[cell.key.label] = statistics.median(cell.samples) / statistics.median(gemm.samples)
    assert ratios[target.label] == pytest.approx(1.3, abs=0.06), ratios  # fused and gemm: one GEMM, one stretched
    assert all(ratio < 1.15 for label, ratio in ratios.items() if label != target.label), ratios
    monkeypatch.delenv(INJECT_VARIABLE)  # the injected machine without its injection: refused, nothing mixes
    assert "not under this GPU's name" in bridge.measure_for_asv(group.name, str(root)).why_not


def test_a_confirmation_times_both_sides_in_lock_step_and_sees_an_injected_slowdown_side_by_side(gpu_stack):
    """Two real workers from this checkout, one with a 5% injection on the fused RELU_BIAS at the seed shape: side by
    side, the target comes out 5% slower and its neighbours as fast as before; each side checks its cells against
    float64 first, autotunes on its own (both picks timed on both sides where they differ), and keeps each cell's
    telemetry and kernels as a plain run does; the ceilings are timed on each side."""
    import os

    from fusedbench.catalog.model import Request
    from fusedbench.measure.confirm import Asked, Side, measure_again

    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    target = "RELU_BIAS/fp16/(65536,16384)x(16384,8192)/fused"
    sides = [Side("baseline", root), Side("candidate", root, {"FUSEDBENCH_INJECT": f"{target}=5%"})]
    providers = ("fused", "fused-autotuned", "gemm")
    request = Request("Quick", "RELU_BIAS", "fp16", 65536, 16384, 8192, providers)
    check = {"epilogs": ["RELU_BIAS"], "dtypes": ["fp16"], "providers": list(providers)}
    measured = measure_again([request], sides, rounds=12, asked=Asked(check=check, ceilings=["fp16"]))
    assert measured.not_measured == [] and measured.calls == 72 + 24 * len(measured.picks)
    assert all(found["checked"] > 0 and found["failures"] == [] for found in measured.checked.values())
    for pick in measured.picks:  # the sides' autotuning chose apart: both picks timed on both sides, 12 rounds each
        assert pick.algorithms["baseline"] != pick.algorithms["candidate"]
        assert {len(s) for by_side in pick.samples.values() for s in by_side.values()} == {12}
    assert (
        measured.hellos["baseline"]["benchmark_versions"]["Quick"]
        == measured.hellos["candidate"]["benchmark_versions"]["Quick"]
    )
    for cell in measured.cells["candidate"]:  # as a plain run keeps them: the GPU's state per call, the kernels
        assert len(cell.telemetry["sm_mhz_before"]) == 12 and cell.provenance["kernels"], cell.key.label
    assert (
        measured.ceilings["baseline"]["gemm"]["fp16"]["samples"] and len(measured.ceilings["candidate"]["copy"]) == 10
    )
    median = {
        (side, c.key.provider): statistics.median(c.samples) for side, cells in measured.cells.items() for c in cells
    }
    assert median[("candidate", "fused")] / median[("baseline", "fused")] == pytest.approx(1.05, abs=0.015), median
    for provider in ("fused-autotuned", "gemm"):  # fused-autotuned: the candidate's pick, held fixed
        assert median[("candidate", provider)] / median[("baseline", provider)] == pytest.approx(1.0, abs=0.015), median


def test_a_side_by_side_a_a_record_holds_both_sides_of_a_workload_timed_alike(gpu_stack):
    """The checkout's code on both sides (`calibrate --measure-side-by-side`, one workload): each side's cells timed
    every round, the group at its benchmark version, and the sides within a few per cent of each other."""
    import os

    from fusedbench.catalog.model import Request
    from fusedbench.catalog.suites import ASV_VERSIONS
    from fusedbench.paired.margins import measure_side_by_side
    from fusedbench.regressions.margins import record_runs

    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    request = Request("Quick", "RELU_BIAS", "fp16", 65536, 16384, 8192, ("fused", "gemm"))
    record = measure_side_by_side(root, "this-gpu", "0" * 40, [request], rounds=6)
    assert record["calls"] == 24 and record["not_measured"] == []
    assert record["groups"]["Quick"]["version"] == ASV_VERSIONS["Quick"]
    base, cand = record_runs(record)
    for provider in ("fused", "gemm"):
        times = [run.cells[run.cells["provider"] == provider]["raw"].iloc[0] for run in (base, cand)]
        assert [len(t) for t in times] == [6, 6]
        assert statistics.median(times[1]) / statistics.median(times[0]) == pytest.approx(1.0, abs=0.03), times
