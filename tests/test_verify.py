"""Output comparison: poisoned (unwritten) elements, tolerances and ReLU-mask bits."""

import math

import numpy as np

from fusedbench.catalog.epilogs import epilog_spec
from fusedbench.measure.reference import ReferenceInputs, pack_relu_aux, reference_outputs
from fusedbench.measure.verify import compare_mask, compare_values, verify_outputs


def test_error_is_the_largest_deviation_relative_to_the_largest_reference_value():
    check = compare_values("result", np.array([1.0, 2.1, -4.0]), np.array([1.0, 2.0, -4.0]), 0.05)
    assert check.ok
    assert math.isclose(check.error, 0.1 / 4.0)


def test_a_single_poisoned_element_fails_however_small_the_rest():
    out = np.ones((4, 4))
    out[2, 3] = np.nan  # an element nobody wrote keeps the poison
    check = compare_values("result", out, np.ones((4, 4)), 1.0)
    assert not check.ok
    assert "1 non-finite" in check.detail


def test_error_above_tolerance_fails_with_both_numbers():
    check = compare_values("result", np.array([1.0, 3.0]), np.array([1.0, 2.0]), 1e-3)
    assert not check.ok
    assert "> tolerance 0.001" in check.detail


def test_mask_bits_near_zero_are_forgiven_but_others_are_not():
    pre = np.array([[1e-6, 5.0], [-3.0, 2.0]])
    ref = pre >= 0
    flipped_near_zero = ref.copy()
    flipped_near_zero[0, 0] = False
    assert compare_mask("relu_aux", pack_relu_aux(flipped_near_zero), ref, pre, 1e-3).ok
    flipped_far = ref.copy()
    flipped_far[1, 0] = True
    check = compare_mask("relu_aux", pack_relu_aux(flipped_far), ref, pre, 1e-3)
    assert not check.ok
    assert check.detail == "1 of 4 mask bits wrong"


def test_bool_mask_with_poison_bytes_is_reported_unwritten():
    pre = np.array([[1.0, -1.0]])
    out = np.array([[1, 255]], dtype=np.uint8).view(np.bool_)
    check = compare_mask("relu_aux", out, pre >= 0, pre, 1e-3)
    assert not check.ok
    assert "neither 0 nor 1" in check.detail


def test_every_reference_output_is_required_and_gelu_aux_padding_is_ignored():
    rng = np.random.default_rng(0)
    inputs = ReferenceInputs(a=rng.standard_normal((5, 3)), b=rng.standard_normal((3, 4)), bias=rng.standard_normal(5))
    reference = reference_outputs(epilog_spec("GELU_AUX_BIAS"), inputs)
    padded_aux = np.full((8, 4), np.nan)  # cuBLASLt pads M = 5 to 8 rows; rows 5..7 are undefined
    padded_aux[:5] = reference.outputs["gelu_aux"]
    checks = verify_outputs({"result": reference.outputs["result"], "gelu_aux": padded_aux}, reference, 1e-12)
    assert all(c.ok for c in checks)
    missing = verify_outputs({"result": reference.outputs["result"]}, reference, 1e-12)
    assert [(c.name, c.ok, c.detail) for c in missing if not c.ok] == [("gelu_aux", False, "output missing")]


def test_widening_an_output_with_signalling_nans_in_its_unwritten_padding_is_no_error():
    """A GELU aux of M = 202 rows is 208 rows deep; no kernel writes the last 6, which may hold any bytes."""
    from fusedbench.measure.gpu.arrays import widened

    host = np.array([1.5, 0.0, 0.0], dtype=np.float32)
    host.view(np.uint32)[1:] = 0x7F800001  # a signalling NaN: widening it raises "invalid" (an error here)
    wide = widened(host)
    assert wide.dtype == np.float64 and wide[0] == 1.5 and np.isnan(wide[1:]).all()
    mask = np.array([3, 255], dtype=np.uint8)
    assert widened(mask) is mask  # bytes stay bytes
