"""The seed notebook's MLP training step, end to end: one definition of the network and its maths, trained in
several versions on real data (scikit-learn's digits, which ship inside the package: no download).

The network is the notebook's: one hidden layer with ReLU, a sigmoid output, binary cross-entropy and plain
mini-batch SGD. As in the notebook, the loss reported is the mean over batch and classes, while the step is
the gradient of the sum over classes averaged over the batch: (p - y) / batch at the output's input.

In cuBLASLt's orientation, as the notebook writes it: the hidden layer is relu(W_h @ x.T + b_h) (M = hidden,
bias of length M: RELU_AUX_BIAS), the output W_o @ h + b_o (BIAS), and the backward pass through ReLU is
W_o.T @ grad.T masked by ReLU's mask, with the hidden bias's gradient its row sum (DRELU_BGRAD).

This module holds what every version shares and runs without a GPU: the initial weights, the float64
reference of one step's gradients, the data, the training loop, and `ArrayNet`, the network written as plain
array statements (numpy here; cupy in `fusedbench.gpu.mlp`, where the GPU versions live).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import ClassVar

import numpy as np

from fusedbench.errors import FusedbenchError
from fusedbench.mlp_settings import BATCH, LEARNING_RATE, OUTPUTS, SEED

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


def reference_step(params: dict[str, np.ndarray], x: np.ndarray, target: np.ndarray) -> dict[str, np.ndarray]:
    """One step's gradients in float64 (and the ReLU mask, and the loss), the maths every version must match."""
    p = {k: v.astype(np.float64) for k, v in params.items()}
    x, target = x.astype(np.float64), target.astype(np.float64)
    pre = p["w_hidden"] @ x.T + p["b_hidden"][:, None]  # (hidden, batch)
    mask = pre > 0
    hidden = np.where(mask, pre, 0.0)
    probs = sigmoid(np, (p["w_output"] @ hidden + p["b_output"][:, None]).T)  # (batch, outputs)
    grad = (probs - target) / len(x)
    masked = (p["w_output"].T @ grad.T) * mask
    return {
        "w_hidden": masked @ x,
        "b_hidden": masked.sum(axis=1),
        "w_output": grad.T @ hidden.T,
        "b_output": grad.sum(axis=0),
        "relu_mask": mask,
        "loss": float(binary_cross_entropy(probs, target)),
    }


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
    `synchronize`; `train_step` and `gradients` are shared (the torch version replaces them with autograd)."""

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

    def gradients(self, x, target) -> dict:
        """One step's gradients (fp32, the version's library) without the update; the ReLU mask as `relu_mask`
        and the loss as `loss`."""
        probs = self.forward(self.cast(x))
        grads = self.backward(self.cast((probs.astype(x.dtype) - target) / len(x)))
        grads["loss"] = binary_cross_entropy(probs.astype(x.dtype), target)
        return grads

    def train_step(self, x, target):
        """Forward, backward, SGD on the fp32 masters; returns the loss (a 0-d array, not synchronised)."""
        grads = self.gradients(x, target)
        for name, value in self.master().items():
            value -= LEARNING_RATE * grads[name].astype(value.dtype)
        return grads["loss"]

    def step_kernels(self, x, target) -> dict:
        """The kernels one training step launches and their GPU time (`fusedbench.gpu.provenance`'s record:
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
    losses, seconds, timed = [], 0.0, 0
    for epoch in range(epochs):
        order = version.to_device(rng.permutation(len(data.y_train)))
        version.synchronize()
        started = time.perf_counter()
        for first in range(0, len(order) - batch + 1, batch):
            chosen = order[first : first + batch]
            losses.append(version.train_step(x_train[chosen], target[chosen]))
        version.synchronize()
        if epoch > 0 or epochs == 1:
            seconds += time.perf_counter() - started
            timed += len(order) // batch
    predicted = version.predict(version.to_device(data.x_test))
    kernels = version.step_kernels(x_train[:batch], target[:batch])
    return Trained(
        version.name,
        version.dtype,
        version.device,
        [float(version.to_host(loss)) for loss in losses],
        float((predicted == data.y_test).mean()),
        seconds / timed if timed else math.nan,
        len(losses),
        timed,
        kernels,
    )
