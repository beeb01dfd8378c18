"""The peers suite and the triton peer's launch signature (what it compiles for), without a GPU."""

from __future__ import annotations

import numpy as np
import pytest

from fusedbench.catalog.dtypes import dtype_spec
from fusedbench.catalog.epilogs import EPILOGS, Epilog, epilog_spec, gelu_aux_shape, relu_aux_shape
from fusedbench.catalog.providers import CONTROL_OF_UNFUSED, LADDER, PEERS, PROVIDERS, UNFUSED
from fusedbench.catalog.suites import CONTROL_GROUPS, GROUPS, PEER_GROUPS, PEER_ONLY_GROUPS, SUITES, suite_groups
from fusedbench.catalog.workloads import Workload
from fusedbench.measure.gpu.arrays import _free_torch_blocks, collector_paused
from fusedbench.measure.gpu.triton_epilog import CONFIGS, _kernel_key, _launch_signature


def test_the_peers_suite_times_triton_beside_the_ladder_and_torch_compile_beside_fused_and_unfused():
    assert PEERS == ("einsum", "numba-naive", "numba-tiled", "triton", "torch-compile", "cutlass-evt")
    assert all(PROVIDERS[p].peer and not PROVIDERS[p].control for p in PEERS)
    assert not set(PEERS) & set(LADDER)  # the default suite's groups never time a peer
    # tests/test_walkthrough.py and tests/test_cutlass_evt.py check the walkthrough's and CUTLASS's groups
    compilers = [name for name in PEER_GROUPS if not name.endswith(("Walkthrough", "Cutlass"))]
    cells = {(GROUPS[name].dtype, GROUPS[name].shape_set, GROUPS[name].providers[-1]) for name in compilers}
    assert cells == {(d, s, p) for d in ("fp16", "bf16") for s in ("seed", "membound") for p in PEERS[3:5]}
    for name in compilers:
        assert len(GROUPS[name].epilogs) == 16
        if name.endswith("Peers"):  # the ladder whole, so the report reads each workload's ladder from this group
            assert GROUPS[name].providers == (*LADDER, "triton") and name not in PEER_ONLY_GROUPS
        else:  # torch.compile's minutes of compiling in groups of their own, beside what its ratios need
            assert GROUPS[name].providers == (UNFUSED, "fused", "torch-compile") and name in PEER_ONLY_GROUPS
    assert [g.name for g in suite_groups("peers")] == [*PEER_GROUPS, "TwoPass"]
    assert not set(SUITES["peers"]) & (set(SUITES["default"]) | set(SUITES["full"]))


def test_the_two_pass_control_runs_only_beside_unfused_on_the_backward_epilogs():
    two_pass = GROUPS["TwoPass"]
    assert two_pass.providers == (UNFUSED, CONTROL_OF_UNFUSED) and PROVIDERS[CONTROL_OF_UNFUSED].control
    assert two_pass.epilogs == ("DRELU_BGRAD", "DGELU_BGRAD") and two_pass.shape_set == "membound"
    assert "TwoPass" in CONTROL_GROUPS and not set(PEER_GROUPS) & CONTROL_GROUPS


@pytest.mark.parametrize("epilog", list(Epilog))
def test_the_triton_signature_follows_the_operand_layouts(epilog):
    """Strides and leading dimensions as fusedbench.measure.gpu.operands lays the tensors out (the builder holds the
    real tensors to them), and one flag per part of the epilog."""
    spec = EPILOGS[epilog]
    m, k, n = 200, 72, 136
    pointers, integers, flags = _launch_signature(Workload(spec, dtype_spec("fp16"), m, k, n))
    assert integers[:3] == (m, n, k)
    assert integers[3:7] == ((k, 1, 1, k) if spec.layout == "TN" else (1, m, n, 1))
    aux_in_ld, aux_out_ld = integers[7:]
    assert pointers[:4] == ("float16",) * 4
    if spec.derivative.value == "drelu":
        assert (pointers[4], aux_in_ld) == ("uint8", relu_aux_shape(m, n)[0])
    elif spec.derivative.value == "dgelu":
        assert (pointers[4], aux_in_ld) == ("float16", gelu_aux_shape(m, n)[0])
    else:
        assert aux_in_ld == 0
    if spec.saves_aux:
        expected = relu_aux_shape(m, n)[0] if spec.activation.value == "relu" else gelu_aux_shape(m, n)[0]
        assert aux_out_ld == expected and (pointers[5] == "uint8") == (spec.activation.value == "relu")
    else:
        assert aux_out_ld == 0
    assert pointers[6] == ("float32" if spec.summed.value == "result" else "float16")  # D's sums: fp32 partials
    assert flags["BIAS"] is spec.bias and flags["SAVE_AUX"] is spec.saves_aux
    assert (flags["ACTIVATION"] > 0) == (spec.activation.value != "none")
    assert (flags["SUMMED"] > 0) == (spec.summed.value != "none")


