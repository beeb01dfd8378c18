"""On the GPU: the textbook is the blog's code, kernels are recorded per hot call, and the unfused passes are right
on every index path."""

from __future__ import annotations

import numpy as np
import pytest

from fusedbench.catalog.dtypes import dtype_spec
from fusedbench.catalog.epilogs import epilog_spec
from fusedbench.catalog.model import Status
from fusedbench.catalog.workloads import Workload
from fusedbench.measure.gpu.arrays import to_host
from fusedbench.measure.gpu.operands import make_operands
from fusedbench.measure.gpu.providers import prepare_provider
from fusedbench.measure.reference import reference_outputs
from fusedbench.measure.verify import verify_outputs

pytestmark = pytest.mark.gpu


@pytest.fixture(scope="module")
def recorder(gpu_stack):
    from fusedbench.measure.gpu.provenance import kernel_recorder

    recorder = kernel_recorder()
    if recorder.unavailable:
        pytest.fail(f"the gpu tests need kernel records: {recorder.unavailable}")
    return recorder


@pytest.mark.parametrize("epilog", ["RELU_BIAS", "DRELU_BGRAD"])
def test_the_textbook_is_the_blogs_code_same_outputs_same_kernels(gpu_stack, recorder, epilog):
    """The blog's snippets, transcribed as printed (fusedbench.measure.gpu.blog), against the textbook provider."""
    workload = Workload(epilog_spec(epilog), dtype_spec("fp16"), 1024, 512, 768)
    operands = make_operands(gpu_stack, workload, seed=11)
    blog, textbook = (prepare_provider(name, gpu_stack, operands) for name in ("blog", "textbook"))
    try:
        outputs = {name: prepared.run() for name, prepared in (("blog", blog), ("textbook", textbook))}
        kernels = {name: recorder.record(prepared.run) for name, prepared in (("blog", blog), ("textbook", textbook))}
    finally:
        blog.release()
        textbook.release()
    assert outputs["blog"].keys() == outputs["textbook"].keys() == {"result", *workload.epilog.outputs}
    for name in outputs["blog"]:
        np.testing.assert_array_equal(to_host(outputs["textbook"][name]), to_host(outputs["blog"][name]))
    names = {provider: [k["name"] for k in launched] for provider, launched in kernels.items()}
    assert names["textbook"] == names["blog"] and len(names["blog"]) >= 3, names  # GEMM, then array statements
    reference = reference_outputs(workload.epilog, operands.reference_inputs())
    host = {name: to_host(array) for name, array in outputs["textbook"].items()}
    assert all(check.ok for check in verify_outputs(host, reference, workload.dtype.tolerance))


def test_the_recorder_sees_exactly_the_calls_kernels(gpu_stack, recorder):
    cupy = gpu_stack.cupy
    x = cupy.ones(1 << 20, dtype=cupy.float32)
    outside = cupy.zeros_like(x)
    outside += 1  # launched before the record: not in it

    def call():
        y = x * 2
        return cupy.sqrt(y)

    launched = recorder.record(call)
    names = [k["name"] for k in launched]
    assert len(names) == 2 and names[0].startswith("cupy_multiply") and names[1].startswith("cupy_sqrt"), names
    assert all(k["us"] > 0 for k in launched)

    def copy():
        outside[...] = x  # cudaMemcpy: a copy, not a kernel

    assert recorder.record(copy) == []
    (copied,) = recorder.record(copy, copies=True)
    assert copied["name"] == "memcpy" and copied["us"] > 0


