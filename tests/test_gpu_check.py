"""On the GPU: nvmath's enum, cuBLASLt's semantics at the edges, poisoning, and the whole check."""

from __future__ import annotations

import os
import sys

import numpy as np
import pytest

from fusedbench.catalog.dtypes import dtype_spec
from fusedbench.catalog.epilogs import EPILOGS, Epilog, epilog_spec
from fusedbench.catalog.model import Status
from fusedbench.catalog.providers import LADDER
from fusedbench.catalog.shapes import shape_set
from fusedbench.catalog.workloads import Workload
from fusedbench.measure.check import run_check
from fusedbench.measure.gpu.arrays import data_ptr, to_host
from fusedbench.measure.gpu.checking import run_poisoned
from fusedbench.measure.gpu.operands import make_operands
from fusedbench.measure.gpu.providers import TORCH_PEER_EPILOGS, PreparedProvider, prepare_provider
from fusedbench.measure.reference import ReferenceInputs, reference_outputs
from fusedbench.measure.verify import decode_mask, verify_outputs

pytestmark = pytest.mark.gpu


def refused_as_expected(cell) -> bool:
    """The only refusals a small check may report, each a library's own (seen on an H200, cuBLASLt 13.1)."""
    key = cell.key
    if key.provider == "torch" and Epilog[key.epilog] not in TORCH_PEER_EPILOGS:
        return cell.reason.startswith(f"torch has no op for {key.epilog} ")
    if key.dtype == "fp8" and key.shape != "(128,64)x(64,96)":  # fp8 needs M, N, K multiples of 16
        return "divisible by 16" in cell.reason
    if key.dtype == "fp8" and key.epilog in ("BGRADA", "BGRADB") and key.provider == "textbook":
        return "not implemented for 'Float8_e4m3fn'" in cell.reason  # torch cannot sum fp8 operands
    if key.dtype == "fp8" and key.epilog in ("BGRADA", "BGRADB"):  # fp8 runs only TN; these need NT
        return "CUBLAS_STATUS_NOT_SUPPORTED" in cell.reason
    return False


def integer_workload(stack, name: str, m=64, k=32, n=48):
    """Operands whose products are exact in fp16, so A@B has exact zeros at known places."""
    workload = Workload(epilog_spec(name), dtype_spec("fp16"), m, k, n)
    operands = make_operands(stack, workload, seed=1)
    rng = np.random.default_rng(2)
    cupy = stack.cupy
    operands.a[...] = cupy.asarray(rng.integers(-2, 3, (m, k)).astype(np.float16))
    operands.b[...] = cupy.asarray(rng.integers(-2, 3, (k, n)).astype(np.float16))
    return workload, operands


def test_nvmath_epilog_enum_has_our_names_and_values(gpu_stack):
    nvmath_epilogs = {e.name: int(e) for e in gpu_stack.nvmath_advanced.MatmulEpilog}
    assert nvmath_epilogs == {spec.name: spec.value for spec in EPILOGS.values()}


def test_relu_aux_bit_is_set_at_exactly_zero(gpu_stack):
    workload, operands = integer_workload(gpu_stack, "RELU_AUX")
    inputs = operands.reference_inputs()
    pre = inputs.a @ inputs.b
    assert (pre == 0).sum() > 20  # the integer operands give plenty of exact zeros
    prepared = prepare_provider("fused", gpu_stack, operands)
    outputs, _ = run_poisoned(prepared, "cupy")
    mask = decode_mask(outputs["relu_aux"].get(), workload.m)
    prepared.release()
    np.testing.assert_array_equal(mask, pre >= 0)  # strictly: no forgiveness near zero here


def test_relu_keeps_nan_in_cublaslt_as_the_reference_does(gpu_stack):
    workload, operands = integer_workload(gpu_stack, "RELU")
    operands.a[3, :] = np.nan  # row 3 of A@B becomes NaN before the ReLU
    prepared = prepare_provider("fused", gpu_stack, operands)
    operands.result[...] = 7.0  # a finite sentinel, so a NaN below was written by cuBLASLt
    prepared.run()
    result = operands.result.get()
    prepared.release()
    assert np.all(np.isnan(result[3]))
    reference = reference_outputs(workload.epilog, operands.reference_inputs()).outputs["result"]
    np.testing.assert_array_equal(result, reference)


def test_unwritten_output_is_caught_by_the_poison(gpu_stack):
    workload = Workload(epilog_spec("BIAS"), dtype_spec("fp16"), 64, 32, 48)
    operands = make_operands(gpu_stack, workload, seed=3)
    lazy = PreparedProvider(run=lambda: {"result": operands.result}, owned_outputs=(operands.result,))
    outputs = {"result": run_poisoned(lazy, "cupy")[0]["result"].get()}
    reference = reference_outputs(workload.epilog, operands.reference_inputs())
    (check,) = verify_outputs(outputs, reference, workload.dtype.tolerance)
    assert not check.ok
    assert f"{64 * 48} non-finite" in check.detail