def test_the_triton_precision_follows_the_dtype():
    precision = {
        name: _launch_signature(Workload(epilog_spec("BIAS"), dtype_spec(name), 64, 64, 64))[2]["PRECISION"]
        for name in ("fp16", "bf16", "fp32", "tf32", "fp8")
    }
    assert precision == {"fp16": None, "bf16": None, "fp32": "ieee", "tf32": "tf32", "fp8": None}
    assert set(CONFIGS) == {1, 2, 4}  # a table per operand width


def test_a_kernel_key_tells_apart_what_triton_compiles_apart():
    def key(m, k, n, epilog="BIAS", dtype="fp16", config=0):
        return _kernel_key(Workload(epilog_spec(epilog), dtype_spec(dtype), m, k, n), config)

    assert key(16384, 256, 16384) == key(8192, 256, 65536)  # every extent a multiple of 16: one kernel
    assert key(16384, 256, 16384) != key(200, 72, 136)  # 200 and 72 are not
    assert key(64, 64, 64) != key(64, 64, 64, epilog="RELU_BIAS")
    assert key(64, 64, 64) != key(64, 64, 64, dtype="bf16")
    assert key(64, 64, 64) != key(64, 64, 64, config=1)


def test_a_builder_that_takes_timed_hears_whether_a_check_or_a_timing_prepares_it(monkeypatch):
    from types import SimpleNamespace

    import fusedbench.measure.gpu.providers as gpu_providers

    heard = []

    def compiler_peer(stack, operands, *, timed=True):
        heard.append(timed)
        return gpu_providers.PreparedProvider(run=lambda: {}, owned_outputs=())

    def library(stack, operands):
        heard.append("no timed")
        return gpu_providers.PreparedProvider(run=lambda: {}, owned_outputs=())

    stack = SimpleNamespace(library_errors=())
    for builder in (compiler_peer, library):
        monkeypatch.setattr(gpu_providers, "builder_of", lambda name, builder=builder: builder)
        gpu_providers.prepare_provider("triton", stack, None, timed=False)
        gpu_providers.prepare_provider("triton", stack, None)
    assert heard == [False, True, "no timed", "no timed"]


def test_only_providers_with_a_precompile_hook_compile_ahead_with_the_workloads(monkeypatch):
    import sys
    from dataclasses import replace

    import fusedbench.measure.gpu.providers as gpu_providers

    calls = []
    monkeypatch.setattr(sys.modules[__name__], "hook", lambda workloads, *, timed: calls.append((workloads, timed)),
                        raising=False)  # fmt: skip
    peer = replace(PROVIDERS["triton"], precompile=f"{__name__}:hook")
    monkeypatch.setitem(gpu_providers.PROVIDERS, "triton", peer)
    workloads = [Workload(epilog_spec("BIAS"), dtype_spec("fp16"), 64, 64, 64)]
    gpu_providers.precompile_providers(["fused", "unfused", "triton"], workloads, timed=False)
    assert calls == [(workloads, False)]


def test_the_one_pass_backward_is_the_current_cells_revision_and_the_peers_suites():
    from fusedbench.catalog.suites import ASV_VERSIONS, CELLS_REVISION, ONE_PASS_BACKWARD_VERSIONS, PEERS_REVISION

    assert CELLS_REVISION.startswith("6:") and {CELLS_REVISION, PEERS_REVISION} <= ONE_PASS_BACKWARD_VERSIONS
    assert "4: unfused DRELU_BGRAD / DGELU_BGRAD in one pass" in ONE_PASS_BACKWARD_VERSIONS  # before the burst lead-in
    assert "5: the burst lead-in before every call; unfused DRELU_BGRAD / DGELU_BGRAD in one pass" in (
        ONE_PASS_BACKWARD_VERSIONS  # burst, with nvmath's autotune
    )
    assert "1: the ladder and the triton peer, compile and autotune before timing" in ONE_PASS_BACKWARD_VERSIONS
    assert ASV_VERSIONS["TwoPass"] in ONE_PASS_BACKWARD_VERSIONS
    assert ASV_VERSIONS["Blog"] not in ONE_PASS_BACKWARD_VERSIONS  # the Blog group times no unfused
    assert "3: unfused row sums reduce per block, one launch" not in ONE_PASS_BACKWARD_VERSIONS  # c8c600b's


