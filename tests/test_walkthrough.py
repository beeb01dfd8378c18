"""The seed walkthrough's numba kernels, run by numba's CUDA simulator on the CPU against the float64 reference
through the check's own comparison, and the walkthrough groups of the peers suite."""

from __future__ import annotations

import numpy as np
import pytest

from fusedbench.catalog.dtypes import dtype_spec
from fusedbench.catalog.epilogs import EPILOGS, Epilog, relu_aux_shape
from fusedbench.catalog.providers import FUSED, NUMBA_NAIVE, PEERS, PROVIDERS, UNFUSED, WALKTHROUGH
from fusedbench.catalog.suites import GROUPS, PEER_ONLY_GROUPS, SUITES
from fusedbench.measure.reference import ReferenceInputs, reference_outputs
from fusedbench.measure.verify import verify_outputs

WALKTHROUGH_EPILOGS, WALKTHROUGH_DTYPES = PROVIDERS[NUMBA_NAIVE].epilog_names, PROVIDERS[NUMBA_NAIVE].dtypes

simulator = pytest.importorskip("numba.cuda.simulator", reason="the numba kernels' tests need numba-cuda")
walkthrough = pytest.importorskip("fusedbench.measure.gpu.walkthrough")

# Blocks of 8 x 8 threads keep the simulator (a Python thread per CUDA thread) quick; the kernels are the same
# code at any tile that is a multiple of 8. M = 20 ends inside a mask byte and a block, K = 12 inside a tile.
SIM_TILE = 8
M, K, N = 20, 12, 13


def run_kernel(epilog: Epilog, dtype: str, *, tiled: bool, seed: int = 0):
    """The kernel on random TN operands (A row-major, B and D column-major, as the suite lays them out), with D and
    the mask buffer poisoned first; returns (outputs, the reference's inputs)."""
    spec, rng = EPILOGS[epilog], np.random.default_rng(seed)
    stored = dtype_spec(dtype).operand
    a = rng.standard_normal((M, K)).astype(stored)
    b = np.asfortranarray(rng.standard_normal((K, N)).astype(stored))
    bias = (rng.standard_normal(M) * np.sqrt(K)).astype(stored)
    d = np.asfortranarray(np.full((M, N), np.nan, dtype=stored))
    aux = np.asfortranarray(np.full(relu_aux_shape(M, N), 0xFF, dtype=np.uint8))
    kernel = walkthrough.make_kernel(simulator.jit, spec, tiled=tiled, tile=SIM_TILE)
    kernel[walkthrough.launch_grid(M, N, SIM_TILE)](a, b, d, bias if spec.bias else bias[:1], aux)
    outputs = {"result": d, **({"relu_aux": aux} if spec.saves_aux else {})}
    inputs = ReferenceInputs(a=a.astype(np.float64), b=b.astype(np.float64), bias=bias.astype(np.float64))
    return outputs, inputs


@pytest.mark.parametrize("tiled", [False, True], ids=["naive", "tiled"])
@pytest.mark.parametrize("epilog", WALKTHROUGH_EPILOGS)
def test_each_kernel_computes_its_epilog_within_the_check_tolerance(epilog, tiled):
    for dtype in WALKTHROUGH_DTYPES:
        outputs, inputs = run_kernel(Epilog[epilog], dtype, tiled=tiled)
        reference = reference_outputs(EPILOGS[Epilog[epilog]], inputs)
        checks = verify_outputs(outputs, reference, dtype_spec(dtype).tolerance)
        assert [c.name for c in checks] == list(reference.outputs)
        assert all(c.ok for c in checks), [(dtype, c.name, c.detail) for c in checks if not c.ok]


def test_the_mask_bytes_are_cublaslt_s_layout_bit_for_bit():
    """Row i's bit is bit i % 8 of byte i // 8 in its column; the bits past M in the last byte are 0."""
    outputs, inputs = run_kernel(Epilog.RELU_AUX_BIAS, "fp32", tiled=True, seed=3)
    pre = inputs.a @ inputs.b + inputs.bias[:, None]
    aux = outputs["relu_aux"]
    for i, j in ((0, 0), (7, 12), (8, 5), (19, 3)):
        assert (aux[i // 8, j] >> (i % 8)) & 1 == (pre[i, j] >= 0)
    last = (M - 1) // 8
    assert not (aux[last] >> (M - 8 * last)).any()


def test_a_dropped_bias_or_activation_fails_the_check():
    """The comparison the kernel tests rely on tells a wrong epilog apart: BIAS's kernel against RELU_BIAS's
    reference fails, as does the DEFAULT kernel against BIAS's."""
    outputs, inputs = run_kernel(Epilog.BIAS, "fp32", tiled=False)
    relu_bias = reference_outputs(EPILOGS[Epilog.RELU_BIAS], inputs)
    assert not all(c.ok for c in verify_outputs(outputs, relu_bias, dtype_spec("fp32").tolerance))
    outputs, _ = run_kernel(Epilog.DEFAULT, "fp32", tiled=True)
    bias = reference_outputs(EPILOGS[Epilog.BIAS], inputs)
    assert not all(c.ok for c in verify_outputs(outputs, bias, dtype_spec("fp32").tolerance))


def test_the_walkthrough_groups_time_its_rungs_beside_fused_and_unfused_on_its_epilogs():
    names = [name for name in GROUPS if name.endswith("Walkthrough")]
    assert {(GROUPS[n].dtype, GROUPS[n].shape_set) for n in names} == {
        (d, s) for d in ("fp16", "fp32") for s in ("seed", "membound")
    }
    for name in names:
        assert GROUPS[name].providers == (UNFUSED, FUSED, *WALKTHROUGH) and name in PEER_ONLY_GROUPS
        assert GROUPS[name].epilogs == WALKTHROUGH_EPILOGS and name in SUITES["peers"]
    assert set(WALKTHROUGH) <= set(PEERS)


def test_numba_s_hint_about_small_grids_is_off_once_a_numba_peer_is_built(monkeypatch):
    """A cell's shape sets its grid, and under `filterwarnings = error` numba's low-occupancy hint failed every small
    numba cell of the every-peer check on an H200."""
    config = pytest.importorskip("numba.cuda.core.config")
    monkeypatch.setattr(config, "CUDA_LOW_OCCUPANCY_WARNINGS", 1)
    walkthrough._numba_cuda()
    assert config.CUDA_LOW_OCCUPANCY_WARNINGS == 0
