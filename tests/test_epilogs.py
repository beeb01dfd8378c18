"""The epilog catalog: cuBLASLt names and values, extra tensors, layouts and the cost model."""

import pytest

from fusedbench.catalog.epilogs import EPILOGS, Epilog, epilog_spec, gelu_aux_shape, relu_aux_shape
from fusedbench.errors import FusedbenchError

# cublasLtEpilogue_t, copied from cuBLAS's documentation (its cublasLtEpilogue_t table).
CUBLASLT_EPILOGUES = {
    "DEFAULT": 1,
    "RELU": 2,
    "RELU_AUX": 130,
    "BIAS": 4,
    "RELU_BIAS": 6,
    "RELU_AUX_BIAS": 134,
    "DRELU": 136,
    "DRELU_BGRAD": 152,
    "GELU": 32,
    "GELU_AUX": 160,
    "GELU_BIAS": 36,
    "GELU_AUX_BIAS": 164,
    "DGELU": 192,
    "DGELU_BGRAD": 208,
    "BGRADA": 256,
    "BGRADB": 512,
}


def test_catalog_holds_all_16_epilogs_with_cublaslt_names_and_values():
    assert {spec.name: spec.value for spec in EPILOGS.values()} == CUBLASLT_EPILOGUES


@pytest.mark.parametrize(
    ("name", "inputs", "outputs"),
    [
        ("DEFAULT", (), ()),
        ("RELU_AUX", (), ("relu_aux",)),
        ("RELU_AUX_BIAS", ("bias",), ("relu_aux",)),
        ("DRELU", ("relu_aux",), ()),
        ("DRELU_BGRAD", ("relu_aux",), ("drelu_bgrad",)),
        ("GELU_AUX_BIAS", ("bias",), ("gelu_aux",)),
        ("DGELU_BGRAD", ("gelu_aux",), ("dgelu_bgrad",)),
        ("BGRADA", (), ("bgrada",)),
        ("BGRADB", (), ("bgradb",)),
    ],
)
def test_extra_inputs_and_outputs_use_nvmath_keys(name, inputs, outputs):
    spec = epilog_spec(name)
    assert spec.inputs == inputs
    assert spec.outputs == outputs


def test_relu_aux_is_a_bit_mask_padded_to_128_bits_per_column():
    assert relu_aux_shape(128, 96) == (16, 96)  # 128 rows -> 16 bytes, already a multiple of 16
    assert relu_aux_shape(129, 77) == (32, 77)  # 17 bytes -> padded to 32
    assert relu_aux_shape(8, 5) == (16, 5)


def test_gelu_aux_pads_rows_to_a_multiple_of_8():
    assert gelu_aux_shape(129, 77) == (136, 77)
    assert gelu_aux_shape(128, 77) == (128, 77)


def test_fused_bytes_count_operands_result_and_each_extra_tensor_once():
    m, k, n = 64, 32, 48
    spec = epilog_spec("RELU_AUX_BIAS")
    # A + B in fp16, D in fp16, bias (M fp16), bit-mask (16 bytes x N)
    expected = (m * k + k * n) * 2 + m * n * 2 + m * 2 + 16 * n
    assert spec.fused_bytes(m, k, n, 2, 2) == expected


def test_unfused_passes_read_and_write_the_result_once_more():
    m, k, n = 64, 32, 48
    assert epilog_spec("DEFAULT").unfused_extra_bytes(m, k, n, 2, 2) == 0
    assert epilog_spec("BIAS").unfused_extra_bytes(m, k, n, 2, 2) == 2 * m * n * 2 + m * 2
    # DRELU_BGRAD in one pass (read D, read bits, write D, write M); in two, the reduction reads D again
    drelu_bgrad = epilog_spec("DRELU_BGRAD")
    assert drelu_bgrad.unfused_extra_bytes(m, k, n, 2, 2) == 2 * m * n * 2 + 16 * n + m * 2
    assert drelu_bgrad.unfused_extra_bytes(m, k, n, 2, 2, one_pass=False) == 2 * m * n * 2 + 16 * n + m * n * 2 + m * 2
    # BGRADA sums A (fp8 operands, bf16 vector)
    assert epilog_spec("BGRADA").unfused_extra_bytes(m, k, n, 1, 2) == m * k + m * 2


def test_flops_are_the_gemm_plus_the_epilog_work():
    assert epilog_spec("DEFAULT").flops(4, 5, 6) == 2 * 4 * 5 * 6
    assert epilog_spec("RELU_BIAS").flops(4, 5, 6) == 2 * 4 * 5 * 6 + 2 * 4 * 6
    assert epilog_spec("BGRADB").flops(4, 5, 6) == 2 * 4 * 5 * 6 + 5 * 6


def test_epilog_lookup_is_case_insensitive_and_refuses_unknown_names():
    assert epilog_spec("relu_bias").epilog is Epilog.RELU_BIAS
    with pytest.raises(FusedbenchError, match="unknown epilog 'SWISH'; choose from DEFAULT"):
        epilog_spec("SWISH")


def test_the_textbook_multiplies_in_the_blogs_layout_for_each_role():
    """Forward: Matmul(weights, x), both row-major ("TT"); backward: Matmul(weights.T, grad) ("NT"); the weight
    gradient, Matmul(grad, x.T) ("TN"), so the bias gradient sums a row-major array along its rows."""
    layouts = {spec.name: spec.textbook_layout for spec in EPILOGS.values()}
    assert {name for name, layout in layouts.items() if layout == "NT"} == {
        "DRELU",
        "DRELU_BGRAD",
        "DGELU",
        "DGELU_BGRAD",
    }
    assert {name for name, layout in layouts.items() if layout == "TN"} == {"BGRADA", "BGRADB"}
    assert layouts["RELU_BIAS"] == layouts["DEFAULT"] == layouts["GELU_AUX_BIAS"] == "TT"