def test_an_unfused_backwards_pass_bandwidth_counts_the_bytes_of_its_own_revision():
    """c8c600b's unfused (revision 3) read D twice for DRELU_BGRAD; revision 4's and the peers suite's once."""
    import pandas as pd

    from fusedbench.catalog.suites import CELLS_REVISION
    from fusedbench.results.derived import pass_bandwidths

    m, k, n = 16384, 256, 16384
    row = {"provider": "unfused", "status": "ok", "epilog": "DRELU_BGRAD", "dtype": "fp16", "m": m, "k": k, "n": n}
    cells = pd.DataFrame([row, row]).assign(pass_tbps=float("nan"), pass_of_copy=float("nan"))
    times = pd.Series([[("cutlass_gemm", 300.0), ("fusedbench_drelu_row_sum", 100.0)]] * 2)
    versions = pd.Series([CELLS_REVISION, "3: unfused row sums reduce per block, one launch"])
    filled = pass_bandwidths(cells, times, pd.Series([4.0, 4.0]), versions)
    one_pass, two_passes = 2 * m * n * 2 + 2048 * n + 2 * m, 3 * m * n * 2 + 2048 * n + 2 * m
    assert filled["pass_tbps"].tolist() == pytest.approx([one_pass / 100e-6 / 1e12, two_passes / 100e-6 / 1e12])
    assert filled["pass_of_copy"].tolist() == pytest.approx((filled["pass_tbps"] / 4.0).tolist())


def test_a_check_of_fused_autotuned_takes_cublaslts_algorithms_in_turn_so_the_small_check_verifies_every_one():
    """A check has no timing to choose by: each workload executes one of the algorithms offered, by its rank in the
    heuristic's list, and the small check's workloads of each dtype spread over every rank."""
    from fusedbench.catalog.shapes import shape_set
    from fusedbench.catalog.workloads import build_workloads

    for dtype in ("fp16", "bf16", "fp32", "tf32", "fp8"):
        workloads = build_workloads(dtypes=[dtype], shapes=shape_set("small"))
        for offered in (2, 5, 8):
            assert {workload.in_turn(offered) for workload in workloads} == set(range(offered)), (dtype, offered)
    assert workloads[0].label == "DEFAULT/fp8/(128,64)x(64,96)" and workloads[0].in_turn(8) == 5  # fixed: a rerun
    # of the check verifies the same algorithm on the same workload


def test_a_triton_check_takes_the_configs_in_turn_so_the_small_check_verifies_every_one():
    from fusedbench.catalog.shapes import shape_set
    from fusedbench.catalog.workloads import build_workloads
    from fusedbench.measure.gpu.triton_epilog import _candidates

    for dtype, itemsize in (("fp16", 2), ("bf16", 2), ("fp32", 4), ("fp8", 1)):
        workloads = build_workloads(dtypes=[dtype], shapes=shape_set("small"))
        checked = [_candidates(workload, timed=False) for workload in workloads]
        assert all(len(one) == 1 for one in checked)
        assert {one[0] for one in checked} == set(range(len(CONFIGS[itemsize])))  # every config, by some workload
        per_epilog = {}
        for workload, (index,) in zip(workloads, checked, strict=True):
            per_epilog.setdefault(workload.epilog.name, set()).add(index)
        assert sum(len(indices) > 1 for indices in per_epilog.values()) >= 8  # most epilogs meet several
        assert _candidates(workloads[0], timed=True) == list(range(len(CONFIGS[itemsize])))
        assert checked == [_candidates(workload, timed=False) for workload in workloads]  # the same every run


def test_the_triton_peer_refuses_what_its_32_bit_offsets_cannot_reach():
    from fusedbench.measure.gpu.triton_epilog import _too_large

    assert not _too_large(Workload(epilog_spec("BIAS"), dtype_spec("fp16"), 65536, 16384, 8192))  # the seed: 2^29
    assert _too_large(Workload(epilog_spec("BIAS"), dtype_spec("fp16"), 65536, 32768, 8192))  # A: 2^31 elements
    # the GELU aux pads M to a multiple of 8: 268435457 rows of 8 columns pass D's count, not the aux's
    assert _too_large(Workload(epilog_spec("DGELU"), dtype_spec("fp16"), 268435449, 8, 8))


def test_torch_poisons_every_block_its_allocator_holds_free_and_nothing_in_use():
    """fusedbench.measure.gpu.arrays reads the free blocks off torch.cuda.memory_snapshot(): addresses tile each
    segment."""
    snapshot = [
        {"address": 1000, "blocks": [{"size": 100, "state": "active_allocated"}, {"size": 50, "state": "inactive"},
                                     {"size": 30, "state": "active_pending_free"}, {"size": 20, "state": "inactive"}]},
        {"address": 5000, "blocks": [{"size": 512, "state": "inactive"}]},
    ]  # fmt: skip
    assert list(_free_torch_blocks(snapshot)) == [(1100, 1150), (1180, 1200), (5000, 5512)]


