"""The check report's tables and JSON, on fixture cells (no GPU)."""

import math

from rich.console import Console

from fusedbench.check import (
    CellResult,
    CheckReport,
    cell_table,
    format_cell,
    format_totals,
    reason_table,
    summary_table,
)
from fusedbench.verify import Status

CELLS = [
    CellResult("BIAS", "fp16", "(128,64)x(64,96)", "fused", Status.OK, 3.1e-4),
    CellResult("BIAS", "fp16", "(128,64)x(64,96)", "torch", Status.OK, 2.0e-4),
    CellResult("DRELU", "fp16", "(128,64)x(64,96)", "fused", Status.FAILED, math.inf, "result: 7 non-finite values"),
    CellResult("DRELU", "fp16", "(128,64)x(64,96)", "torch", Status.UNSUPPORTED, None, "torch has no op for DRELU"),
    CellResult("BIAS", "bf16", "(128,64)x(64,96)", "fused", Status.SKIPPED, None, "bf16 operands need torch"),
]


def render(table) -> str:
    console = Console(width=200, record=True)
    console.print(table)
    return console.export_text()


def test_cells_render_status_and_error():
    assert format_cell(CELLS[0]) == "ok 3.1e-04"
    assert format_cell(CELLS[2]) == "FAILED inf"
    assert format_cell(CELLS[3]) == "unsupported"


def test_cell_table_has_a_row_per_workload_and_a_column_per_provider():
    text = render(cell_table(CELLS))
    assert "fused" in text and "torch" in text
    assert text.count("(128,64)x(64,96)") == 3  # BIAS/fp16, DRELU/fp16, BIAS/bf16


def test_summary_counts_each_status_per_dtype_and_provider():
    text = render(summary_table(CELLS))
    assert "1/0/0/1" in text  # fp16 fused: one ok, one failed
    assert "1/1/0/0" in text  # fp16 torch: one ok, one unsupported
    assert format_totals(CELLS) == "all 5 cells: 2 ok, 1 unsupported, 1 skipped, 1 failed"


def test_reasons_list_every_cell_that_was_not_ok():
    text = render(reason_table(CELLS))
    for reason in ("7 non-finite values", "torch has no op for DRELU", "bf16 operands need torch"):
        assert reason in text
    assert reason_table(CELLS[:2]) is None


def test_report_json_counts_and_keeps_infinite_errors_as_null():
    report = CheckReport("NVIDIA H200", 130100, 7, CELLS)
    payload = report.to_json()
    assert report.failed
    assert payload["counts"] == {"ok": 2, "unsupported": 1, "skipped": 1, "failed": 1}
    assert payload["cells"][2]["error"] is None
    assert payload["cells"][0] == {
        "epilog": "BIAS",
        "dtype": "fp16",
        "shape": "(128,64)x(64,96)",
        "provider": "fused",
        "status": "ok",
        "error": 3.1e-4,
        "reason": "",
    }