@pytest.mark.parametrize("dtype", ["fp16", "bf16"])
def test_library_allocated_aux_outputs_are_poisoned_too(gpu_stack, dtype):
    workload = Workload(epilog_spec("GELU_AUX_BIAS"), dtype_spec(dtype), 128, 64, 96)
    operands = make_operands(gpu_stack, workload, seed=4)
    prepared = prepare_provider("fused", gpu_stack, operands)
    try:
        outputs, poisoned = run_poisoned(prepared, operands.framework)  # raises if the pool handed out another block
        host = {name: to_host(array) for name, array in outputs.items()}
    finally:
        prepared.release()
    assert set(poisoned) == {"gelu_aux"}  # nvmath allocates the aux output inside execute()
    assert data_ptr(outputs["gelu_aux"]) == poisoned["gelu_aux"]  # ... into the block that was poisoned
    reference = reference_outputs(workload.epilog, operands.reference_inputs())
    checks = verify_outputs(host, reference, workload.dtype.tolerance)
    assert [check.name for check in checks] == ["gelu_aux", "result"] and all(check.ok for check in checks), checks


@pytest.fixture(scope="module")
def small_check():
    return run_check(shapes="small", seed=20261121)


def test_every_cell_of_the_small_check_passes_or_is_refused_by_a_library(small_check):
    assert len(small_check.cells) == 16 * 5 * len(shape_set("small")) * 6
    failed = [c for c in small_check.cells if c.status is Status.FAILED]
    assert failed == []
    for cell in small_check.cells:
        assert (cell.status is Status.UNSUPPORTED) == refused_as_expected(cell), cell


def test_fused_and_unfused_cover_every_epilog_at_16_bit_and_32_bit(small_check):
    for cell in small_check.cells:
        if cell.key.dtype in ("fp16", "bf16", "fp32", "tf32") and cell.key.provider != "torch":
            assert cell.status is Status.OK, cell


def test_fp8_fused_refuses_only_the_operand_bias_gradients(small_check):
    fp8_refused = {
        c.key.epilog
        for c in small_check.cells
        if c.key.dtype == "fp8"
        and c.key.provider == "fused"
        and c.status is Status.UNSUPPORTED
        and c.key.shape == "(128,64)x(64,96)"
    }
    assert fp8_refused == {Epilog.BGRADA.name, Epilog.BGRADB.name}


def test_reference_inputs_round_trip_the_relu_mask(gpu_stack):
    workload = Workload(epilog_spec("DRELU"), dtype_spec("bf16"), 200, 72, 136)
    operands = make_operands(gpu_stack, workload, seed=5)
    inputs: ReferenceInputs = operands.reference_inputs()
    negative = operands.relu_negative.cpu().numpy()
    np.testing.assert_array_equal(inputs.relu_mask, ~negative)


def test_a_group_is_measured_in_rounds_with_every_cell_timed_or_refused(gpu_stack, tmp_path, monkeypatch):
    import json

    from fusedbench.catalog.suites import BenchmarkGroup
    from fusedbench.measure.gpu.bench import measure_group
    from fusedbench.measure.progress import PROGRESS_DIR_VARIABLE
    from fusedbench.measure.sampling import SAMPLES

    monkeypatch.setenv(PROGRESS_DIR_VARIABLE, str(tmp_path))
    group = BenchmarkGroup("Fp16Small", "fp16", "small", ("RELU_BIAS", "DGELU_BGRAD"), LADDER)
    cells = measure_group(gpu_stack, group)
    assert len(cells) == group.cell_count
    for cell in cells:
        if cell.key.provider == "torch" and cell.key.epilog == "DGELU_BGRAD":
            assert cell.status is Status.UNSUPPORTED and "torch has no op" in cell.reason
        else:
            assert cell.status is Status.OK, cell.reason
            assert len(cell.samples) == SAMPLES and all(0 < s < 1 for s in cell.samples)
    progress = json.loads((tmp_path / "Fp16Small.progress").read_text())
    assert (progress["done"], progress["total"]) == (group.cell_count, group.cell_count)


