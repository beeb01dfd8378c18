"""The seed notebook's MLP: every version's gradients against float64, training on sklearn's digits, the CLI.

The numpy version runs everywhere (CI); torch's CPU version where torch is installed; the GPU versions
(fused, unfused, textbook, torch on CUDA) are `gpu` tests, run on the GPU machine.
"""

from __future__ import annotations

import importlib.util
import json

import numpy as np
import pytest

from fusedbench.catalog.mlp_settings import ACCURACY, DEFAULT_EPOCHS, DEFAULT_HIDDEN, LOW_PRECISION_GAP
from fusedbench.cli import main
from fusedbench.errors import FusedbenchError
from fusedbench.measure.mlp import (
    GRADIENT_TOLERANCE,
    PARAMETERS,
    ArrayNet,
    check_gradients,
    hidden_gradients,
    init_params,
    load_digits_dataset,
    one_hot,
    reference_step,
    train,
)
from fusedbench.measure.reference import unpack_relu_aux

HAS_TORCH = importlib.util.find_spec("torch") is not None


@pytest.fixture(scope="module")
def data():
    return load_digits_dataset()


@pytest.fixture(scope="module")
def batch(data):
    """A small batch of real images, and weights of a hidden layer wider than the notebook's."""
    return init_params(data.inputs, 48), data.x_train[:32], one_hot(data.y_train[:32])


def assert_gradients_match(version, batch, dtype: str) -> None:
    params, x, target = batch
    expected = reference_step(params, x, target)
    # A first call on other images plans the Matmuls; the checked one goes through reset_operands.
    version.gradients(version.to_device(x[::-1].copy()), version.to_device(target[::-1].copy()))
    check = check_gradients(version, version.to_device(x), version.to_device(target), expected)
    assert check.ok, f"{version.name} {dtype}: {'; '.join(check.problems)}"
    assert set(check.errors) == {*PARAMETERS, "loss"} and check.wrong_mask_bits == 0


def test_the_bit_packed_mask_unpacks_as_cublaslt_packs_it():
    rng = np.random.default_rng(3)
    packed = np.asfortranarray(rng.integers(0, 256, (4, 7), dtype=np.uint8))  # 32 rows (29 used) x 7 columns
    bits = np.unpackbits(packed, axis=0, bitorder="little")[:29].astype(bool)  # row 8r + i: bit i of byte row r
    assert np.array_equal(unpack_relu_aux(packed, 29), bits)
    assert np.array_equal(unpack_relu_aux(packed.view(np.int8), 29), bits)  # nvmath's int8


