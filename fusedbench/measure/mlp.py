"""The seed notebook's MLP training step, end to end: one definition of the network and its maths, trained in
several versions on real data (scikit-learn's digits, which ship inside the package: no download).

The network is the notebook's: one hidden layer with ReLU, a sigmoid output, binary cross-entropy and plain
mini-batch SGD. As in the notebook, the loss reported is the mean over batch and classes, while the step is
the gradient of the sum over classes averaged over the batch: (p - y) / batch at the output's input (computed
as p - y, its 1 / batch applied in the update: see below).

The backward pass computes the gradients of the loss summed over the batch, and the update divides by the
batch in fp32 (a static loss scale of `batch`): the batch mean of fp16 gradients at a batch of 65,536 would sit
among fp16's subnormals (below 6e-5) and lose most of its digits. In exact arithmetic the step is the notebook's.

In cuBLASLt's orientation, as the notebook writes it: the hidden layer is relu(W_h @ x.T + b_h) (M = hidden,
bias of length M: RELU_AUX_BIAS), the output W_o @ h + b_o (BIAS), and the backward pass through ReLU is
W_o.T @ grad.T masked by ReLU's mask, with the hidden bias's gradient its row sum (DRELU_BGRAD).

This module holds what every version shares and runs without a GPU: the initial weights, the float64
reference of one step's gradients, the data, the training loop, and `ArrayNet`, the network written as plain
array statements (numpy here; cupy in `fusedbench.measure.gpu.mlp`, where the GPU versions live).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import ClassVar

import numpy as np

from fusedbench.catalog.mlp_settings import BATCH, LEARNING_RATE, OUTPUTS, SEED
from fusedbench.errors import FusedbenchError
from fusedbench.measure.reference import unpack_relu_aux

BCE_EPS = 1e-8  # the notebook's, inside the log
PARAMETERS = ("w_hidden", "b_hidden", "w_output", "b_output")
# Low precision keeps fp32 master weights: each step computes in the dtype from a cast of them and
# updates the fp32 masters (SGD at lr 0.1 on fp16 weights would round most updates away).
MASTER_DTYPE = "fp32"


def init_params(inputs: int, hidden: int, outputs: int = OUTPUTS, seed: int = SEED) -> dict[str, np.ndarray]:
    """The notebook's initialisation: uniform in +-1/sqrt(fan-in), float32; W_h is (hidden, inputs)."""
    rng = np.random.default_rng(seed)
    first, second = 1.0 / math.sqrt(inputs), 1.0 / math.sqrt(hidden)
    return {
        "w_hidden": rng.uniform(-first, first, (hidden, inputs)).astype(np.float32),
        "b_hidden": rng.uniform(-first, first, hidden).astype(np.float32),
        "w_output": rng.uniform(-second, second, (outputs, hidden)).astype(np.float32),
        "b_output": rng.uniform(-second, second, outputs).astype(np.float32),
    }


def one_hot(labels: np.ndarray, classes: int = OUTPUTS) -> np.ndarray:
    out = np.zeros((len(labels), classes), dtype=np.float32)
    out[np.arange(len(labels)), labels] = 1
    return out


def reference_step(params: dict[str, np.ndarray], x, target) -> dict:
    """One step's gradients in float64 (and the ReLU mask, its pre-activation and the loss), the maths every
    version must match, in the library of `x` (numpy, or cupy for the sizes the GPU benchmarks time). The sigmoid
    alone is fp32, as in every version (`sigmoid`): far inside every tolerance. `backward`
    keeps what `hidden_gradients` needs to redo the hidden layer's gradients under another mask."""
    xp = _namespace(x)
    p = {k: xp.asarray(v, dtype=xp.float64) for k, v in params.items()}
    x, target = x.astype(xp.float64), target.astype(xp.float64)
    pre = p["w_hidden"] @ x.T + p["b_hidden"][:, None]  # (hidden, batch)
    mask = pre > 0
    hidden = xp.where(mask, pre, 0.0)
    probs = sigmoid(xp, (p["w_output"] @ hidden + p["b_output"][:, None]).T)  # (batch, outputs)
    grad = (probs - target) / len(x)
    reference = {
        "w_output": grad.T @ hidden.T,
        "b_output": grad.sum(axis=0),
        "relu_mask": mask,
        "pre_activation": pre,
        "loss": float(binary_cross_entropy(probs, target)),
        "backward": {"inputs": x, "output_grad": grad, "output_weights": p["w_output"]},
    }
    del hidden
    return reference | hidden_gradients(reference["backward"], mask)


