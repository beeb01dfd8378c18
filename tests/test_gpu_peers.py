"""On the GPU: the peers (the seed walkthrough's einsum and numba kernels, Triton's matmul with the epilog in its
accumulator, torch.compile's Inductor, CUTLASS's epilogue visitor trees) and unfused's one-pass backward."""

from __future__ import annotations

import numpy as np
import pytest

from fusedbench.catalog.dtypes import dtype_spec
from fusedbench.catalog.epilogs import epilog_spec
from fusedbench.catalog.model import Status
from fusedbench.catalog.providers import CONTROL_OF_UNFUSED, PEERS, PROVIDERS, UNFUSED
from fusedbench.catalog.shapes import shape_set
from fusedbench.catalog.workloads import Workload
from fusedbench.errors import Skipped
from fusedbench.measure.check import run_check
from fusedbench.measure.gpu.arrays import (
    POISON_BYTE,
    poison_next_allocations,
    poisoning_cupy_pool,
    synchronize,
    to_host,
)
from fusedbench.measure.gpu.checking import run_poisoned
from fusedbench.measure.gpu.operands import Operands, make_operands
from fusedbench.measure.gpu.provenance import kernel_provenance
from fusedbench.measure.gpu.providers import PreparedProvider, prepare_provider
from fusedbench.measure.reference import reference_outputs
from fusedbench.measure.verify import verify_outputs

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("peer", PEERS)
def test_every_cell_of_a_peers_small_check_passes(peer):
    """A test per peer (unfused and its one-pass control beside each), so the ones that compile (torch.compile,
    CUTLASS, Triton) can run in device calls of their own: the six together took over 9 minutes on an H100."""
    check = run_check(shapes="small", providers=[peer, CONTROL_OF_UNFUSED, UNFUSED], seed=20261122)
    assert len(check.cells) == 16 * 5 * len(shape_set("small")) * 3
    failed = [c for c in check.cells if c.status is Status.FAILED]
    assert failed == []
    for cell in check.cells:
        key = cell.key
        if key.provider == CONTROL_OF_UNFUSED and key.epilog not in ("DRELU_BGRAD", "DGELU_BGRAD"):
            assert cell.status is Status.UNSUPPORTED and "only for DRELU_BGRAD" in cell.reason, cell
        elif key.provider.startswith("numba") and key.epilog not in PROVIDERS[key.provider].epilog_names:
            assert cell.status is Status.UNSUPPORTED and "the walkthrough's forward epilogs" in cell.reason, cell
        elif key.provider.startswith("numba") and key.dtype not in ("fp32", "fp16"):
            assert cell.status is Status.UNSUPPORTED and "runs fp32 and fp16" in cell.reason, cell
        elif key.provider == "cutlass-evt" and key.epilog not in PROVIDERS[key.provider].epilog_names:
            assert cell.status is Status.UNSUPPORTED and "cutlass-evt: " + key.epilog in cell.reason, cell
        elif key.provider == "cutlass-evt" and key.dtype not in ("fp16", "bf16"):
            assert cell.status is Status.UNSUPPORTED and "builds fp16 and bf16 kernels" in cell.reason, cell
        elif key.provider == "cutlass-evt" and key.shape == "(129,33)x(33,77)":
            assert cell.status is Status.UNSUPPORTED and "16-byte aligned rows" in cell.reason, cell
        elif key.provider == "einsum" and key.dtype == "fp8":
            assert cell.status is Status.UNSUPPORTED, cell  # torch's einsum has no float8 product
        elif key.dtype == "fp8" and key.shape != "(128,64)x(64,96)" and key.provider != "triton":
            assert "divisible by 16" in cell.reason, cell  # cuBLASLt's and torch's fp8 need multiples of 16
        elif key.dtype == "fp8" and key.epilog in ("BGRADA", "BGRADB") and key.provider == UNFUSED:
            assert "CUBLAS_STATUS_NOT_SUPPORTED" in cell.reason, cell  # the GEMM itself: fp8 runs only TN
        elif key.dtype == "fp8" and key.epilog in ("BGRADA", "BGRADB") and key.provider == "torch-compile":
            assert "fp8 only in the TN layout" in cell.reason, cell
        else:
            assert cell.status is Status.OK, cell


