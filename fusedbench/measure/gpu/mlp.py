"""The MLP's versions that need a GPU library (`fusedbench.measure.mlp` holds the network, its maths and the loop).

- `fused`: the notebook's network: stateful nvmath `Matmul` objects planned on first use (RELU_AUX_BIAS, BIAS,
  DRELU_BGRAD and two plain GEMMs), their operands reset every step.
- `unfused`: the same planned GEMMs without epilogs, then one single-pass cupy kernel for each piece of
  pointwise work (bias and ReLU with its mask; bias; the mask applied) and cupy's row sum for the bias
  gradient.
- `textbook`: the network as plain cupy statements (`fusedbench.measure.mlp.ArrayNet` on cupy): `@`, then
  `y += b[:, None]`, `y[~mask] = 0`, `sum(axis=1)`, one operation each, as the blog writes them.
- `torch`: `torch.nn.Linear` layers, autograd and `torch.optim.SGD`, at low precision under `torch.autocast`
  (fp32 master weights, as a torch user trains), on the GPU or the CPU.

cupy has no bfloat16, so the cupy versions run fp32 and fp16; torch runs all three. The cupy versions update each
parameter in one kernel, as torch's SGD does: the update is not what the versions differ in.
"""

from __future__ import annotations

import functools

import numpy as np

from fusedbench.catalog.mlp_settings import LEARNING_RATE
from fusedbench.errors import FusedbenchError
from fusedbench.measure.mlp import PARAMETERS, ArrayNet, Version, binary_cross_entropy, sigmoid

CUPY_DTYPES = ArrayNet.dtypes  # numpy's and cupy's: fp32 and fp16
TORCH_DTYPES = ("fp32", "fp16", "bf16")


def _unsupported(name: str, dtype: str, dtypes) -> FusedbenchError:
    return FusedbenchError(f"the {name} MLP has no {dtype} (cupy has no bfloat16); choose from {', '.join(dtypes)}")


class _OnCupy:
    """Arrays on the GPU through cupy: moving them, waiting for them."""

    device = "gpu"

    def to_device(self, array: np.ndarray):
        return self.cp.asarray(array)

    def to_host(self, array) -> np.ndarray:
        return self.cp.asnumpy(array)

    def synchronize(self) -> None:
        self.cp.cuda.get_current_stream().synchronize()

    def step_kernels(self, x, target) -> dict:
        return recorded_step(self, x, target)

    def sgd(self, master, grad, rate: float) -> None:
        """One kernel per parameter (cast, scale and subtract in one pass), as torch's fused SGD does."""
        _sgd_kernel(self.cp)(self.cp.float32(rate), grad, master)


@functools.cache
def _sgd_kernel(cp):
    return cp.ElementwiseKernel(
        "float32 rate, G grad", "float32 master", "master -= rate * (float)grad", "fusedbench_sgd"
    )


def recorded_step(version: Version, x, target) -> dict:
    """CUPTI's record of one training step's kernels (the median of a few recorded steps)."""
    from fusedbench.measure.gpu.provenance import kernel_provenance

    return kernel_provenance(lambda: version.train_step(x, target), lambda: None)


class Textbook(_OnCupy, ArrayNet):
    name = "textbook"

    def __init__(self, params, dtype: str, stack) -> None:
        self.cp = self.xp = stack.cupy
        if dtype not in CUPY_DTYPES:
            raise _unsupported(self.name, dtype, CUPY_DTYPES)
        super().__init__(params, dtype)


class _PlannedNet(_OnCupy, Version):
    """The fused and unfused versions: nvmath `Matmul` objects planned on first use, their operands reset every
    step (the weights are new casts of the fp32 masters at low precision; the same arrays at fp32)."""

    def __init__(self, params, dtype: str, stack) -> None:
        if dtype not in CUPY_DTYPES:
            raise _unsupported(self.name, dtype, CUPY_DTYPES)
        super().__init__(dtype)
        self.cp, self.advanced = stack.cupy, stack.nvmath_advanced
        self.epilogs = self.advanced.MatmulEpilog
        self.params = {k: self.cp.asarray(v) for k, v in params.items()}
        # Layouts that keep every big array row-major, where cupy's elementwise kernels stream (over a column-major
        # array they stride: on an H100 the update of the fp16 W_h of 8192-16384-10 took 7.9 ms instead of 0.6).
        # W_o column-major makes W_o.T, and so unfused's masked gradient W_o.T @ grad.T, row-major; fused's comes
        # column-major from cuBLASLt's DRELU_BGRAD, so W_h's gradient is computed row-major (`product`), like its
        # master.
        self.params["w_output"] = self.cp.asfortranarray(self.params["w_output"])
        self.planned: dict[str, tuple] = {}  # GEMM name -> (the operands' shapes and strides, its planned Matmul)
        self.operands: dict[str, dict] = {}  # what each Matmul was last given

    def master(self) -> dict:
        return self.params

    def cast(self, array):
        return array.astype(CUPY_DTYPES[self.dtype], copy=False)

    def matmul(self, name: str, a, b, epilog=None, epilog_inputs=None):
        """a @ b (with the epilog): the Matmul for `name` planned on first use and again whenever its operands'
        shapes or layouts change (the test set is another batch size), its operands reset otherwise."""
        key = (a.shape, a.strides, b.shape, b.strides)
        given = {"a": a, "b": b, **(epilog_inputs or {})}
        planned_for, planned = self.planned.get(name, (None, None))
        if planned_for != key:
            if planned is not None:
                planned.free()  # one plan per GEMM: its workspace and last operands go
            planned = self.advanced.Matmul(a, b)
            planned.plan(epilog=epilog, epilog_inputs=epilog_inputs)
            self.planned[name] = (key, planned)
        else:  # only what is new: at fp32 the weights and biases are the masters, updated in place (as the notebook)
            last = self.operands[name]
            new = {k: v for k, v in given.items() if v is not last[k]}
            inputs = {k: v for k, v in new.items() if k not in ("a", "b")}
            if new:
                planned.reset_operands(a=new.get("a"), b=new.get("b"), epilog_inputs=inputs or None)
        self.operands[name] = given
        return planned.execute()

    def product(self, name: str, a, b):
        """a @ b, row-major whatever a's layout: nvmath writes a result in its first operand's layout (where no
        epilog asks for another), so a column-major a is computed as (b.T @ a.T).T, b being row-major."""
        if a.flags.c_contiguous or not b.flags.c_contiguous:
            return self.matmul(name, a, b)
        return self.matmul(name, b.T, a.T).T

    def weights(self) -> dict:
        return {k: self.cast(v) for k, v in self.params.items()}