def hidden_gradients(backward: dict, mask) -> dict:
    """The hidden layer's weight and bias gradients in float64 under a ReLU mask. A mask bit whose pre-activation
    is within rounding of zero may fall either way, and it gates a gradient that is not small: one such bit moves a
    row of W_h's gradient by a whole batch element's share. So a version is held to the gradients of its own mask,
    once that mask is shown to agree with the reference wherever the sign is clear."""
    masked = (backward["output_weights"].T @ backward["output_grad"].T) * mask
    return {"w_hidden": masked @ backward["inputs"], "b_hidden": masked.sum(axis=1)}


# Largest gradient error over the largest reference value, per compute dtype (fp32 accumulates in fp32); the
# loss's relative error; and a ReLU mask bit may differ only where its pre-activation is within this of zero
# (relative to the largest), where rounding decides the sign.
GRADIENT_TOLERANCE = {"fp32": 1e-5, "fp16": 1e-2, "bf16": 4e-2}
DTYPE_NAMES = {"fp32": "float32", "fp16": "float16", "bf16": "bfloat16"}


@dataclass(frozen=True)
class GradientCheck:
    """One version's step against `reference_step`: each gradient's error, the wrong mask bits, what failed."""

    errors: dict[str, float]  # max |got - ref| / max |ref| per parameter; the loss's relative error
    wrong_mask_bits: int
    problems: tuple[str, ...]  # empty: the step is right

    @property
    def ok(self) -> bool:
        return not self.problems


def check_gradients(version: Version, x, target, expected: dict) -> GradientCheck:
    """Run one step's gradients of `version` (without the update) and compare them with `expected`, the float64
    reference of the same batch, in the reference's library (numpy, or cupy on the GPU)."""
    xp = _namespace(expected["w_hidden"])
    tolerance = GRADIENT_TOLERANCE[version.dtype]
    got = version.gradients(x, target)
    problems, errors = [], {}
    computed = str(version.compute_dtype).split(".")[-1]
    if computed != DTYPE_NAMES[version.dtype]:
        problems.append(f"computed in {computed}, not {version.dtype}")
    pre, wrong = expected["pre_activation"], -1
    mask = _in(version, xp, got["relu_mask"])
    if mask.dtype != xp.bool_:  # cuBLASLt's relu_aux: one bit per row, packed along the hidden axis
        mask = unpack_relu_aux(mask, pre.shape[0], xp)
    if mask.shape != pre.shape:
        problems.append(f"relu_mask has shape {mask.shape}, expected {pre.shape}")
    else:
        differ = mask != expected["relu_mask"]
        wrong = int(xp.count_nonzero(differ & (xp.abs(pre) > tolerance * float(xp.abs(pre).max()))))
        if wrong:
            problems.append(f"{wrong} of {mask.size} ReLU mask bits wrong")
        elif differ.any():  # only bits that rounding decides: the gradients of the version's own mask
            expected = expected | hidden_gradients(expected["backward"], mask)
    for name in PARAMETERS:
        value, reference = _in(version, xp, got[name]), expected[name]
        if value.shape != reference.shape:
            problems.append(f"{name} has shape {value.shape}, expected {reference.shape}")
            continue
        errors[name] = float(xp.abs(value.astype(xp.float64) - reference).max() / xp.abs(reference).max())
        if not errors[name] <= tolerance:  # NaN fails too
            problems.append(f"{name} error {errors[name]:.2e} > {tolerance:.0e}")
    errors["loss"] = abs(float(got["loss"]) - expected["loss"]) / abs(expected["loss"])
    if not errors["loss"] <= tolerance:
        problems.append(f"loss error {errors['loss']:.2e} > {tolerance:.0e}")
    return GradientCheck(errors, wrong, tuple(problems))


def _in(version: Version, xp, array):
    """A version's output in the reference's library: numpy through the version's `to_host`, cupy as it is or,
    from torch, through DLPack (no copy)."""
    if xp is np:
        return version.to_host(array)
    if type(array).__module__.startswith("torch"):
        return xp.from_dlpack(array.detach().float() if array.is_floating_point() else array.detach())
    return array


def sigmoid(xp, logits):
    """The output activation, in fp32 whatever the compute dtype (so are the loss and its gradient)."""
    return 1 / (1 + xp.exp(-logits.astype(xp.float32)))


def binary_cross_entropy(probs, target):
    """The notebook's loss: the mean over batch and classes (its gradient step uses the batch mean)."""
    xp = _namespace(probs)
    return -xp.mean((1 - target) * xp.log(1 - probs + BCE_EPS) + target * xp.log(probs + BCE_EPS))


