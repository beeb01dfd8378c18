"""`fusedbench check` on the GPU: run every provider on fresh operands and verify all its outputs.

Before the verified run, every output buffer is poisoned (NaN bytes), including the aux outputs
nvmath allocates inside execute(), so an element a kernel never writes cannot pass.
"""

from __future__ import annotations

from typing import Any

from fusedbench.catalog import Workload
from fusedbench.check import CellResult
from fusedbench.epilogs import Epilog
from fusedbench.errors import Skipped, Unsupported
from fusedbench.gpu import GpuStack
from fusedbench.gpu.arrays import data_ptr, poison, poison_next_allocations, synchronize, to_host
from fusedbench.gpu.operands import make_operands
from fusedbench.gpu.providers import PreparedProvider, prepare_provider
from fusedbench.reference import Reference, ReferenceInputs, reference_outputs
from fusedbench.verify import Status, verify_outputs


def run_poisoned(prepared: PreparedProvider, framework: str) -> dict[str, Any]:
    """Poison every output, run once, and prove the library-allocated outputs were poisoned too."""
    for buffer in prepared.owned_outputs:
        poison(buffer)
    names = list(prepared.library_outputs)
    pointers = poison_next_allocations(framework, [prepared.library_outputs[n] for n in names])
    outputs = prepared.run()
    synchronize()
    for name, pointer in zip(names, pointers, strict=True):
        if data_ptr(outputs[name]) != pointer:
            raise RuntimeError(f"could not poison {name}: the allocator handed the library another block")
    return outputs


def _check_provider(
    stack: GpuStack, workload: Workload, operands, provider: str, inputs: ReferenceInputs, references: dict
) -> CellResult:
    def cell(status: Status, error: float | None = None, reason: str = "") -> CellResult:
        return CellResult(workload.epilog.name, workload.dtype.name, workload.shape, provider, status, error, reason)

    try:
        prepared = prepare_provider(provider, stack, operands)
    except Unsupported as exc:
        return cell(Status.UNSUPPORTED, reason=exc.reason)
    except Skipped as exc:
        return cell(Status.SKIPPED, reason=exc.reason)
    except Exception as exc:  # an error of ours or an unexpected library failure: never hidden
        return cell(Status.FAILED, reason=f"{type(exc).__name__}: {exc}")
    try:
        host = {name: to_host(array) for name, array in run_poisoned(prepared, operands.framework).items()}
    except Exception as exc:
        return cell(Status.FAILED, reason=f"{type(exc).__name__}: {exc}")
    finally:
        prepared.release()
    spec = prepared.computes or workload.epilog
    if spec.epilog not in references:
        references[spec.epilog] = reference_outputs(spec, inputs)
    checks = verify_outputs(host, references[spec.epilog], workload.dtype.tolerance)
    error = max(check.error for check in checks)
    failures = [f"{check.name}: {check.detail}" for check in checks if not check.ok]
    return cell(Status.FAILED if failures else Status.OK, error, "; ".join(failures))


def check_workload(stack: GpuStack, workload: Workload, providers: list[str], seed: int) -> list[CellResult]:
    """Verify each provider on one workload, with operands drawn fresh from `seed`."""
    try:
        operands = make_operands(stack, workload, seed)
    except Skipped as exc:
        return [
            CellResult(workload.epilog.name, workload.dtype.name, workload.shape, p, Status.SKIPPED, None, exc.reason)
            for p in providers
        ]
    inputs = operands.reference_inputs()
    references: dict[Epilog, Reference] = {}
    return [_check_provider(stack, workload, operands, provider, inputs, references) for provider in providers]