@pytest.mark.parametrize("name", ["DRELU_BGRAD", "DGELU_BGRAD"])
@pytest.mark.parametrize("dtype", ["fp16", "bf16", "tf32"])
def test_one_pass_backward_writes_what_the_two_passes_write(gpu_stack, name, dtype):
    """The same D bit for bit; the bias gradient within rounding (one pass sums before D is rounded)."""
    workload = Workload(epilog_spec(name), dtype_spec(dtype), 1003, 64, 520)  # M not a multiple of 8: scalar tails
    operands = make_operands(gpu_stack, workload, seed=5)
    outputs = {}
    for provider in (UNFUSED, CONTROL_OF_UNFUSED):
        prepared = prepare_provider(provider, gpu_stack, operands)
        try:
            produced, _ = run_poisoned(prepared, operands.framework)
            outputs[provider] = {key: to_host(value).astype(np.float64) for key, value in produced.items()}
            kernels = [k["name"] for k in kernel_provenance(prepared.run, lambda: None)["kernels"]]
        finally:
            prepared.release()
        passes = [k for k in kernels if k.startswith("fusedbench_")]
        assert len(passes) == (1 if provider == UNFUSED else 2), kernels
    one, two = outputs[UNFUSED], outputs[CONTROL_OF_UNFUSED]
    np.testing.assert_array_equal(one["result"], two["result"])
    gradient = name.lower()
    scale = np.abs(two[gradient]).max()
    assert np.abs(one[gradient] - two[gradient]).max() <= 4 * workload.dtype.tolerance * scale


def triton_kernels(gpu_stack, epilog: str, dtype: str, seed: int):
    """The triton peer prepared (compiled, autotuned) for a small workload: its provenance and the kernels one
    call launches (CUPTI)."""
    operands = make_operands(gpu_stack, Workload(epilog_spec(epilog), dtype_spec(dtype), 512, 256, 384), seed)
    prepared = prepare_provider("triton", gpu_stack, operands)
    try:
        kernels = kernel_provenance(prepared.run, lambda: None)["kernels"]
    finally:
        prepared.release()
    return prepared.provenance, [k["name"] for k in kernels]


def test_triton_records_its_config_and_its_compile_and_autotune_seconds(gpu_stack):
    provenance, kernels = triton_kernels(gpu_stack, "GELU_AUX_BIAS", "fp16", seed=6)
    assert provenance["chosen_by"].startswith("triton autotune over ")
    assert " warps " in provenance["algorithm"] and "stages" in provenance["algorithm"]
    assert provenance["compile_s"] >= 0 and provenance["autotune_s"] > 0
    assert kernels == ["matmul_epilog"]  # bias, GELU and the aux output in the one kernel


def test_triton_sums_the_bias_gradient_of_d_in_a_second_small_kernel(gpu_stack):
    _, kernels = triton_kernels(gpu_stack, "DGELU_BGRAD", "bf16", seed=7)
    assert kernels == ["matmul_epilog", "add_partials"]


def test_torch_poisoning_covers_what_the_caching_allocator_hands_out_next(gpu_stack):
    """torch's allocator may give a compiled graph's temporaries the blocks freed for its outputs: every free
    block is poisoned, so an output lands in poison whichever it gets."""
    import torch

    scratch = [torch.ones(n, dtype=torch.uint8, device="cuda") for n in (3000, 70_000, 5 << 20)]  # cached when freed
    del scratch
    ranges = poison_next_allocations("torch", [24_576, 1_536])
    taken = [torch.empty(n, dtype=torch.uint8, device="cuda") for n in (512, 1_536, 24_576, 60_000, 4 << 20)]
    for block in taken:
        assert any(start <= block.data_ptr() and block.data_ptr() + block.numel() <= end for start, end in ranges)
        assert bool((block == POISON_BYTE).all())