def test_every_timed_cell_records_its_kernels_and_cublaslt_algorithm(gpu_stack, recorder):
    from fusedbench.catalog.suites import BenchmarkGroup
    from fusedbench.measure.gpu.bench import measure_group

    providers = ("textbook", "unfused", "fused", "fused-autotuned", "gemm")
    group = BenchmarkGroup("Fp16Provenance", "fp16", "small", ("BIAS", "DRELU_BGRAD"), providers)
    cells = measure_group(gpu_stack, group)
    assert all(cell.status is Status.OK for cell in cells), [c.reason for c in cells if not c.ok]
    for cell in cells:
        kernels = [k["name"] for k in cell.provenance["kernels"]]
        assert kernels, cell
        assert cell.provenance["algorithm"].startswith("id="), cell.provenance
        chosen = {"fused-autotuned": "autotune"}.get(cell.key.provider, "heuristic")
        assert cell.provenance["chosen_by"] == chosen
        if cell.key.provider == "unfused":
            assert cell.provenance["same_size_copy"]["us"] > 0, cell.provenance
            # BIAS is one pointwise pass; DRELU_BGRAD one pass too since cells revision 4: the ReLU mask applied
            # inside the bias gradient's row sum
            last = {"BIAS": "fusedbench_epilog", "DRELU_BGRAD": "fusedbench_drelu_row_sum"}[cell.key.epilog]
            assert kernels[-1] == last, kernels
        if cell.key.provider == "gemm":
            assert not any(name.startswith(("fusedbench", "cupy")) for name in kernels), kernels


@pytest.mark.parametrize("m", [200, 202, 520], ids=["vector", "scalar", "tiles"])
@pytest.mark.parametrize("wide", [False, True])
@pytest.mark.parametrize(
    ("epilog", "dtype"),
    [
        ("GELU_AUX_BIAS", "bf16"),
        ("DRELU_BGRAD", "fp16"),
        ("DGELU", "fp32"),
        ("RELU_AUX", "fp16"),
        ("BGRADA", "bf16"),
        ("GELU_AUX_BIAS", "tf32"),
        ("RELU_AUX_BIAS", "fp32"),
        ("DRELU_BGRAD", "tf32"),
    ],
)
def test_unfused_passes_are_right_with_32_and_64_bit_indices(gpu_stack, monkeypatch, epilog, dtype, wide, m):
    """Arrays of 2**32 elements take the 64-bit path; forcing it on small ones checks it where a check is cheap.
    M = 200 takes 16-byte accesses (8 rows a thread, 4 in fp32 passes, two to a mask byte), M = 202 the scalar path,
    M = 520 more than one 256-row tile of a split fp32 mask."""
    from fusedbench.measure.gpu import kernels

    if wide:
        monkeypatch.setattr(kernels, "_fits_32_bits", lambda *arrays: False)
    workload = Workload(epilog_spec(epilog), dtype_spec(dtype), m, 72, 136)
    operands = make_operands(gpu_stack, workload, seed=12)
    prepared = prepare_provider("unfused", gpu_stack, operands)
    try:
        host = {name: to_host(array) for name, array in prepared.run().items()}
    finally:
        prepared.release()
    reference = reference_outputs(workload.epilog, operands.reference_inputs())
    checks = verify_outputs(host, reference, workload.dtype.tolerance)
    assert all(check.ok for check in checks), checks


@pytest.mark.parametrize("dtype", ["float16", "float32"])
@pytest.mark.parametrize(
    ("m", "n"),
    [(200, 136), (4099, 7), (1000, 5000), (256, 1)],
    ids=["small", "rows-not-a-multiple-of-8", "many-tiles-and-slices", "one-column"],
)
def test_the_row_sum_is_right_on_every_call(gpu_stack, dtype, m, n):
    """One launch per call sums each tile's slices through shared memory, atomics and a per-tile counter; the
    tile's last block leaves the totals and counters zeroed, so a second and third call must give the same sums."""
    from fusedbench.measure.gpu.kernels import make_row_sum

    cupy = gpu_stack.cupy
    x = cupy.asfortranarray(cupy.random.default_rng(3).standard_normal((m, n), dtype=cupy.float32).astype(dtype))
    out = cupy.empty(m, dtype=dtype)
    launch = make_row_sum(x, out)
    expected = cupy.asnumpy(x).astype(np.float64).sum(axis=1)
    tolerance = 1e-5 if dtype == "float32" else 2e-3
    for call in range(3):
        out.fill(cupy.nan)  # every call must write every row
        launch()
        got = cupy.asnumpy(out).astype(np.float64)
        np.testing.assert_allclose(got, expected, rtol=tolerance, atol=tolerance * np.sqrt(n), err_msg=f"call {call}")