def _namespace(array):
    """numpy, cupy or torch: the library an array belongs to, for the few calls the loss needs."""
    module = type(array).__module__.split(".")[0]
    if module == "numpy":
        return np
    import importlib

    return importlib.import_module(module)


@dataclass(frozen=True)
class Dataset:
    x_train: np.ndarray  # float32, standardised with the training set's mean and deviation
    y_train: np.ndarray  # int labels
    x_test: np.ndarray
    y_test: np.ndarray

    @property
    def inputs(self) -> int:
        return self.x_train.shape[1]


def load_digits_dataset(test_fraction: float = 0.2, seed: int = 0) -> Dataset:
    """scikit-learn's 8x8 digits (1,797 images, shipped inside the package), a stratified-free shuffled split,
    standardised as the notebook normalises MNIST."""
    try:
        from sklearn.datasets import load_digits
    except ImportError:
        raise FusedbenchError("the MLP trains on scikit-learn's digits: pip install -e '.[mlp]'") from None
    digits = load_digits()
    order = np.random.default_rng(seed).permutation(len(digits.target))
    cut = int(len(order) * (1 - test_fraction))
    x, y = digits.data.astype(np.float32), digits.target.astype(np.int64)
    train, test = order[:cut], order[cut:]
    mean, std = x[train].mean(), x[train].std()
    return Dataset((x[train] - mean) / std, y[train], (x[test] - mean) / std, y[test])


class Version:
    """One way to run the network: forward, backward and the SGD update in its own library. Subclasses set
    `name`, `dtype` and `device` and implement `forward`, `backward`, `to_device`, `to_host`, `master`,
    `synchronize`; the gradients and `train_step` are shared (the torch version replaces them with autograd).
    `compute_dtype` is the dtype its last step computed in."""

    name = ""
    device = ""

    def __init__(self, dtype: str) -> None:
        self.dtype = dtype

    def forward(self, x):
        raise NotImplementedError

    def backward(self, grad) -> dict:
        raise NotImplementedError

    def to_device(self, array: np.ndarray):
        raise NotImplementedError

    def to_host(self, array) -> np.ndarray:
        raise NotImplementedError

    def master(self) -> dict:
        """The fp32 master parameters, in the version's library, updated in place."""
        raise NotImplementedError

    def synchronize(self) -> None:
        """Wait for the device (timing a step needs the work done, not only queued)."""

    def cast(self, array):
        """An fp32 array of the version's library in its compute dtype."""
        raise NotImplementedError

    def summed_gradients(self, x, target) -> dict:
        """The gradients of the loss summed over the batch, in the compute dtype and the version's library, without
        the update; the ReLU mask as `relu_mask`, the loss (the notebook's mean) as `loss`."""
        probs = self.forward(self.cast(x))
        grads = self.backward(self.cast(probs.astype(x.dtype) - target))
        self.compute_dtype = grads["w_hidden"].dtype
        grads["loss"] = binary_cross_entropy(probs.astype(x.dtype), target)
        return grads

    def gradients(self, x, target) -> dict:
        """The notebook's gradients (the batch mean) in fp32, what `reference_step` gives; mask and loss as above."""
        grads = self.summed_gradients(x, target)
        return grads | {name: grads[name].astype(x.dtype) / len(x) for name in PARAMETERS}

    def train_step(self, x, target):
        """Forward, backward, SGD on the fp32 masters; returns the loss (a 0-d array, not synchronised)."""
        grads = self.summed_gradients(x, target)
        for name, value in self.master().items():
            self.sgd(value, grads[name], LEARNING_RATE / len(x))
        return grads["loss"]

    def sgd(self, master, grad, rate: float) -> None:
        """master -= rate * grad, in the master's fp32."""
        master -= rate * grad.astype(master.dtype, copy=False)

    def step_kernels(self, x, target) -> dict:
        """The kernels one training step launches and their GPU time (`fusedbench.measure.gpu.provenance`'s record:
        'kernels', or 'kernels_unrecorded' and why); nothing on the CPU."""
        return {}

    def predict(self, x) -> np.ndarray:
        return self.to_host(self.forward(self.cast(x)).argmax(axis=1))


