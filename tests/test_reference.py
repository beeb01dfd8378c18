"""Float64 references on small hand-computed cases (the epilog tutorial's own examples among them)."""

import numpy as np
import pytest

from fusedbench.catalog.epilogs import epilog_spec
from fusedbench.measure.reference import (
    ReferenceInputs,
    gelu_tanh,
    gelu_tanh_grad,
    pack_relu_aux,
    reference_outputs,
    relu,
    unpack_relu_aux,
)

# The epilog tutorial's example: A @ B = [[19, -22], [-13, 14]].
A = np.array([[1.0, 2.0], [3.0, -4.0]])
B = np.array([[5.0, -6.0], [7.0, -8.0]])
BIAS = np.array([-10.0, 10.0])


def outputs(name, **inputs):
    return reference_outputs(epilog_spec(name), ReferenceInputs(a=A, b=B, **inputs)).outputs


def test_relu_zeroes_negatives_and_keeps_nan_like_cublaslt():
    np.testing.assert_array_equal(relu(np.array([-1.0, 0.0, 2.5, np.nan])), [0.0, 0.0, 2.5, np.nan])


def test_gelu_is_the_tanh_approximation():
    # 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), evaluated by hand at 1, -1 and 2.
    np.testing.assert_allclose(
        gelu_tanh(np.array([0.0, 1.0, -1.0, 2.0])), [0.0, 0.841192, -0.158808, 1.954598], atol=1e-6
    )


def test_gelu_gradient_matches_a_central_difference():
    x = np.linspace(-4, 4, 81)
    step = 1e-6
    numeric = (gelu_tanh(x + step) - gelu_tanh(x - step)) / (2 * step)
    np.testing.assert_allclose(gelu_tanh_grad(x), numeric, atol=1e-8)


def test_relu_aux_sets_bit_i_mod_8_of_byte_i_div_8_in_column_j():
    mask = np.zeros((10, 3), dtype=bool)
    mask[0, 0] = mask[9, 0] = True  # rows 0 and 9 of column 0
    mask[3, 2] = True  # row 3 of column 2
    packed = pack_relu_aux(mask)
    assert packed.shape == (16, 3)  # ceil(10 / 8) = 2 bytes, padded to 16
    assert packed[0, 0] == 0b00000001
    assert packed[1, 0] == 0b00000010  # row 9 = byte 1, bit 1
    assert packed[0, 2] == 0b00001000
    assert packed[2:].sum() == 0 and packed[:, 1].sum() == 0
    np.testing.assert_array_equal(unpack_relu_aux(packed, 10), mask)


def test_plain_and_relu_epilogs_match_the_tutorial():
    np.testing.assert_array_equal(outputs("DEFAULT")["result"], [[19, -22], [-13, 14]])
    np.testing.assert_array_equal(outputs("RELU")["result"], [[19, 0], [0, 14]])


def test_bias_is_broadcast_along_n_one_value_per_row():
    np.testing.assert_array_equal(outputs("BIAS", bias=BIAS)["result"], [[9, -32], [-3, 24]])
    np.testing.assert_array_equal(outputs("RELU_BIAS", bias=BIAS)["result"], [[9, 0], [0, 24]])


def test_relu_aux_marks_pre_activations_at_or_above_zero():
    bias = np.array([-19.0, 0.0])  # makes the pre-activation exactly 0 at [0, 0]
    out = outputs("RELU_AUX_BIAS", bias=bias)
    np.testing.assert_array_equal(out["relu_aux"], [[True, False], [False, True]])
    np.testing.assert_array_equal(out["result"], [[0, 0], [0, 14]])


def test_gelu_aux_holds_the_pre_activation_including_bias():
    out = outputs("GELU_AUX_BIAS", bias=BIAS)
    np.testing.assert_array_equal(out["gelu_aux"], [[9, -32], [-3, 24]])
    np.testing.assert_allclose(out["result"], gelu_tanh(np.array([[9.0, -32.0], [-3.0, 24.0]])))


def test_drelu_masks_by_the_forward_mask_and_bgrad_sums_over_n():
    keep = np.array([[True, False], [True, True]])
    out = outputs("DRELU_BGRAD", relu_mask=keep)
    np.testing.assert_array_equal(out["result"], [[19, 0], [-13, 14]])
    np.testing.assert_array_equal(out["drelu_bgrad"], [19, 1])


def test_dgelu_scales_by_the_gelu_derivative_at_the_pre_activation():
    pre = np.array([[0.0, 1.0], [-1.0, 2.0]])
    out = outputs("DGELU_BGRAD", gelu_pre=pre)
    expected = np.array([[19, -22], [-13, 14]]) * gelu_tanh_grad(pre)
    np.testing.assert_allclose(out["result"], expected)
    np.testing.assert_allclose(out["dgelu_bgrad"], expected.sum(axis=1))
    assert out["result"][0, 0] == pytest.approx(19 * 0.5)  # gelu'(0) = 1/2


def test_bgrada_sums_a_over_k_and_bgradb_sums_b_over_k():
    np.testing.assert_array_equal(outputs("BGRADA")["bgrada"], [3, -1])  # length M
    np.testing.assert_array_equal(outputs("BGRADB")["bgradb"], [12, -14])  # length N
    np.testing.assert_array_equal(outputs("BGRADB")["result"], [[19, -22], [-13, 14]])
