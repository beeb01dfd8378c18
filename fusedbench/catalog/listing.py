"""The catalog `fusedbench list` prints: epilogs, dtypes, shape sets, providers and suites."""

from __future__ import annotations

from fusedbench.catalog.dtypes import DTYPES
from fusedbench.catalog.epilogs import EPILOGS
from fusedbench.catalog.providers import PROVIDERS
from fusedbench.catalog.shapes import SHAPE_SETS
from fusedbench.catalog.suites import SUITES, suite_groups


def catalog_json() -> dict:
    """The catalog as one JSON-ready object: epilogs, dtypes, shapes, providers, suites, and their details."""
    return {
        "epilogs": [
            {
                "name": spec.name,
                "value": spec.value,
                "summary": spec.summary,
                "inputs": list(spec.inputs),
                "outputs": list(spec.outputs),
            }
            for spec in EPILOGS.values()
        ],
        "dtypes": list(DTYPES),
        "shapes": {name: [list(s.mkn) for s in shapes] for name, shapes in SHAPE_SETS.items()},
        "providers": list(PROVIDERS),
        "suites": {
            name: [
                {"group": g.name, "dtype": g.dtype, "shape_set": g.shape_set, "cells": g.cell_count}
                for g in suite_groups(name)
            ]
            for name in SUITES
        },
        "dtype_details": [
            {
                "name": d.name,
                "operand": d.operand,
                "result": d.result,
                "compute_type": d.compute_type,
                "tolerance": d.tolerance,
                "shape_multiple": d.shape_multiple,
            }
            for d in DTYPES.values()
        ],
        "shape_details": {
            name: [{"mkn": list(s.mkn), "label": s.label, "source": s.source} for s in shapes]
            for name, shapes in SHAPE_SETS.items()
        },
        "provider_details": [
            {
                "name": p.name,
                "description": p.description,
                "libraries": list(p.libraries),
                "control": p.control,
                "peer": p.peer,
            }
            for p in PROVIDERS.values()
        ],
    }