def test_a_torch_output_lands_in_poison_with_no_collection_during_the_run(gpu_stack):
    """No collection frees memory between reading the free blocks and the run (the textbook's fp8 DRELU_BGRAD
    result landed outside the poison on an H200 so)."""
    import gc

    import torch

    seen = {}

    def run():
        seen["collecting"] = gc.isenabled()
        return {"result": torch.empty(24_576, dtype=torch.uint8, device="cuda")}

    prepared = PreparedProvider(run=run, owned_outputs=(), library_outputs={"result": 24_576}, allocator="torch")
    outputs, _ = run_poisoned(prepared, "torch")  # raises where the result lies outside the poisoned blocks
    assert seen == {"collecting": False} and gc.isenabled()
    assert bool((outputs["result"] == POISON_BYTE).all())


def test_every_block_cupys_pool_hands_out_inside_the_poisoning_is_poisoned(gpu_stack):
    """What einsum's temporaries take cannot leave its output in unpoisoned memory: each block is poisoned as it is
    handed out, and its range recorded."""
    cupy = gpu_stack.cupy
    taken = [cupy.ones(n, dtype=cupy.uint8) for n in (4096, 1 << 20)]  # freed into the pool, holding ones
    del taken
    with poisoning_cupy_pool() as handed_out:
        blocks = [cupy.empty(n, dtype=cupy.uint8) for n in (4096, 1 << 20, 777)]
    synchronize()
    for block in blocks:
        start = block.data.ptr
        assert any(low <= start and start + block.nbytes <= high for low, high in handed_out)
        assert bool((block == POISON_BYTE).all())
    cupy.empty(64, dtype=cupy.uint8)
    assert len(handed_out) == 3  # one a block, and none once outside


def verified_kernels(gpu_stack, provider: str, operands):
    """`provider` prepared as a timed cell, run once poisoned and verified against float64: its provenance and the
    kernels one call launches (CUPTI)."""
    prepared = prepare_provider(provider, gpu_stack, operands)
    try:
        outputs, _ = run_poisoned(prepared, operands.framework)
        host = {name: to_host(value) for name, value in outputs.items()}
        kernels = kernel_provenance(prepared.run, lambda: None)["kernels"]
    finally:
        prepared.release()
    reference = reference_outputs(operands.workload.epilog, operands.reference_inputs())
    assert all(check.ok for check in verify_outputs(host, reference, operands.workload.dtype.tolerance)), provider
    return prepared.provenance, [k["name"] for k in kernels]


def compiled_kernels(gpu_stack, epilog: str, dtype: str, seed: int):
    """The torch-compile peer (max-autotune) on a small workload: `verified_kernels`."""
    operands = make_operands(gpu_stack, Workload(epilog_spec(epilog), dtype_spec(dtype), 512, 256, 384), seed)
    return verified_kernels(gpu_stack, "torch-compile", operands)


def test_torch_compile_is_timed_as_max_autotune_compiled_and_verified_before(gpu_stack):
    provenance, kernels = compiled_kernels(gpu_stack, "GELU_AUX_BIAS", "bf16", seed=8)
    assert provenance["chosen_by"] == "torch.compile max-autotune" and "max-autotune" in provenance["algorithm"]
    # autotuning is part of compiling (none where Inductor's on-disk caches already hold this graph's choices)
    assert provenance["compile_s"] > 0 and provenance["compile_s"] >= provenance["autotune_s"] >= 0
    assert 1 <= len(kernels) <= 3, kernels  # the GEMM, and Inductor's kernels for what it did not fuse into it