class FlippedMask(ArrayNet):
    """A version whose ReLU mask differs from the reference at the pre-activation nearest zero (or, `clear`, at
    one of median size), its gradients those of its own mask."""

    clear = False

    def forward(self, x):
        probs = super().forward(x)
        pre = self.params["w_hidden"] @ x.T + self.params["b_hidden"][:, None]
        order = np.argsort(np.abs(pre), axis=None)
        flip = np.unravel_index(order[len(order) // 2] if self.clear else order[0], pre.shape)
        self.mask[flip] = ~self.mask[flip]
        self.hidden = np.where(self.mask, pre, 0)
        return probs


def test_a_mask_bit_rounding_decides_is_forgiven_and_the_gradients_are_those_of_the_versions_own_mask(batch):
    params, x, target = batch
    params = params | {"b_hidden": params["b_hidden"].copy()}
    params["b_hidden"][0] = -(params["w_hidden"][0].astype(np.float64) @ x[0])  # pre-activation (0, 0) about 0
    expected = reference_step(params, x, target)
    check = check_gradients(FlippedMask(params, "fp32"), x, target, expected)
    assert check.ok and check.wrong_mask_bits == 0, check.problems
    # Held to the reference's own mask instead, the flipped bit's row of W_h's gradient is far off.
    flipped = FlippedMask(params, "fp32")
    grads = flipped.gradients(x, target)
    assert np.abs(grads["w_hidden"] - expected["w_hidden"]).max() / np.abs(expected["w_hidden"]).max() > 1e-5
    assert np.allclose(grads["w_hidden"], hidden_gradients(expected["backward"], flipped.mask)["w_hidden"])


@pytest.mark.parametrize("name", [*PARAMETERS, "loss"])
def test_a_gradient_or_loss_three_tolerances_off_is_caught(batch, name):
    params, x, target = batch

    class Off(ArrayNet):
        def gradients(self, x, target):
            grads = super().gradients(x, target)
            return grads | {name: grads[name] * (1 + 3 * GRADIENT_TOLERANCE["fp32"])}

    problems = check_gradients(Off(params, "fp32"), x, target, reference_step(params, x, target)).problems
    assert len(problems) == 1 and problems[0].startswith(f"{name} error 3.0")


def test_a_mask_bit_whose_sign_is_clear_is_caught_and_so_is_a_wrong_compute_dtype(batch):
    params, x, target = batch
    expected = reference_step(params, x, target)
    wrong = type("ClearFlip", (FlippedMask,), {"clear": True})(params, "fp32")
    assert check_gradients(wrong, x, target, expected).problems[0] == f"1 of {48 * 32} ReLU mask bits wrong"
    uncast = type("Uncast", (ArrayNet,), {"cast": lambda self, array: array})(params, "fp16")
    assert "computed in float32, not fp16" in check_gradients(uncast, x, target, expected).problems


@pytest.mark.parametrize("dtype", ["fp32", "fp16"])
def test_the_numpy_versions_gradients_match_float64(batch, dtype):
    assert_gradients_match(ArrayNet(batch[0], dtype), batch, dtype)


def test_a_wrong_gradient_is_caught(batch):
    """The check itself can fail: a version whose hidden bias gradient forgets the mask."""

    class Unmasked(ArrayNet):
        def backward(self, grad):
            grads = super().backward(grad)
            grads["b_hidden"] = (self.w_output.T @ grad.T).sum(axis=1)
            return grads

    with pytest.raises(AssertionError, match="b_hidden error"):
        assert_gradients_match(Unmasked(batch[0], "fp32"), batch, "fp32")


def test_numpy_trains_to_the_accuracy_bar_at_fp32_and_fp16_within_two_points(data):
    fp32 = train(ArrayNet(init_params(data.inputs, DEFAULT_HIDDEN), "fp32"), data, epochs=DEFAULT_EPOCHS)
    fp16 = train(ArrayNet(init_params(data.inputs, DEFAULT_HIDDEN), "fp16"), data, epochs=DEFAULT_EPOCHS)
    assert fp32.test_accuracy >= ACCURACY and fp32.steps == DEFAULT_EPOCHS * (len(data.y_train) // 256)
    assert fp16.test_accuracy >= fp32.test_accuracy - LOW_PRECISION_GAP
    assert fp32.losses[-1] < fp32.losses[0] / 5  # it learned


def test_the_weights_start_as_the_notebooks_uniform_in_one_over_root_fan_in():
    params = init_params(64, 30)
    assert params["w_hidden"].shape == (30, 64) and params["w_output"].shape == (10, 30)
    for name, fan_in in (("w_hidden", 64), ("b_hidden", 64), ("w_output", 30), ("b_output", 30)):
        bound = np.abs(params[name]).max()
        assert params[name].dtype == np.float32 and 0.8 / fan_in**0.5 < bound <= 1 / fan_in**0.5, name
    assert all(np.array_equal(init_params(64, 30)[k], v) for k, v in params.items())  # seeded


def test_the_step_time_leaves_out_the_first_epoch_where_plans_are_made(data):
    import time

    class SlowFirstStep(ArrayNet):  # synthetic: the first step pays a one-off 0.3 s, as planning does
        first = True

        def train_step(self, x, target):
            if self.first:
                self.first = False
                time.sleep(0.3)
            return super().train_step(x, target)

    trained = train(SlowFirstStep(init_params(data.inputs, 8), "fp32"), data, epochs=3)
    assert trained.steps == 15 and trained.timed_steps == 10 and trained.epoch_seconds[0] >= 0.3
    # the later epochs' seconds over their steps, whatever else the machine is doing (no time threshold to flake)
    assert trained.step_seconds == pytest.approx(sum(trained.epoch_seconds[1:]) / 10)


def test_the_digits_split_is_real_and_standardised(data):
    assert data.x_train.shape == (1437, 64) and data.x_test.shape == (360, 64)
    assert set(data.y_test) == set(range(10))
    assert abs(float(data.x_train.mean())) < 1e-5 and float(data.x_train.std()) == pytest.approx(1, rel=1e-5)


@pytest.mark.skipif(not HAS_TORCH, reason="needs torch (pip install -e '.[torch]')")
@pytest.mark.parametrize("dtype", ["fp32", "bf16"])
def test_the_torch_cpu_versions_gradients_match_float64(batch, dtype):
    import torch

    from fusedbench.measure.gpu.mlp import TorchNet

    assert_gradients_match(TorchNet(batch[0], dtype, torch, "cpu"), batch, dtype)


def test_the_cli_trains_what_the_cpu_runs_and_says_so_in_json(capsys):
    assert main(["mlp", "--device", "cpu", "--epochs", "3", "--format", "json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["device"] == "cpu" and out["data"] == "sklearn digits"
    names = [v["name"] for v in out["versions"]]
    assert names == (["numpy", "torch"] if HAS_TORCH else ["numpy"])
    numpy = out["versions"][0]
    assert numpy["steps"] == 15 and numpy["step_seconds"] > 0 and 0 < numpy["test_accuracy"] <= 1
    assert numpy["loss_last"] < numpy["loss_first"] and numpy["master_weights"] == "fp32"
    assert numpy["kernels_unrecorded"] == "not a GPU version" and numpy["timed_steps"] == 10  # the first epoch out


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["--epochs", "0"], "--epochs 0: give a positive number"),
        (["--batch", "5000"], "--batch 5000 is more than the 1437 training images"),
        (["--version", "fusd"], "--version 'fusd': the cpu runs numpy"),
    ],
)
def test_bad_mlp_flags_are_one_line_errors(capsys, argv, says):
    assert main(["mlp", "--device", "cpu", *argv]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and says in err and err.count("\n") == 1


@pytest.mark.skipif(HAS_TORCH, reason="torch runs bf16 here")
def test_bf16_on_a_cpu_without_torch_says_how_to_get_it(capsys):
    assert main(["mlp", "--device", "cpu", "--dtype", "bf16"]) == 2
    assert "numpy has no bf16" in capsys.readouterr().err


def test_without_scikit_learn_the_data_error_says_what_to_install(monkeypatch):
    import builtins

    real = builtins.__import__

    def no_sklearn(name, *args, **kwargs):
        if name.startswith("sklearn"):
            raise ImportError(name)
        return real(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_sklearn)
    with pytest.raises(FusedbenchError, match=r"pip install -e '\.\[mlp\]'"):
        load_digits_dataset()


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["fp32", "fp16", "bf16"])
def test_every_gpu_versions_gradients_match_float64(batch, dtype):
    from fusedbench.measure.gpu.mlp import build_versions

    versions = build_versions(batch[0], dtype, "gpu")
    expected = ["fused", "unfused", "textbook", "torch"] if dtype != "bf16" else ["torch"]
    assert [v.name for v in versions] == expected  # cupy has no bfloat16
    for version in versions:
        assert_gradients_match(version, batch, dtype)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["fp32", "fp16"])
def test_each_cupy_versions_big_arrays_are_row_major_where_its_elementwise_kernels_stream(batch, dtype):
    """cupy's elementwise kernels stride over column-major arrays: a column-major W_h, gradient, pre-activation or
    masked gradient makes its update, cast, ReLU or mask pass several times slower."""
    from fusedbench.measure.gpu.mlp import build_versions

    params, x, target = batch
    for version in build_versions(params, dtype, "gpu", ["fused", "unfused", "textbook"]):
        for _ in range(2):
            grads = version.summed_gradients(version.to_device(x), version.to_device(target))
        assert version.master()["w_hidden"].flags.c_contiguous and grads["w_hidden"].flags.c_contiguous, version.name
        if version.name != "textbook":  # W_o column-major: W_o.T, and the masked gradient, row-major
            assert version.master()["w_output"].flags.f_contiguous, version.name
        if version.name != "fused":  # fused's masked gradient comes from cuBLASLt's epilog and meets no cupy pass
            assert version.mask.flags.c_contiguous, version.name
        assert len(getattr(version, "planned", "12345")) == 5  # one plan per GEMM


@pytest.mark.gpu
def test_every_gpu_version_trains_to_the_bar_and_low_precision_stays_within_two_points(data):
    from fusedbench.measure.gpu.mlp import build_versions

    accuracy, kernels = {}, {}
    for dtype in ("fp32", "fp16", "bf16"):
        for version in build_versions(init_params(data.inputs, DEFAULT_HIDDEN), dtype, "gpu"):
            trained = train(version, data, epochs=DEFAULT_EPOCHS).to_json()
            accuracy[(version.name, dtype)] = trained["test_accuracy"]
            kernels[(version.name, dtype)] = trained["kernels_per_step"]
            assert 0 < trained["gpu_step_seconds"] < trained["step_seconds"], (version.name, dtype, trained)
    # Fusion's point, counted: the fused step launches fewer kernels than the unfused, which launches fewer
    # than the textbook's one statement each.
    assert kernels[("fused", "fp32")] < kernels[("unfused", "fp32")] < kernels[("textbook", "fp32")], kernels
    for (name, dtype), value in accuracy.items():
        if dtype == "fp32":
            assert value >= ACCURACY, (name, value)
        else:
            assert value >= accuracy[(name, "fp32")] - LOW_PRECISION_GAP, (name, dtype, value)
    print("\n" + ", ".join(f"{n} {d} {a:.3f} ({kernels[(n, d)]} kernels)" for (n, d), a in accuracy.items()))


@pytest.mark.gpu
def test_the_step_benchmark_verifies_each_version_before_it_times_it_by_both_clocks(monkeypatch):
    """A version with a wrong gradient is a failed cell, never timed; bf16 without cupy is refused; the rest have
    ten wall-clock and ten GPU-time samples per step, the notebook-sized step mostly host time."""
    import statistics
    from dataclasses import replace

    from fusedbench.catalog.suites import GPU_TIME, MLP_GROUPS, WALL
    from fusedbench.measure.gpu import load_gpu_stack, mlp_bench
    from fusedbench.measure.gpu.mlp import Unfused
    from fusedbench.measure.sampling import SAMPLES

    backward = Unfused.backward
    monkeypatch.setattr(
        Unfused, "backward", lambda self, g: backward(self, g) | {"b_hidden": 2 * backward(self, g)["b_hidden"]}
    )
    group = replace(MLP_GROUPS["MlpStep"], layers=("64-30-10",), batches=(512,), dtypes=("fp16", "bf16"))
    record, cache = mlp_bench.measure_mlp_steps(load_gpu_stack("test"), group)
    status = {(c.key.dtype, c.key.provider): c for c in record}
    assert (
        status[("fp16", "unfused")].status.value == "failed" and "b_hidden error" in status[("fp16", "unfused")].reason
    )
    assert {v for (d, v), c in status.items() if c.status.value == "unsupported"} == {"fused", "unfused", "textbook"}
    for dtype, version in (("fp16", "fused"), ("fp16", "textbook"), ("fp16", "torch"), ("bf16", "torch")):
        wall, gpu = (cache[("64-30-10", 512, dtype, version, clock)] for clock in (WALL, GPU_TIME))
        assert wall.ok and gpu.ok and len(wall.samples) == len(gpu.samples) == SAMPLES, (dtype, version)
        assert 0 < statistics.median(gpu.samples) < statistics.median(wall.samples) < 0.008, (dtype, version)
        assert wall.provenance["kernels"] and wall.provenance["steps_per_sample"] >= 1
    assert ("64-30-10", 512, "fp16", "unfused", GPU_TIME) in cache  # a failed cell: skipped by both benchmarks


@pytest.mark.gpu
def test_the_epoch_benchmark_fails_a_version_that_trains_below_the_bar():
    from dataclasses import replace

    from fusedbench.catalog.suites import MLP_GROUPS
    from fusedbench.measure.gpu import load_gpu_stack, mlp_bench

    group = replace(MLP_GROUPS["MlpEpoch"], dtypes=("fp32",), providers=("fused",))
    stack = load_gpu_stack("test")
    (short,), _ = mlp_bench.measure_mlp_epochs(stack, group, epochs=2)
    assert short.status.value == "failed" and "under the bar 0.9" in short.reason
    (trained,), cache = mlp_bench.measure_mlp_epochs(stack, group)
    assert trained.ok and trained.provenance["test_accuracy"] >= 0.9 and len(trained.samples) == DEFAULT_EPOCHS - 1
    assert cache[("fp32", "fused", "epoch")] is trained
