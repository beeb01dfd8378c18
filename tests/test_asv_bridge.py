"""What a group's setup_cache does without a GPU or under a host-named machine (no GPU needed)."""

import json

import pytest
from conftest import make_checkout

import fusedbench.measure.asv_bridge as bridge
import fusedbench.measure.telemetry
from fusedbench.catalog.model import Status
from fusedbench.catalog.suites import GROUPS, MLP_GROUPS
from fusedbench.errors import GpuUnavailable
from fusedbench.measure.records import load_records

NO_CUPY = "the fusedbench asv suite needs cupy (No module named 'cupy'); install fusedbench[cu12] or fusedbench[cu13]"


@pytest.fixture
def asv_checkout(tmp_path, monkeypatch):
    """A committed fusedbench checkout whose asv run is recording under machine `vm`."""
    root = make_checkout(tmp_path / "fusedbench")
    (root / "results" / "vm").mkdir(parents=True)
    (root / "results" / "vm" / "machine.json").write_text(json.dumps({"machine": "vm", "version": 1}))
    return root


def no_gpu(command):
    raise GpuUnavailable(NO_CUPY)


def test_without_a_gpu_every_cell_is_skipped_with_one_line_and_recorded(asv_checkout, monkeypatch):
    import fusedbench.measure.gpu

    monkeypatch.setattr(fusedbench.measure.gpu, "load_gpu_stack", no_gpu)
    cache = bridge.measure_for_asv("Quick", str(asv_checkout))
    assert cache.why_not == f"Quick: every cell skipped: no GPU: {NO_CUPY}"
    assert cache.cells == {}  # every cell's process skips
    (record,), problems = load_records(str(asv_checkout / "results"))
    assert problems == [] and (record.machine, record.group) == ("vm", "Quick")
    assert record.sampling == "williams-rounds/burst"
    assert len(record.cells) == GROUPS["Quick"].cell_count and {c.status for c in record.cells} == {Status.SKIPPED}
    assert {c.reason for c in record.cells} == {f"no GPU: {NO_CUPY}"}  # `fusedbench table` shows why


def test_without_a_gpu_every_mlp_cell_is_recorded_skipped_under_its_workload(asv_checkout, monkeypatch):
    import fusedbench.measure.gpu

    monkeypatch.setattr(fusedbench.measure.gpu, "load_gpu_stack", no_gpu)
    cache = bridge.measure_mlp_for_asv("MlpStep", str(asv_checkout))
    assert cache.why_not == f"MlpStep: every cell skipped: no GPU: {NO_CUPY}" and cache.cells == {}
    (record,), _ = load_records(str(asv_checkout / "results"))
    assert record.group == "MlpStep" and len(record.cells) == MLP_GROUPS["MlpStep"].cell_count
    first = record.cells[0].key
    assert (first.epilog, first.m, first.k, first.n, first.provider) == ("mlp-step", 30, 64, 256, "fused")


def test_a_run_recorded_under_another_name_than_the_gpus_measures_nothing(asv_checkout, monkeypatch):
    import fusedbench.measure.gpu

    monkeypatch.setattr(fusedbench.measure.gpu, "load_gpu_stack", lambda command: object())
    monkeypatch.setattr(bridge, "gpu_machine_name", lambda: "h100-80gb-hbm3")
    cache = bridge.measure_for_asv("Quick", str(asv_checkout))
    assert cache.why_not == (
        "Quick: every cell skipped: asv records this run under machine 'vm', not under this GPU's name "
        "'h100-80gb-hbm3'; run `fusedbench machine` and pass `--machine h100-80gb-hbm3` to asv run"
    )
    ceilings = bridge.measure_ceilings_for_asv("gemm", str(asv_checkout), ["fp16"])
    assert ceilings.cells == {} and ceilings.why_not.startswith("GemmCeiling: every cell skipped: asv records")


