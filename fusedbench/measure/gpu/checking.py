"""`fusedbench check` on the GPU: run every provider on fresh operands and verify all its outputs.

Before the verified run, every output buffer is poisoned (NaN bytes), including the aux outputs
nvmath allocates inside execute(), so an element a kernel never writes cannot pass.
"""

from __future__ import annotations

import contextlib
from typing import Any

from fusedbench.catalog.epilogs import Epilog
from fusedbench.catalog.model import Cell, CellKey, Status
from fusedbench.catalog.tuning import Tuning
from fusedbench.catalog.workloads import Workload
from fusedbench.errors import Skipped, Unsupported
from fusedbench.measure.gpu import GpuStack
from fusedbench.measure.gpu.arrays import (
    collector_paused,
    data_ptr,
    nbytes,
    poison,
    poison_next_allocations,
    poisoning_cupy_pool,
    synchronize,
    to_host,
)
from fusedbench.measure.gpu.operands import make_operands
from fusedbench.measure.gpu.providers import PreparedProvider, prepare_provider
from fusedbench.measure.reference import Reference, ReferenceInputs, reference_outputs
from fusedbench.measure.verify import verify_outputs


def run_poisoned(prepared: PreparedProvider, framework: str) -> tuple[dict[str, Any], dict[str, int]]:
    """Poison every output, run once, and prove the library-allocated outputs were poisoned too.

    `framework` is the operands' (cupy or torch); a provider whose outputs come from another allocator says
    which (`PreparedProvider.allocator`). cupy's pool also poisons every block it hands out during the run. Returns
    the outputs and, for each output the library allocated, its address, which lay in poisoned memory.
    """
    for buffer in prepared.owned_outputs:
        poison(buffer)
    names = list(prepared.library_outputs)
    allocator = prepared.allocator or framework
    with collector_paused():  # nothing freed between reading the free blocks and the run
        poisoned = poison_next_allocations(allocator, [prepared.library_outputs[n] for n in names])
        with poisoning_cupy_pool() if allocator == "cupy" else contextlib.nullcontext([]) as handed_out:
            outputs = prepared.run()
            synchronize()
    poisoned += handed_out
    landed = {name: data_ptr(outputs[name]) for name in names}
    for name, pointer in landed.items():
        end = pointer + nbytes(outputs[name])
        if not any(start <= pointer and end <= stop for start, stop in poisoned):
            raise RuntimeError(f"could not poison {name}: the allocator handed the library another block")
    if len(set(landed.values())) != len(landed):
        raise RuntimeError(f"outputs {', '.join(names)} share memory")
    return outputs, landed


def _check_provider(
    stack: GpuStack,
    workload: Workload,
    operands,
    key: CellKey,
    inputs: ReferenceInputs,
    references: dict,
    tuning: Tuning | None,
) -> Cell:
    try:
        prepared = prepare_provider(key.provider, stack, operands, tuning, timed=False)
    except Unsupported as exc:
        return Cell.refused(key, exc.reason)
    except Skipped as exc:
        return Cell.skipped(key, exc.reason)
    except Exception as exc:  # an error of ours or an unexpected library failure: never hidden
        return Cell.failed(key, f"{type(exc).__name__}: {exc}")
    try:
        outputs, _ = run_poisoned(prepared, operands.framework)
        host = {name: to_host(array) for name, array in outputs.items()}
    except Exception as exc:
        return Cell.failed(key, f"{type(exc).__name__}: {exc}")
    finally:
        prepared.release()
    spec = prepared.computes or workload.epilog
    if spec.epilog not in references:
        references[spec.epilog] = reference_outputs(spec, inputs)
    checks = verify_outputs(host, references[spec.epilog], workload.dtype.tolerance)
    error = max(check.error for check in checks)
    failures = [f"{check.name}: {check.detail}" for check in checks if not check.ok]
    if failures:
        return Cell.failed(key, "; ".join(failures), error)
    return Cell(key, Status.OK, error=error)


def check_workload(
    stack: GpuStack, workload: Workload, providers: list[str], seed: int, tuning: Tuning | None = None
) -> list[Cell]:
    """Verify each provider on one workload (tuned as it will be timed), with operands drawn fresh from `seed`."""
    keys = workload.cell_keys(providers)
    try:
        operands = make_operands(stack, workload, seed)
    except Skipped as exc:
        return [Cell.skipped(key, exc.reason) for key in keys]
    inputs = operands.reference_inputs()
    references: dict[Epilog, Reference] = {}
    return [_check_provider(stack, workload, operands, key, inputs, references, tuning) for key in keys]
