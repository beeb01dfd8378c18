"""On the GPU: nvmath's enum, cuBLASLt's semantics at the edges, poisoning, and the whole check."""

from __future__ import annotations

import numpy as np
import pytest

from fusedbench.catalog import PROVIDERS, Workload
from fusedbench.check import run_check
from fusedbench.dtypes import dtype_spec
from fusedbench.epilogs import EPILOGS, Epilog, epilog_spec
from fusedbench.gpu.checking import run_poisoned
from fusedbench.gpu.operands import make_operands
from fusedbench.gpu.providers import TORCH_PEER_EPILOGS, PreparedProvider, prepare_provider
from fusedbench.reference import ReferenceInputs, reference_outputs
from fusedbench.shapes import shape_set
from fusedbench.verify import Status, decode_mask, verify_outputs

pytestmark = pytest.mark.gpu


def refused_as_expected(cell) -> bool:
    """The only refusals a small check may report, each a library's own (seen on an H200, cuBLASLt 13.1)."""
    if cell.provider == "torch" and Epilog[cell.epilog] not in TORCH_PEER_EPILOGS:
        return cell.reason.startswith(f"torch has no op for {cell.epilog} ")
    if cell.dtype == "fp8" and cell.shape != "(128,64)x(64,96)":  # fp8 needs M, N, K multiples of 16
        return "divisible by 16" in cell.reason
    if cell.dtype == "fp8" and cell.epilog in ("BGRADA", "BGRADB"):  # fp8 runs only TN; these need NT
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
    mask = decode_mask(run_poisoned(prepared, "cupy")["relu_aux"].get(), workload.m)
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
    outputs = {"result": run_poisoned(lazy, "cupy")["result"].get()}
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
        run_poisoned(prepared, operands.framework)  # raises if the pool handed out another block
    finally:
        prepared.release()


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
        if cell.dtype in ("fp16", "bf16", "fp32", "tf32") and cell.provider != "torch":
            assert cell.status is Status.OK, cell


def test_fp8_fused_refuses_only_the_operand_bias_gradients(small_check):
    fp8_refused = {
        c.epilog
        for c in small_check.cells
        if c.dtype == "fp8"
        and c.provider == "fused"
        and c.status is Status.UNSUPPORTED
        and c.shape == "(128,64)x(64,96)"
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

    from fusedbench.gpu.bench import measure_group
    from fusedbench.measure import SAMPLES
    from fusedbench.suites import STATUS_DIR_VARIABLE, BenchmarkGroup

    monkeypatch.setenv(STATUS_DIR_VARIABLE, str(tmp_path))
    group = BenchmarkGroup("Fp16Small", "fp16", "small", ("RELU_BIAS", "DGELU_BGRAD"), tuple(PROVIDERS))
    report = measure_group(group)
    assert len(report["cells"]) == group.cell_count
    for (epilog, _, provider), cell in report["cells"].items():
        if provider == "torch" and epilog == "DGELU_BGRAD":
            assert cell["status"] == "unsupported" and "torch has no op" in cell["reason"]
        else:
            assert cell["status"] == "ok", cell["reason"]
            assert len(cell["samples"]) == SAMPLES and all(0 < s < 1 for s in cell["samples"])
    written = json.loads((tmp_path / "Fp16Small.json").read_text())
    assert len(written["cells"]) == group.cell_count