class ArrayNet(Version):
    """The network as plain array statements, one operation each (the blog's naive style): `xp` is numpy on
    the CPU, cupy on the GPU (the textbook)."""

    name = "numpy"
    device = "cpu"
    xp = np
    dtypes: ClassVar[dict] = {"fp32": np.float32, "fp16": np.float16}

    def __init__(self, params: dict[str, np.ndarray], dtype: str) -> None:
        super().__init__(dtype)
        if dtype not in self.dtypes:
            raise FusedbenchError(f"{self.name} has no {dtype}; choose from {', '.join(self.dtypes)}")
        self.params = {k: self.to_device(v) for k, v in params.items()}

    def master(self) -> dict:
        return self.params

    def to_device(self, array: np.ndarray):
        return self.xp.asarray(array)

    def to_host(self, array) -> np.ndarray:
        return np.asarray(array)

    def cast(self, array):
        return array.astype(self.dtypes[self.dtype])

    def forward(self, x):
        p = {k: self.cast(v) for k, v in self.params.items()}
        y = p["w_hidden"] @ x.T
        y += p["b_hidden"][:, None]
        self.mask = y > 0
        y[~self.mask] = 0
        z = p["w_output"] @ y
        z += p["b_output"][:, None]
        self.x, self.hidden, self.w_output = x, y, p["w_output"]
        return sigmoid(self.xp, z.T)

    def backward(self, grad) -> dict:
        masked = self.w_output.T @ grad.T
        masked[~self.mask] = 0
        return {
            "w_hidden": masked @ self.x,
            "b_hidden": masked.sum(axis=1),
            "w_output": grad.T @ self.hidden.T,
            "b_output": grad.sum(axis=0),
            "relu_mask": self.mask,
        }


@dataclass
class Trained:
    """What one version's training gave: the loss each step, test accuracy, and the time per step."""

    name: str
    dtype: str
    device: str
    losses: list[float] = field(default_factory=list)
    test_accuracy: float = math.nan
    step_seconds: float = math.nan
    steps: int = 0
    timed_steps: int = 0  # the steps step_seconds averages: all but the first epoch's, where there are more
    epoch_seconds: list[float] = field(default_factory=list)  # each epoch's wall clock, the first included
    kernels: dict = field(default_factory=dict)  # Version.step_kernels of one more step, after the test

    def _gpu_time(self) -> dict:
        """The step's GPU time (its kernels' summed durations) and the host's overhead beyond it, where recorded."""
        if "kernels" not in self.kernels:
            return {"kernels_unrecorded": self.kernels.get("kernels_unrecorded", "not a GPU version")}
        gpu = sum(kernel["us"] for kernel in self.kernels["kernels"]) / 1e6
        return {
            "kernels_per_step": len(self.kernels["kernels"]),
            "gpu_step_seconds": gpu,
            "host_overhead_seconds": self.step_seconds - gpu,
        }

    def to_json(self) -> dict:
        losses = self.losses or [math.nan]
        return {
            "name": self.name,
            "dtype": self.dtype,
            "device": self.device,
            "master_weights": MASTER_DTYPE,
            "test_accuracy": round(self.test_accuracy, 4),
            "step_seconds": self.step_seconds,
            "steps": self.steps,
            "timed_steps": self.timed_steps,
            **self._gpu_time(),
            "loss_first": losses[0],
            "loss_last": losses[-1],
            "loss_min": min(losses),
        }


def train(version: Version, data: Dataset, *, epochs: int, batch: int = BATCH, seed: int = 0) -> Trained:
    """Mini-batch SGD over `epochs` passes of the training set (shuffled each epoch, the last partial batch
    dropped as the notebook's loader does), then the test accuracy. Step time: the wall clock of the steps,
    the device synchronised at the end of each epoch, leaving out the first epoch where there are more (its
    first step plans the Matmuls and compiles the kernels: a cost paid once, not per step)."""
    if batch > len(data.x_train):
        raise FusedbenchError(f"--batch {batch} is more than the {len(data.x_train)} training images; pass less")
    rng = np.random.default_rng(seed)
    x_train, target = version.to_device(data.x_train), version.to_device(one_hot(data.y_train))
    losses, epoch_seconds = [], []
    steps_per_epoch = len(data.y_train) // batch
    for _ in range(epochs):
        order = version.to_device(rng.permutation(len(data.y_train)))
        version.synchronize()
        started = time.perf_counter()
        for first in range(0, steps_per_epoch * batch, batch):
            chosen = order[first : first + batch]
            losses.append(version.train_step(x_train[chosen], target[chosen]))
        version.synchronize()
        epoch_seconds.append(time.perf_counter() - started)
    timed = epoch_seconds[1:] or epoch_seconds
    predicted = version.predict(version.to_device(data.x_test))
    kernels = version.step_kernels(x_train[:batch], target[:batch])
    return Trained(
        version.name,
        version.dtype,
        version.device,
        [float(version.to_host(loss)) for loss in losses],
        float((predicted == data.y_test).mean()),
        sum(timed) / (len(timed) * steps_per_epoch),
        len(losses),
        len(timed) * steps_per_epoch,
        epoch_seconds,
        kernels,
    )