def test_asv_s_setup_cache_records_every_cell_and_the_environment_beside_the_results(gpu_stack, tmp_path, monkeypatch):
    """What a plain `asv run` gets: the group's record under this GPU's machine name, with its statuses."""
    import json

    from conftest import make_checkout

    import fusedbench.measure.asv_bridge as bridge
    from fusedbench.catalog.suites import GROUPS, BenchmarkGroup
    from fusedbench.measure.machine import gpu_machine_name
    from fusedbench.measure.records import load_records

    root = make_checkout(tmp_path / "fusedbench")
    machine = gpu_machine_name()
    (root / "results" / machine).mkdir(parents=True)
    (root / "results" / machine / "machine.json").write_text(json.dumps({"machine": machine, "version": 1}))
    group = BenchmarkGroup("Fp16Small", "fp16", "small", ("RELU_BIAS", "DRELU"), LADDER)
    monkeypatch.setitem(GROUPS, group.name, group)
    cache = bridge.measure_for_asv(group.name, str(root))
    assert cache.why_not == "" and len(cache.cells) == group.cell_count
    (record,), problems = load_records(str(root / "results"))
    assert problems == [] and (record.machine, record.group, record.dirty) == (machine, "Fp16Small", False)
    assert record.environment["gpu"]["name"] == gpu_stack.device_name and record.environment["versions"]["cublaslt"]
    versions = record.environment["versions"]
    assert versions["nvmath-python"] and versions["cupy"] and versions["torch"]  # every provider's libraries
    loaded = record.environment["stack"]["libraries"]  # the files this process loaded, as its map shows them
    assert os.path.isfile(loaded["libcublasLt"]["path"]) and loaded["libcublasLt"]["version"].startswith("1")
    assert record.environment["stack"]["python"] == sys.executable
    assert {c.status for c in record.cells} == {Status.OK, Status.UNSUPPORTED}  # torch has no DRELU
    (root / "results" / "vm").mkdir()
    (root / "results" / "vm" / "machine.json").write_text(json.dumps({"machine": "vm", "version": 1}))
    refused = bridge.measure_for_asv(group.name, str(root))  # asv now records under the host name: nothing is measured
    assert refused.why_not.startswith("Fp16Small: every cell skipped: asv records this run under machine 'vm'")
    assert all(c.status is Status.SKIPPED for c in refused.cells.values())


def test_a_tuned_run_times_only_its_provider_tuned_records_it_and_keeps_apart(gpu_stack, tmp_path, monkeypatch):
    """FUSEDBENCH_TUNE=fused:algorithm=N: the fused cells execute another of the heuristic's algorithms, still
    verified; every other provider is as it was; the run records under the tuned machine, never the GPU's."""
    import json

    from conftest import make_checkout

    import fusedbench.measure.asv_bridge as bridge
    from fusedbench.catalog.deliberate import Deliberate
    from fusedbench.catalog.suites import GROUPS, BenchmarkGroup
    from fusedbench.catalog.tuning import TUNE_VARIABLE, parse_tuning
    from fusedbench.measure.gpu.checking import check_workload
    from fusedbench.measure.machine import gpu_machine_name
    from fusedbench.measure.records import load_records

    tuning = parse_tuning("fused:algorithm=3")
    workload = Workload(epilog_spec("RELU_BIAS"), dtype_spec("fp16"), 1024, 512, 768)
    checked = check_workload(gpu_stack, workload, ["fused", "gemm"], seed=3, tuning=tuning)
    assert [c.status for c in checked] == [Status.OK, Status.OK], [c.reason for c in checked]

    root = make_checkout(tmp_path / "fusedbench")
    machine = Deliberate(tuning).machine(gpu_machine_name())
    (root / "results" / machine).mkdir(parents=True)
    (root / "results" / machine / "machine.json").write_text(json.dumps({"machine": machine, "version": 1}))
    group = BenchmarkGroup("Fp16Tuned", "fp16", "small", ("RELU_BIAS",), ("unfused", "fused", "gemm"))
    monkeypatch.setitem(GROUPS, group.name, group)
    monkeypatch.setenv(TUNE_VARIABLE, tuning.label)
    cache = bridge.measure_for_asv(group.name, str(root))
    assert cache.why_not == "" and all(c.ok for c in cache.cells.values())
    (record,), _ = load_records(str(root / "results"))
    assert record.machine == machine and record.environment["tuning"] == tuning.to_json()
    for cell in record.cells:
        if cell.key.provider == "fused":
            offered = cell.provenance["algorithms_offered"]
            assert offered > 1 and cell.provenance["heuristic_rank"] == min(3, offered - 1) > 0
            assert cell.provenance["chosen_by"] == tuning.label
        else:
            assert cell.provenance["chosen_by"] == "heuristic" and cell.provenance["heuristic_rank"] == 0
    monkeypatch.delenv(TUNE_VARIABLE)  # the same asv machine without the tuning: refused, nothing mixes
    refused = bridge.measure_for_asv(group.name, str(root))
    assert "not under this GPU's name" in refused.why_not
