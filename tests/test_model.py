"""The one model of a cell: its key, its statuses, and its versioned JSON form that readers check."""

import math

import pytest

from fusedbench.catalog.model import CELL_FORMAT, Cell, CellKey, FormatError, Status, count_by_status, legacy_cell

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
    assert Cell.from_json(cell.to_json()) == cell


def test_samples_can_be_left_to_asv():
    record = Cell.measured(KEY, [0.0259]).to_json(samples=False)
    assert "samples" not in record and Cell.from_json(record).samples == ()


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"format": "fusedbench-cell/0"}, "cell format 'fusedbench-cell/0', expected 'fusedbench-cell/1'"),
        ({"status": "slow"}, "cell status 'slow' is none of"),
        ({"m": "65536"}, "cell field 'm' is '65536', expected int"),
        ({"m": True}, "cell field 'm' is True, expected int"),
        ({"provider": None}, "cell field 'provider' is None, expected str"),
    ],
)
def test_a_reader_refuses_another_format_or_a_mistyped_field(change, message):
    with pytest.raises(FormatError, match=message.replace("(", r"\(").replace(")", r"\)")):
        Cell.from_json(Cell.refused(KEY, "x").to_json() | change)


def test_a_reader_names_a_missing_field():
    record = Cell.refused(KEY, "x").to_json()
    del record["reason"]
    with pytest.raises(FormatError, match="cell has no field 'reason'"):
        Cell.from_json(record)
    with pytest.raises(FormatError, match="a cell must be a JSON object"):
        Cell.from_json(["not", "a", "cell"])
    assert Cell.refused(KEY, "x").to_json()["format"] == CELL_FORMAT


def test_a_legacy_entry_takes_its_dtype_from_the_group_and_its_place_from_the_run():
    entry = {"group": "Bf16Seed", "epilog": "DRELU", "shape": "(65536,16384)x(16384,8192)", "provider": "torch"}
    cell = legacy_cell(entry | {"status": "unsupported", "reason": "no op"}, dtype="bf16", machine="m", commit="c")
    assert cell == Cell.refused(CellKey("DRELU", "bf16", 65536, 16384, 8192, "torch", "m", "c"), "no op")
    with pytest.raises(FormatError, match="legacy cell"):
        legacy_cell(entry | {"status": "ok", "shape": "65536x8192"}, dtype="bf16", machine="m", commit="c")


def test_counts_name_every_status_even_when_none_has_it():
    counts = count_by_status([Cell.refused(KEY, "x"), Cell.refused(KEY, "y"), Cell.measured(KEY, [1.0])])
    assert counts == {Status.OK: 1, Status.UNSUPPORTED: 2, Status.SKIPPED: 0, Status.FAILED: 0}
