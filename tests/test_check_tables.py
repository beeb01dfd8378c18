"""The check report's tables and JSON, on fixture cells (no GPU)."""

import math

from rich.console import Console

from fusedbench.catalog.formats import cell_from_json
from fusedbench.catalog.model import Cell, CellKey, Status
from fusedbench.measure.check import CheckReport, cell_table, format_cell, format_totals, reason_table, summary_table

SHAPE = (128, 64, 96)


def key(epilog, dtype, provider):
    return CellKey(epilog, dtype, *SHAPE, provider)


CELLS = [
    Cell(key("BIAS", "fp16", "fused"), Status.OK, error=3.1e-4),
    Cell(key("BIAS", "fp16", "torch"), Status.OK, error=2.0e-4),
    Cell.failed(key("DRELU", "fp16", "fused"), "result: 7 non-finite values", math.inf),
    Cell.refused(key("DRELU", "fp16", "torch"), "torch has no op for DRELU"),
    Cell.skipped(key("BIAS", "bf16", "fused"), "bf16 operands need torch [cu13]"),
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
    for shown in ("ok 3.1e-04", "ok 2.0e-04", "FAILED inf", "unsupported", "skipped"):
        assert shown in text  # each cell's status and error, in its row and column


def test_summary_counts_each_status_per_dtype_and_provider():
    text = render(summary_table(CELLS))
    assert "1/0/0/1" in text  # fp16 fused: one ok, one failed
    assert "1/1/0/0" in text  # fp16 torch: one ok, one unsupported
    assert format_totals(CELLS) == "all 5 cells: 2 ok, 1 unsupported, 1 skipped, 1 failed"


def test_reasons_list_every_cell_that_was_not_ok_as_plain_text():
    text = render(reason_table(CELLS))
    for reason in ("7 non-finite values", "torch has no op for DRELU", "bf16 operands need torch [cu13]"):
        assert reason in text  # "[cu13]" is text, not rich markup
    assert reason_table(CELLS[:2]) is None


def test_report_json_counts_and_keeps_infinite_errors_as_null():
    report = CheckReport("NVIDIA H200", 130100, 7, CELLS)
    payload = report.to_json()
    assert report.failed
    assert payload["counts"] == {"ok": 2, "unsupported": 1, "skipped": 1, "failed": 1}
    assert payload["cells"][2]["error"] is None
    assert payload["cells"][0] == {
        "format": "fusedbench-cell/1",
        "epilog": "BIAS",
        "dtype": "fp16",
        "m": 128,
        "k": 64,
        "n": 96,
        "provider": "fused",
        "machine": "",
        "commit": "",
        "status": "ok",
        "reason": "",
        "error": 3.1e-4,
    }
    assert [cell_from_json(c) for c in payload["cells"]] == CELLS  # the one JSON form reads back