@pytest.mark.parametrize("enabled", [True, False])
def test_the_poisoned_run_pauses_the_cyclic_garbage_collector_and_restores_it(enabled):
    """Nothing is collected between reading torch's free blocks and the run's end; the collector comes back as it
    was, also after an error."""
    import gc

    gc.enable() if enabled else gc.disable()
    try:
        with pytest.raises(RuntimeError, match="the run failed"), collector_paused():
            assert not gc.isenabled()
            raise RuntimeError("the run failed")
        assert gc.isenabled() is enabled
    finally:
        gc.enable()


@pytest.mark.parametrize("name", ["RELU_AUX_BIAS", "DGELU_BGRAD"])
def test_the_timed_torch_compile_build_is_verified_against_the_same_code_run_eagerly(name):
    """verify_against_eager, on the CPU wherever torch is installed: the eager program passes against itself, a
    NaN in D or one byte of the bit-mask flipped does not."""
    torch = pytest.importorskip("torch")
    from fusedbench.measure.gpu.torch_compile import CompiledMismatch, epilog_program, verify_against_eager

    spec, (m, k, n) = epilog_spec(name), (128, 64, 96)
    program = epilog_program(spec, m, narrow=False)
    generator = torch.Generator().manual_seed(1)
    x, w, bias, pre = (torch.randn(shape, generator=generator) for shape in ((n, k), (m, k), (m,), (n, 128)))
    arguments = (x, w, None, bias if spec.bias else None, pre if spec.derivative.value == "dgelu" else None)
    names, produced = ("result", *spec.outputs), program(*arguments)
    verify_against_eager(program, arguments, produced, names, 4e-3)
    broken = (produced[0].clone().index_put_((torch.tensor([3]), torch.tensor([5])), torch.tensor(float("nan"))),)
    with pytest.raises(CompiledMismatch, match="result: 1 elements off"):
        verify_against_eager(program, arguments, broken + produced[1:], names, 4e-3)
    if spec.saves_aux:
        mask = produced[1].clone()
        mask[0, 0] ^= 0xFF
        with pytest.raises(CompiledMismatch, match="relu_aux: 8 bits differ"):
            verify_against_eager(program, arguments, (produced[0], mask), names, 4e-3)


@pytest.mark.parametrize("epilog", list(Epilog))
def test_the_torch_compile_program_computes_what_the_float64_reference_does(epilog):
    """epilog_program run eagerly in float64 on the CPU (wherever torch is installed), its outputs turned into
    cuBLASLt's layouts as the builder turns them, against fusedbench.measure.reference through the check's own
    verify_outputs: layouts, mask bits, padding, the derivative's argument and each sum's axis."""
    torch = pytest.importorskip("torch")
    from fusedbench.measure.gpu.torch_compile import epilog_program
    from fusedbench.measure.reference import ReferenceInputs, pack_relu_aux, reference_outputs
    from fusedbench.measure.verify import verify_outputs

    spec, (m, k, n) = EPILOGS[epilog], (129, 33, 77)
    generator = np.random.default_rng(int(epilog))
    a, b = generator.standard_normal((m, k)), generator.standard_normal((k, n))
    bias = 3 * generator.standard_normal(m)
    mask = generator.standard_normal((m, n)) >= 0
    pre = 2 * generator.standard_normal((gelu_aux_shape(m, n)[0], n))
    aux_in = None
    if spec.derivative.value == "drelu":
        aux_in = torch.from_numpy(pack_relu_aux(mask)).t()
    elif spec.derivative.value == "dgelu":
        aux_in = torch.from_numpy(pre).t()
    arguments = (torch.from_numpy(b).t(), torch.from_numpy(a), None, torch.from_numpy(bias) if spec.bias else None,
                 aux_in)  # fmt: skip
    produced = epilog_program(spec, m, narrow=False)(*arguments)
    outputs = {name: (value.t() if value.dim() == 2 else value).numpy()
               for name, value in zip(("result", *spec.outputs), produced, strict=True)}  # fmt: skip
    reference = reference_outputs(spec, ReferenceInputs(a, b, bias, mask, pre[:m]))
    checks = verify_outputs(outputs, reference, 1e-6)  # the bias gradients sum in fp32, as timed; the rest exact
    assert [check.name for check in checks] == sorted(("result", *spec.outputs)) and all(c.ok for c in checks), checks
