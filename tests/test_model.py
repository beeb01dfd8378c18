"""The one model of a cell: its key, its statuses, and its versioned JSON form that readers check."""

import math

import pytest

from fusedbench.catalog.formats import cell_from_json
from fusedbench.catalog.model import CELL_FORMAT, Cell, CellKey, FormatError, Status, count_by_status

KEY = CellKey("RELU_BIAS", "fp16", 65536, 16384, 8192, "fused", "h100-80gb-hbm3", "d1e4d02b" * 5)


def test_a_key_names_its_workload_and_shape_in_cublaslt_orientation():
    assert KEY.shape == "(65536,16384)x(16384,8192)"
    assert KEY.workload == ("RELU_BIAS", "fp16", 65536, 16384, 8192)
    assert KEY.at("", "") == CellKey("RELU_BIAS", "fp16", 65536, 16384, 8192, "fused")


@pytest.mark.parametrize(
    "cell",
    [
        Cell.measured(KEY, [0.0259, 0.0261]),
        Cell.refused(KEY, "CUBLAS_STATUS_NOT_SUPPORTED"),
        Cell.skipped(KEY, "needs about 900 GiB"),
        Cell.failed(KEY, "result: 7 non-finite values", math.inf),
        Cell(KEY, Status.OK, error=2.5e-4, provenance={"kernel": "sm90_xmma_gemm"}),
    ],
)
def test_every_cell_round_trips_through_its_json_form(cell):
    assert cell_from_json(cell.to_json()) == cell


def test_samples_can_be_left_to_asv():
    record = Cell.measured(KEY, [0.0259]).to_json(samples=False)
    assert "samples" not in record and cell_from_json(record).samples == ()


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"format": "fusedbench-cell/0"}, "cell.format: Input should be 'fusedbench-cell/1' (got 'fusedbench-cell/0')"),
        ({"status": "slow"}, "cell.status: Input should be 'ok', 'unsupported', 'skipped' or 'failed' (got 'slow')"),
        ({"m": "65536"}, "cell.m: Input should be a valid integer (got '65536')"),
        ({"m": True}, "cell.m: Input should be a valid integer (got True)"),
        ({"m": 0}, "cell.m: Input should be greater than or equal to 1 (got 0)"),
        ({"provider": None}, "cell.provider: Input should be a valid string (got None)"),
        ({"provider": "fusedx"}, "cell: unknown provider 'fusedx'"),
        ({"epilog": "RELU_BIASX"}, "cell: unknown epilog 'RELU_BIASX'"),
        ({"dtype": "fp64"}, "cell: unknown dtype 'fp64'; expected one of fp16, bf16, fp32, tf32, fp8"),
        ({"samples": [0.02]}, "cell: the cell is unsupported but has samples"),
    ],
)
def test_a_reader_refuses_another_format_or_a_mistyped_field(change, message):
    with pytest.raises(FormatError, match=message.replace("(", r"\(").replace(")", r"\)")):
        cell_from_json(Cell.refused(KEY, "x").to_json() | change)


def test_a_reader_names_a_missing_field():
    record = Cell.refused(KEY, "x").to_json()
    del record["reason"]
    with pytest.raises(FormatError, match=r"cell\.reason: Field required"):
        cell_from_json(record)
    with pytest.raises(FormatError, match="cell: Input should be a valid dictionary"):
        cell_from_json(["not", "a", "cell"])
    assert Cell.refused(KEY, "x").to_json()["format"] == CELL_FORMAT


def test_counts_name_every_status_even_when_none_has_it():
    counts = count_by_status([Cell.refused(KEY, "x"), Cell.refused(KEY, "y"), Cell.measured(KEY, [1.0])])
    assert counts == {Status.OK: 1, Status.UNSUPPORTED: 2, Status.SKIPPED: 0, Status.FAILED: 0}
