"""Named shape sets, in cuBLASLt's orientation: (M, K) x (K, N).

For an nn.Linear with x of shape (tokens, in), cuBLASLt computes D = W (out x in) @ x^T
(in x tokens), so M = out features, K = in features, N = tokens. Model dimensions come from each
model's published config.json (hidden_size, intermediate_size, num_key_value_heads x head_dim).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from fusedbench.errors import FusedbenchError


def shape_label(m: int, k: int, n: int) -> str:
    """(M, K, N) -> '(M,K)x(K,N)': how shapes are written everywhere, asv parameters included."""
    return f"({m},{k})x({k},{n})"


def parse_shape(label: str) -> tuple[int, int, int]:
    """'(M,K)x(K,N)' -> (M, K, N); ValueError for anything else."""
    match = re.fullmatch(r"\((\d+),(\d+)\)x\((\d+),(\d+)\)", label)
    if match is None or match.group(2) != match.group(3):
        raise ValueError(f"shape {label!r} is not written (M,K)x(K,N)")
    m, k, _, n = (int(group) for group in match.groups())
    return m, k, n


@dataclass(frozen=True)
class Shape:
    """One GEMM shape, with where it comes from."""

    m: int
    k: int
    n: int
    label: str
    source: str = ""

    @property
    def mkn(self) -> tuple[int, int, int]:
        return self.m, self.k, self.n

    def __str__(self) -> str:
        return shape_label(self.m, self.k, self.n)


_LLAMA3_8B = "meta-llama/Meta-Llama-3-8B config.json: hidden 4096, intermediate 14336, 8 KV heads x 128"
_LLAMA3_70B = "meta-llama/Meta-Llama-3-70B config.json: hidden 8192, intermediate 28672, 8 KV heads x 128"
_LLAMA2_7B = "meta-llama/Llama-2-7b-hf config.json: hidden 4096, intermediate 11008"
_LLAMA2_13B = "meta-llama/Llama-2-13b-hf config.json: hidden 5120, intermediate 13824"

SHAPE_SETS: dict[str, tuple[Shape, ...]] = {
    "seed": (
        Shape(
            65536,
            16384,
            8192,
            "blog seed",
            "NVIDIA technical blog 'fusing epilogs with matmul in nvmath-python' (H200, fp16)",
        ),
    ),
    "llm": (
        Shape(14336, 4096, 16384, "Llama-3-8B MLP up/gate, 16k tokens", _LLAMA3_8B),
        Shape(4096, 14336, 16384, "Llama-3-8B MLP down, 16k tokens", _LLAMA3_8B),
        Shape(4096, 4096, 4096, "Llama-3-8B attention q/o, 4k tokens", _LLAMA3_8B),
        Shape(1024, 4096, 65536, "Llama-3-8B attention k/v (GQA), 64k tokens", _LLAMA3_8B),
        Shape(11008, 4096, 4096, "Llama-2-7B MLP up/gate, 4k tokens", _LLAMA2_7B),
        Shape(13824, 5120, 8192, "Llama-2-13B MLP up/gate, 8k tokens", _LLAMA2_13B),
        Shape(28672, 8192, 8192, "Llama-3-70B MLP up/gate, 8k tokens", _LLAMA3_70B),
        Shape(8192, 28672, 8192, "Llama-3-70B MLP down, 8k tokens", _LLAMA3_70B),
        Shape(8192, 8192, 65536, "Llama-3-70B attention q/o, 64k tokens", _LLAMA3_70B),
    ),
    # Small K with large M and N: the GEMM is short, D is large, so each extra pass over D that
    # fusion removes is a large share of the time.
    "membound": (
        Shape(16384, 256, 16384, "K=256, 16k x 16k result"),
        Shape(8192, 256, 65536, "K=256, 8k x 64k result"),
        Shape(16384, 512, 16384, "K=512, 16k x 16k result"),
        Shape(32768, 1024, 16384, "K=1024, 32k x 16k result"),
    ),
    # Correctness: a multiple of 16, a multiple of 8 only, and odd extents.
    "small": (
        Shape(128, 64, 96, "multiples of 16"),
        Shape(200, 72, 136, "multiples of 8, not 16"),
        Shape(129, 33, 77, "odd extents"),
    ),
}


def shape_set(name: str) -> tuple[Shape, ...]:
    """Look a shape set up by name, with an error that lists the valid ones."""
    try:
        return SHAPE_SETS[name]
    except KeyError:
        raise FusedbenchError(f"unknown shape set {name!r}; choose from {', '.join(SHAPE_SETS)}") from None
