"""Shared fixtures; `gpu`-marked tests skip with the reason when no usable GPU stack is present."""

from __future__ import annotations

import functools

import pytest

from fusedbench.errors import GpuUnavailable


@functools.cache
def _gpu_stack_or_reason():
    from fusedbench.gpu import load_gpu_stack

    try:
        return load_gpu_stack("running the gpu tests"), None
    except GpuUnavailable as exc:
        return None, str(exc)


def pytest_collection_modifyitems(config, items):
    if not any("gpu" in item.keywords for item in items):
        return
    stack, reason = _gpu_stack_or_reason()
    if stack is None:
        skip = pytest.mark.skip(reason=f"needs a GPU: {reason}")
        for item in items:
            if "gpu" in item.keywords:
                item.add_marker(skip)


@pytest.fixture(scope="session")
def gpu_stack():
    stack, reason = _gpu_stack_or_reason()
    if stack is None:
        pytest.skip(f"needs a GPU: {reason}")
    return stack