def test_inductors_hint_to_turn_tf32_on_does_not_refuse_an_fp32_cell(gpu_stack):
    """Inductor gives its hint once a process, on the first fp32 graph it compiles (which one depended on the order
    of a check's cells): given again here, with warnings errors as pytest makes them."""
    from torch._inductor import compile_fx

    compile_fx._warn_tf32_disabled.cache_clear()
    operands = make_operands(gpu_stack, Workload(epilog_spec("DEFAULT"), dtype_spec("fp32"), 128, 64, 96), seed=12)
    prepared = prepare_provider("torch-compile", gpu_stack, operands, timed=False)
    try:
        host = {name: to_host(value) for name, value in prepared.run().items()}
    finally:
        prepared.release()
    reference = reference_outputs(operands.workload.epilog, operands.reference_inputs())
    assert all(check.ok for check in verify_outputs(host, reference, operands.workload.dtype.tolerance))


def test_inductor_runs_the_backward_after_the_gemm_and_sums_in_a_kernel_of_its_own(gpu_stack):
    """Which kernels autotuning picks varies by machine and run (cuBLAS and one reduction applying dReLU as it sums
    on an H100 at cad4196; a GEMM template, the mask's unpacking and a two-stage sum at a69b4db): the GEMM comes
    first, and Inductor's own Triton kernels after it sum the bias gradient."""
    _, kernels = compiled_kernels(gpu_stack, "DRELU_BGRAD", "fp16", seed=9)
    after = kernels[1:]
    assert 1 <= len(after) <= 3 and all(name.startswith("triton_") for name in after), kernels
    assert any(name.startswith(("triton_red_fused", "triton_per_fused")) for name in after), kernels


def test_a_numba_kernel_fuses_the_epilog_and_the_mask_into_its_one_kernel(gpu_stack):
    workload = Workload(epilog_spec("RELU_AUX_BIAS"), dtype_spec("fp16"), 1003, 200, 520)  # partial blocks, bytes
    operands = make_operands(gpu_stack, workload, seed=10)
    for provider in ("numba-naive", "numba-tiled"):
        provenance, kernels = verified_kernels(gpu_stack, provider, operands)
        assert len(kernels) == 1 and "32x32" in provenance["algorithm"], (provider, kernels)


def test_a_numba_cell_that_would_take_seconds_is_skipped_with_the_time_it_measured(gpu_stack):
    seed = Workload(epilog_spec("BIAS"), dtype_spec("fp32"), *shape_set("seed")[0].mkn)
    operands = Operands(seed, "cupy", gpu_stack.cupy, a=None, b=None, result=None)  # skipped before any is read
    with pytest.raises(Skipped) as skipped:
        prepare_provider("numba-naive", gpu_stack, operands)
    reason = skipped.value.reason
    assert "numba-naive would take about" in reason and "ms at (1024,1024)x(1024,1024) on this GPU" in reason, reason
    assert "8192x its multiply-adds" in reason, reason


@pytest.mark.parametrize(("name", "dtype"), [("GELU_AUX_BIAS", "bf16"), ("DGELU_BGRAD", "fp16"), ("DEFAULT", "fp16")])
def test_a_cutlass_tree_is_one_kernel_and_right_on_every_call(gpu_stack, name, dtype):
    """The bias, the GELU and its aux output (or the GELU derivative and the bias gradient's row reduction, which
    must not add onto the last call's) inside the GEMM's one kernel, launched again and again from the arguments
    the builder made once; and DEFAULT's tree, written around nvidia-cutlass 4.2's abort."""
    workload = Workload(epilog_spec(name), dtype_spec(dtype), 1024, 256, 1032)  # N ends inside a tile
    operands = make_operands(gpu_stack, workload, seed=11)
    provenance, kernels = verified_kernels(gpu_stack, "cutlass-evt", operands)
    assert len(kernels) == 1 and "cutlass" in kernels[0].lower(), kernels
    assert "EVT" in provenance["algorithm"] and provenance["compile_s"] > 0
    prepared = prepare_provider("cutlass-evt", gpu_stack, operands)
    try:
        reference = reference_outputs(workload.epilog, operands.reference_inputs())
        for _ in range(3):
            host = {name: to_host(value) for name, value in prepared.run().items()}
            checks = verify_outputs(host, reference, workload.dtype.tolerance)
            assert all(check.ok for check in checks), [check.detail for check in checks]
    finally:
        prepared.release()