class Fused(_PlannedNet):
    name = "fused"

    def forward(self, x):
        p = self.weights()
        hidden, aux = self.matmul(
            "hidden", p["w_hidden"], x.T, self.epilogs.RELU_AUX_BIAS, {"bias": p["b_hidden"]}
        )  # relu(W_h @ x.T + b_h) and ReLU's bit-mask
        logits = self.matmul("output", p["w_output"], hidden, self.epilogs.BIAS, {"bias": p["b_output"]})
        self.x, self.hidden, self.relu_aux, self.w_output = x, hidden.T, aux["relu_aux"], p["w_output"]
        return sigmoid(self.cp, logits.T)

    def backward(self, grad) -> dict:
        w_output = self.matmul("w_output_grad", grad.T, self.hidden)
        masked, aux = self.matmul(
            "masked", self.w_output.T, grad.T, self.epilogs.DRELU_BGRAD, {"relu_aux": self.relu_aux}
        )  # (W_o.T @ grad.T) where ReLU passed, and its row sum: the hidden bias's gradient
        return {
            "w_hidden": self.product("w_hidden_grad", masked, self.x),
            "b_hidden": aux["drelu_bgrad"],
            "w_output": w_output,
            "b_output": grad.sum(axis=0),
            "relu_mask": self.relu_aux,  # cuBLASLt's bit-packed mask
        }


class Unfused(_PlannedNet):
    name = "unfused"

    def __init__(self, params, dtype: str, stack) -> None:
        super().__init__(params, dtype, stack)
        cp = self.cp
        self.bias_relu = cp.ElementwiseKernel(
            "T pre, T bias", "T out, bool mask", "T v = pre + bias; mask = v > (T)0; out = mask ? v : (T)0;",
            "fusedbench_mlp_bias_relu",
        )  # fmt: skip
        self.add_bias = cp.ElementwiseKernel("T bias", "T out", "out += bias", "fusedbench_mlp_bias")
        self.apply_mask = cp.ElementwiseKernel("bool mask", "T out", "if (!mask) out = (T)0", "fusedbench_mlp_mask")

    def forward(self, x):
        p = self.weights()
        pre = self.matmul("hidden", p["w_hidden"], x.T)
        hidden, mask = self.bias_relu(pre, p["b_hidden"][:, None])
        logits = self.matmul("output", p["w_output"], hidden)
        self.add_bias(p["b_output"][:, None], logits)
        self.x, self.hidden, self.mask, self.w_output = x, hidden.T, mask, p["w_output"]
        return sigmoid(self.cp, logits.T)

    def backward(self, grad) -> dict:
        masked = self.matmul("masked", self.w_output.T, grad.T)
        self.apply_mask(self.mask, masked)
        return {
            "w_hidden": self.product("w_hidden_grad", masked, self.x),
            "b_hidden": masked.sum(axis=1),
            "w_output": self.matmul("w_output_grad", grad.T, self.hidden),
            "b_output": grad.sum(axis=0),
            "relu_mask": self.mask,
        }


