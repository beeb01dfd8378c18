"""The peers suite and the triton peer's launch signature (what it compiles for), without a GPU."""

from __future__ import annotations

import pytest

from fusedbench.dtypes import dtype_spec
from fusedbench.epilogs import EPILOGS, Epilog, epilog_spec, gelu_aux_shape, relu_aux_shape
from fusedbench.gpu.triton_epilog import CONFIGS, _kernel_key, _launch_signature
from fusedbench.providers import CONTROL_OF_UNFUSED, LADDER, PEERS, PROVIDERS, UNFUSED
from fusedbench.suites import CONTROL_GROUPS, GROUPS, PEER_GROUPS, SUITES, suite_groups
from fusedbench.workloads import Workload


def test_the_peers_suite_times_the_whole_ladder_and_the_peers_at_16_bit_on_seed_and_membound():
    assert PEERS == ("triton",) and all(PROVIDERS[p].peer and not PROVIDERS[p].control for p in PEERS)
    assert not set(PEERS) & set(LADDER)  # the default suite's groups never time a peer
    groups = {GROUPS[name].dtype + "/" + GROUPS[name].shape_set for name in PEER_GROUPS}
    assert groups == {"fp16/seed", "fp16/membound", "bf16/seed", "bf16/membound"}
    for name in PEER_GROUPS:
        # the ladder whole, so the report reads each workload's ladder from the larger group: this one
        assert GROUPS[name].providers == (*LADDER, *PEERS) and len(GROUPS[name].epilogs) == 16
    assert [g.name for g in suite_groups("peers")] == [*PEER_GROUPS, "TwoPass"]
    assert not set(SUITES["peers"]) & (set(SUITES["default"]) | set(SUITES["full"]))


def test_the_two_pass_control_runs_only_beside_unfused_on_the_backward_epilogs():
    two_pass = GROUPS["TwoPass"]
    assert two_pass.providers == (UNFUSED, CONTROL_OF_UNFUSED) and PROVIDERS[CONTROL_OF_UNFUSED].control
    assert two_pass.epilogs == ("DRELU_BGRAD", "DGELU_BGRAD") and two_pass.shape_set == "membound"
    assert "TwoPass" in CONTROL_GROUPS and not set(PEER_GROUPS) & CONTROL_GROUPS


@pytest.mark.parametrize("epilog", list(Epilog))
def test_the_triton_signature_follows_the_operand_layouts(epilog):
    """Strides and leading dimensions as fusedbench.gpu.operands lays the tensors out (the builder holds the real
    tensors to them), and one flag per part of the epilog."""
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