def test_outside_a_fusedbench_checkout_nothing_is_recorded(tmp_path, monkeypatch):
    import fusedbench.measure.gpu

    monkeypatch.setattr(fusedbench.measure.gpu, "load_gpu_stack", no_gpu)
    cache = bridge.measure_for_asv("Quick", str(tmp_path))
    assert cache.why_not.startswith("Quick: every cell skipped: no GPU")
    assert list(tmp_path.iterdir()) == []


def test_a_checkout_that_cannot_name_its_commit_is_one_line_not_a_traceback(tmp_path, monkeypatch):
    import shutil

    root = make_checkout(tmp_path / "fusedbench")
    shutil.rmtree(root / ".git")  # fusedbench's files, but no git checkout
    cache = bridge.measure_for_asv("Quick", str(root))
    assert cache.why_not.startswith("Quick: every cell skipped: cannot tell which commit is measured: ")
    assert "needs to be a git checkout of fusedbench" in cache.why_not and "\n" not in cache.why_not


def test_the_gpu_nvml_describes_is_the_one_cuda_calls_device_0(monkeypatch):
    from types import SimpleNamespace

    from fusedbench.measure.telemetry import visible_gpu_handle

    nvml = SimpleNamespace(nvmlDeviceGetHandleByIndex=lambda i: f"index {i}", nvmlDeviceGetHandleByUUID=lambda u: u)
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    assert visible_gpu_handle(nvml) == "index 0"
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3,1")
    assert visible_gpu_handle(nvml) == "index 3"
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "GPU-8b2c1a3e-0000-1111-2222-333344445555")
    assert visible_gpu_handle(nvml) == "GPU-8b2c1a3e-0000-1111-2222-333344445555"


class NoTelemetry:
    """NVML's sampler where there is no GPU: nothing sampled."""

    summary = type("Summary", (), {"to_json": lambda self: {}})()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def device_facts(self):
        return {}


@pytest.mark.parametrize("group", ["MlpStep", "MlpEpoch"])
def test_each_mlp_group_is_measured_by_its_own_function_recorded_and_a_tuned_or_injected_run_measures_none(
    monkeypatch, asv_checkout, group
):
    from fusedbench.catalog.deliberate import Deliberate
    from fusedbench.catalog.injection import parse_injection
    from fusedbench.catalog.model import Cell
    from fusedbench.catalog.tuning import parse_tuning
    from fusedbench.measure.gpu import mlp_bench

    first = MLP_GROUPS[group].cell_keys()[0]
    seen = []
    for name in ("measure_mlp_steps", "measure_mlp_epochs"):
        fake = lambda stack, g, name=name: seen.append(name) or ([Cell.refused(first, "no")], {})  # noqa: E731
        monkeypatch.setattr(mlp_bench, name, fake)
    monkeypatch.setattr(fusedbench.measure.telemetry, "TelemetrySampler", NoTelemetry)
    stack = type("Stack", (), {"versions": lambda self: {"cupy": "14"}})()
    run = bridge.current_asv_run(str(asv_checkout))
    changes = (
        Deliberate(),
        Deliberate(parse_tuning("fused:algorithm=3")),
        Deliberate(None, parse_injection("Quick=5%")),
    )
    for deliberate in changes:
        monkeypatch.setattr(bridge, "_where_and_what", lambda root, d=deliberate: (run, stack, d))
        cache = bridge.measure_mlp_for_asv(group, str(asv_checkout))
        assert cache.why_not == "" and cache.cells == {}
    assert seen == ["measure_mlp_steps" if group == "MlpStep" else "measure_mlp_epochs"]  # the changed runs: none
    measured, tuned, injected = load_records(str(asv_checkout / "results"))[0]
    assert [c.status for c in measured.cells] == [Status.UNSUPPORTED] and measured.environment["versions"]
    for changed, flag in ((tuned, "--tune fused:algorithm=3"), (injected, "--inject 'Quick=5%'")):
        assert len(changed.cells) == MLP_GROUPS[group].cell_count
        assert f"takes no deliberate change ({flag}); run it without" in changed.cells[0].reason
    assert measured.sampling == "williams-rounds/back-to-back"  # steps run warm, as in a loop: no lead-in
