"""Framework-neutral helpers over cupy arrays and torch tensors: views, host copies, poison.

Operands live in cupy where cupy has the dtype (fp16, fp32) and in torch otherwise (bf16, fp8);
the unfused kernels are cupy kernels, so torch memory is viewed through DLPack with an integer
dtype of the same width (cupy has no bfloat16 or float8).
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator
from typing import Any

import numpy as np

POISON_BYTE = 0xFF  # NaN in fp16, bf16 and fp32; an impossible value in a bool mask


def is_torch(array: Any) -> bool:
    return type(array).__module__.startswith("torch")


def as_cupy(array: Any) -> Any:
    """A cupy view of the same memory (bf16 as uint16 storage, fp8 as uint8 storage)."""
    import cupy

    if not is_torch(array):
        return array
    import torch

    storage_views = {torch.bfloat16: (torch.int16, cupy.uint16), torch.float8_e4m3fn: (torch.uint8, cupy.uint8)}
    if array.dtype in storage_views:
        torch_view, cupy_dtype = storage_views[array.dtype]
        return cupy.from_dlpack(array.view(torch_view)).view(cupy_dtype)
    return cupy.from_dlpack(array)


def as_torch(array: Any) -> Any:
    """A torch view of the same memory (for the torch peer on cupy-held operands)."""
    if is_torch(array):
        return array
    import torch

    return torch.from_dlpack(array)


def in_order(array: Any, row_major: bool) -> Any:
    """The same 2-D values in row-major (C) or column-major (F) memory: the array itself where it already is."""
    if is_torch(array):
        if row_major:
            return array.contiguous()
        return array.t().contiguous().t()
    import cupy

    return cupy.ascontiguousarray(array) if row_major else cupy.asfortranarray(array)


def copy_of(array: Any) -> Any:
    """A new array with the same values, as naive code makes one (cupy's copy(), torch's clone())."""
    return array.clone() if is_torch(array) else array.copy()


def data_ptr(array: Any) -> int:
    return array.data_ptr() if is_torch(array) else array.data.ptr


def nbytes(array: Any) -> int:
    return array.numel() * array.element_size() if is_torch(array) else array.nbytes


def to_host(array: Any) -> np.ndarray:
    """A numpy copy: floats widened to float64, bool and uint8 kept byte for byte."""
    if is_torch(array):
        import torch

        tensor = array.detach()
        if tensor.dtype in (torch.bfloat16, torch.float8_e4m3fn, torch.float16):
            tensor = tensor.float()
        host = tensor.cpu().numpy()
    else:
        import cupy

        host = cupy.asnumpy(array)
    return widened(host)


def widened(host: np.ndarray) -> np.ndarray:
    """Floats as float64, anything else as it is. Rows no kernel writes (an aux output's padding, a poisoned
    buffer) may hold signalling NaNs; widening quiets them, which is no error."""
    if host.dtype.kind != "f":
        return host
    with np.errstate(invalid="ignore"):
        return host.astype(np.float64)


def synchronize() -> None:
    import cupy

    cupy.cuda.runtime.deviceSynchronize()


def poison(array: Any) -> None:
    """Fill a dense buffer (C- or F-ordered) with POISON_BYTE, so unwritten elements show."""
    view = as_cupy(array)
    if not (view.flags.c_contiguous or view.flags.f_contiguous):
        raise ValueError("only dense buffers can be poisoned")
    _poison_bytes(data_ptr(array), nbytes(array))


def poison_next_allocations(framework: str, sizes: list[int]) -> list[tuple[int, int]]:
    """Poison the memory the framework's caching allocator will hand out next for these sizes: the address
    ranges poisoned, (start, end).

    nvmath allocates its aux outputs inside `execute()`; blocks of the same sizes freed just before are what
    cupy's pool returns. torch's allocator may hand a compiled graph's temporaries those blocks first, so there
    every block it holds free is poisoned (torch lists them), after blocks of these sizes were taken and freed so
    that the pool holds them. The caller checks that each output lies in a poisoned range.
    """
    if framework == "torch":
        import torch

        blocks = [torch.empty(size, dtype=torch.uint8, device="cuda") for size in sizes]
        del blocks
        ranges = list(_free_torch_blocks(torch.cuda.memory_snapshot()))
        for start, end in ranges:
            _poison_bytes(start, end - start)
        synchronize()
        return ranges
    import cupy

    blocks = [cupy.empty(size, dtype=cupy.uint8) for size in sizes]
    for block in blocks:
        poison(block)
    synchronize()
    ranges = [(data_ptr(block), data_ptr(block) + block.nbytes) for block in blocks]
    del blocks
    return ranges


@contextlib.contextmanager
def collector_paused() -> Iterator[None]:
    """Python's cyclic garbage collector off inside. torch's poisoning reads which blocks are free before the run:
    a collection between that reading and the library's allocation frees memory nobody poisoned, and the library
    may get it (the textbook's fp8 backward results did, on an H200). A collection before the reading would cost
    about 0.3 s a cell with torch loaded."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


@contextlib.contextmanager
def poisoning_cupy_pool() -> Iterator[list[tuple[int, int]]]:
    """Inside, every block cupy's pool hands out (on this thread) is poisoned first; yields the (start, end) of each,
    as they come. A library that allocates temporaries beside its outputs (einsum) may take the blocks
    `poison_next_allocations` poisoned for its outputs first: poisoned at hand-out, an output lies in poison all the
    same."""
    import cupy

    pool = cupy.get_default_memory_pool()
    handed_out: list[tuple[int, int]] = []

    def malloc(size: int):
        memory = pool.malloc(size)
        if size:
            _poison_bytes(memory.ptr, size)
            handed_out.append((memory.ptr, memory.ptr + size))
        return memory

    with cupy.cuda.using_allocator(malloc):
        yield handed_out


def _free_torch_blocks(snapshot: list[dict]):
    """(start, end) of every block torch's caching allocator holds free, from torch.cuda.memory_snapshot()."""
    for segment in snapshot:
        address = segment["address"]
        for block in segment["blocks"]:  # in address order, tiling the segment
            if block["state"] == "inactive":
                yield address, address + block["size"]
            address += block["size"]


def _poison_bytes(address: int, size: int) -> None:
    import cupy

    cupy.cuda.runtime.memset(address, POISON_BYTE, size)
