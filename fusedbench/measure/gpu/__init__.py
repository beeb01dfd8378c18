"""The GPU side of fusedbench: the only package that imports cupy, nvmath-python and torch.

`load_gpu_stack()` imports them lazily and turns every way of not having a GPU into one
`GpuUnavailable` line that says what to do instead.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from types import ModuleType

from fusedbench.errors import GpuUnavailable

INSTALL_HINT = "install fusedbench[cu12] or fusedbench[cu13] on a machine with an NVIDIA GPU"


@dataclass(frozen=True)
class GpuStack:
    """The imported GPU libraries and the device they see."""

    cupy: ModuleType
    nvmath_advanced: ModuleType  # nvmath.linalg.advanced
    compute_types: type  # nvmath.linalg.ComputeType
    torch: ModuleType | None  # None when torch is not installed or sees no GPU
    device_name: str
    compute_capability: tuple[int, int]
    cublaslt_version: int
    library_errors: tuple[type[BaseException], ...]  # exception types a library raises to refuse a cell

    def versions(self) -> dict:
        """Versions of everything a timing depends on: CUDA, cuBLASLt, and every provider's libraries."""
        import sys
        from importlib.metadata import PackageNotFoundError, version

        from fusedbench.catalog.providers import PROVIDERS, provider_libraries

        runtime = self.cupy.cuda.runtime
        versions = {
            "cuda_runtime": runtime.runtimeGetVersion(),
            "cuda_driver": runtime.driverGetVersion(),
            "cublaslt": self.cublaslt_version,
            "python": sys.version.split()[0],
        }
        for library in provider_libraries(PROVIDERS):
            module = sys.modules.get(library.split("-")[0])  # nvmath-python is imported as nvmath
            versions[library] = getattr(module, "__version__", None) if module is not None else None
        for wheel in ("nvidia-cublas", "nvidia-cublas-cu12"):  # the cuBLAS wheel nvmath loads, where pip installed it
            try:
                versions["nvidia-cublas"] = version(wheel)
                break
            except PackageNotFoundError:
                continue
        return versions


def _import(name: str, command: str) -> ModuleType:
    try:
        return importlib.import_module(name)
    except ImportError as exc:
        raise GpuUnavailable(f"{command} needs {name.split('.')[0]} ({exc}); {INSTALL_HINT}") from None


def _why_none(cuda_error: Exception) -> str:
    """Why CUDA sees no GPU: NVML's word where there is no driver at all (CUDA's own, 'CUDA driver version is
    insufficient', reads as an old driver where there is none), else CUDA's."""
    from fusedbench.measure.telemetry import nvml_device

    try:
        nvml_device()
    except GpuUnavailable as missing:
        return str(missing)
    except ImportError:  # no nvidia-ml-py to ask
        pass
    return str(cuda_error)


def load_gpu_stack(command: str) -> GpuStack:
    """Import cupy, nvmath-python and (optionally) torch, and check that a CUDA GPU is visible."""
    cupy = _import("cupy", command)
    try:
        count = cupy.cuda.runtime.getDeviceCount()
    except Exception as exc:  # no driver, no device, broken runtime: CUDA says which (NVML where there is no driver)
        raise GpuUnavailable(f"{command} needs an NVIDIA GPU, and CUDA found none ({_why_none(exc)})") from None
    if count == 0:
        raise GpuUnavailable(f"{command} needs an NVIDIA GPU, and CUDA found none")
    advanced = _import("nvmath.linalg.advanced", command)
    linalg = _import("nvmath.linalg", command)
    cublaslt = _import("nvmath.bindings.cublasLt", command)
    try:
        torch = importlib.import_module("torch")
        if not torch.cuda.is_available():
            torch = None
    except ImportError:
        torch = None
    props = cupy.cuda.runtime.getDeviceProperties(0)
    name = props["name"].decode() if isinstance(props["name"], bytes) else str(props["name"])
    return GpuStack(
        cupy=cupy,
        nvmath_advanced=advanced,
        compute_types=linalg.ComputeType,
        torch=torch,
        device_name=name,
        compute_capability=(int(props["major"]), int(props["minor"])),
        cublaslt_version=int(cublaslt.get_version()),
        library_errors=(cublaslt.cuBLASLtError,),
    )