class TorchNet(Version):
    """`torch.nn.Linear` layers and autograd, as a torch user writes the network; low precision through
    `torch.autocast` over fp32 master weights."""

    name = "torch"

    def __init__(self, params, dtype: str, torch, device: str) -> None:
        if dtype not in TORCH_DTYPES:
            raise FusedbenchError(f"the torch MLP has no {dtype}; choose from {', '.join(TORCH_DTYPES)}")
        super().__init__(dtype)
        self.torch, self.device = torch, device
        self.where = "cuda" if device == "gpu" else "cpu"
        (hidden, inputs), outputs = params["w_hidden"].shape, params["w_output"].shape[0]
        self.hidden = torch.nn.Linear(inputs, hidden, device=self.where)
        self.output = torch.nn.Linear(hidden, outputs, device=self.where)
        with torch.no_grad():
            for layer, name in ((self.hidden, "hidden"), (self.output, "output")):
                layer.weight.copy_(torch.from_numpy(params[f"w_{name}"]))
                layer.bias.copy_(torch.from_numpy(params[f"b_{name}"]))
        self.layers = (self.hidden, self.output)
        self.optimizer = torch.optim.SGD([p for layer in self.layers for p in layer.parameters()], lr=LEARNING_RATE)
        self.autocast = {"fp16": torch.float16, "bf16": torch.bfloat16}.get(dtype)

    def to_device(self, array: np.ndarray):
        return self.torch.as_tensor(array, device=self.where)

    def to_host(self, array) -> np.ndarray:
        return array.detach().float().cpu().numpy() if array.is_floating_point() else array.cpu().numpy()

    def synchronize(self) -> None:
        if self.where == "cuda":
            self.torch.cuda.synchronize()

    def cast(self, array):
        return array

    def _logits(self, x):
        with self.torch.autocast(self.where, dtype=self.autocast or self.torch.float32, enabled=bool(self.autocast)):
            pre = self.hidden(x)
            self.compute_dtype = pre.dtype  # what autocast computed the layer in
            self.mask = (pre > 0).T
            return self.output(self.torch.relu(pre)).float()

    def forward(self, x):
        with self.torch.no_grad():
            return self.torch.sigmoid(self._logits(x))

    def summed_gradients(self, x, target) -> dict:
        self.optimizer.zero_grad(set_to_none=True)
        logits = self._logits(x)
        # BCE summed over classes and the batch: the loss scale of every version (the update divides by the batch).
        loss = self.torch.nn.functional.binary_cross_entropy_with_logits(logits, target, reduction="sum")
        loss.backward()
        grads = {
            f"{kind}_{name}": getattr(layer, attribute).grad
            for layer, name in ((self.hidden, "hidden"), (self.output, "output"))
            for kind, attribute in (("w", "weight"), ("b", "bias"))
        }
        with self.torch.no_grad():
            grads["loss"] = binary_cross_entropy(self.torch.sigmoid(logits), target)
        grads["relu_mask"] = self.mask
        return grads

    def gradients(self, x, target) -> dict:
        grads = self.summed_gradients(x, target)
        return grads | {name: grads[name] / len(x) for name in PARAMETERS}

    def step_kernels(self, x, target) -> dict:
        return recorded_step(self, x, target) if self.where == "cuda" else {}

    def train_step(self, x, target):
        self.optimizer.param_groups[0]["lr"] = LEARNING_RATE / len(x)  # the summed loss's step: the mean's at 0.1
        loss = self.summed_gradients(x, target)["loss"]
        self.optimizer.step()
        return loss


GPU_VERSIONS = {"fused": Fused, "unfused": Unfused, "textbook": Textbook}
NO_TORCH = "torch is not installed or sees no GPU (pip install -e '.[torch]')"


def build_gpu_version(name: str, params: dict[str, np.ndarray], dtype: str, stack) -> Version:
    """One GPU version by name; a FusedbenchError says why it cannot run here (cupy has no bfloat16, no torch)."""
    if name == "torch":
        if stack.torch is None:
            raise FusedbenchError(NO_TORCH)
        return TorchNet(params, dtype, stack.torch, "gpu")
    return GPU_VERSIONS[name](params, dtype, stack)


def build_versions(params: dict[str, np.ndarray], dtype: str, device: str, names=None) -> list[Version]:
    """The versions that run on `device` ('gpu' or 'cpu') at `dtype`; a version the dtype rules out is left
    out, and asking for one by name that cannot run is an error naming why."""
    versions, refused = [], []
    if device == "gpu":
        from fusedbench.measure.gpu import load_gpu_stack

        stack = load_gpu_stack("fusedbench mlp --device gpu")
        for name in (*GPU_VERSIONS, "torch"):
            try:
                versions.append(build_gpu_version(name, params, dtype, stack))
            except FusedbenchError as exc:
                refused.append((name, str(exc)))
    else:
        try:
            versions.append(ArrayNet(params, dtype))
        except FusedbenchError as exc:
            refused.append(("numpy", str(exc)))
        try:
            import torch

            versions.append(TorchNet(params, dtype, torch, device))
        except ImportError:
            refused.append(("torch", "torch is not installed (pip install -e '.[torch]'; it runs bf16 on the CPU)"))
    if names:
        known = [v.name for v in versions] + [n for n, _ in refused]
        unknown = [n for n in names if n not in known]
        if unknown:
            raise FusedbenchError(f"--version {unknown[0]!r}: the {device} runs {', '.join(known)}")
        for name, why in refused:
            if name in names:
                raise FusedbenchError(why)
        versions = [v for v in versions if v.name in names]
    if not versions:
        raise FusedbenchError("; ".join(why for _, why in refused) or f"no MLP version runs on the {device}")
    return versions
