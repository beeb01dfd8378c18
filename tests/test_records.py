"""The records beside asv's results: written by the measurement, read back, legacy files included."""

import json
import os
import re
import shutil
from dataclasses import replace

import pytest
from conftest import finding

from fusedbench.catalog.formats import cell_from_json
from fusedbench.catalog.model import Cell, CellKey, FormatError, Status
from fusedbench.measure.records import RECORD_FORMAT, GroupRecord, load_records, read_record_file, write_record

FIXTURE = os.path.join(os.path.dirname(__file__), "fixtures", "results-h200")
COMMIT = "c0ffee" * 6 + "c0ff"


def record(group="Quick", started="2026-11-22T10:00:00.123456+00:00", cells=None) -> GroupRecord:
    key = CellKey("RELU_BIAS", "fp16", 65536, 16384, 8192, "torch", "h100-80gb-hbm3", COMMIT)
    return GroupRecord(
        machine="h100-80gb-hbm3",
        commit=COMMIT,
        group=group,
        started=started,
        seconds=41.2,
        sampling="williams-rounds",
        dirty=False,
        environment={"gpu": {"name": "NVIDIA H100 80GB HBM3"}, "versions": {"cublaslt": 130100}},
        cells=tuple(cells or (Cell.refused(key, "torch has no op"), Cell.measured(key, [0.02, 0.03]))),
    )


def test_a_record_is_written_beside_asvs_results_and_reads_back_without_samples(tmp_path):
    path = write_record(str(tmp_path), record())
    assert os.path.relpath(path, tmp_path) == "h100-80gb-hbm3/c0ffeec0-Quick-20261122T100000123456Z.fbenv"
    with open(path) as stream:
        payload = json.load(stream)
    assert payload["format"] == RECORD_FORMAT and "samples" not in json.dumps(payload)  # asv keeps the timings
    (back,) = read_record_file(path)
    assert back.cells[0] == record().cells[0]
    assert back.cells[1].status is Status.OK and back.cells[1].samples == ()
    assert back.environment["versions"] == {"cublaslt": 130100} and back.dirty is False


def test_records_load_oldest_first_and_an_unreadable_one_is_a_problem_that_names_it(tmp_path):
    write_record(str(tmp_path), record(group="Fp16Seed", started="2026-11-22T11:00:00+00:00"))
    write_record(str(tmp_path), record(group="Quick", started="2026-11-22T09:00:00+00:00"))  # its file sorts last
    broken = tmp_path / "h100-80gb-hbm3" / "c0ffeec0-Quick-x.fbenv"
    broken.write_text("{not json")
    records, problems = load_records(str(tmp_path))
    assert [(r.group, r.started[11:13]) for r in records] == [("Quick", "09"), ("Fp16Seed", "11")]
    assert len(problems) == 1 and problems[0].startswith(f"{broken} is not a fusedbench record (not JSON")
    assert "statuses and reasons are lost" in problems[0]


def write_json(path, payload) -> str:
    path.write_text(json.dumps(payload))
    return str(path)


def test_a_record_of_another_format_or_without_its_cells_is_refused_naming_the_field(tmp_path):
    with pytest.raises(FormatError, match="Input tag 'fusedbench-record/9' found using 'format' does not match"):
        read_record_file(write_json(tmp_path / "a.fbenv", record().to_json() | {"format": "fusedbench-record/9"}))
    without = {k: v for k, v in record().to_json().items() if k != "cells"}
    with pytest.raises(FormatError, match=r"^cells: Field required$"):
        read_record_file(write_json(tmp_path / "b.fbenv", without))


@pytest.mark.parametrize(
    ("started", "says"),
    [("1900-01-01T00:00:00", "is outside 2000-2100"), ("+275760-09-13", "is not an ISO 8601 date"), ("", "is not")],
)
def test_a_record_started_at_no_plausible_date_is_refused_naming_it(tmp_path, started, says):
    path = write_json(tmp_path / "a.fbenv", record().to_json() | {"started": started})
    with pytest.raises(FormatError, match=f"^started: '{re.escape(started)}' {says}"):
        read_record_file(path)


def test_a_legacy_entry_takes_its_dtype_from_the_group_and_its_place_from_the_run(tmp_path):
    entry = {"group": "Bf16Seed", "epilog": "DRELU", "shape": "(65536,16384)x(16384,8192)", "provider": "torch"}
    legacy = {"format": "fusedbench-environment/2", "machine": "m", "commit": "c0ffee0"}
    path = write_json(tmp_path / "a.fbenv", legacy | {"cells": [entry | {"status": "unsupported", "reason": "no op"}]})
    ((cell,),) = [r.cells for r in read_record_file(path)]
    assert cell == Cell.refused(CellKey("DRELU", "bf16", 65536, 16384, 8192, "torch", "m", "c0ffee0"), "no op")
    bad = write_json(tmp_path / "b.fbenv", legacy | {"cells": [entry | {"status": "ok", "shape": "65536x8192"}]})
    with pytest.raises(FormatError, match=r"cells\[0\]: shape '65536x8192' is not \(M,K\)x\(K,N\)"):
        read_record_file(bad)


def test_a_legacy_run_file_becomes_one_record_per_group(tmp_path):
    copy = tmp_path / "results"
    shutil.copytree(FIXTURE, copy)
    records, problems = load_records(str(copy))
    assert problems == []
    (legacy,) = records  # the fixture run measured one group
    assert (legacy.machine, legacy.group, legacy.sampling, legacy.dirty) == ("h200-141gb", "Fp16Membound", None, None)
    assert len(legacy.cells) == 384 and {c.key.dtype for c in legacy.cells} == {"fp16"}
    assert sum(c.status is Status.UNSUPPORTED for c in legacy.cells) == 40
    assert legacy.environment["gpu"]["name"] == "NVIDIA H200"


def test_a_record_keeps_each_cells_per_sample_telemetry_a_cell_per_line(tmp_path):
    key = CellKey("RELU_BIAS", "fp16", 65536, 16384, 8192, "fused", "h100-80gb-hbm3", COMMIT)
    telemetry = {"sm_mhz_before": (1980, 1965), "sm_mhz_after": (1755, 1740), "power_w": (690, 702), "throttle": (4, 4)}
    measured = replace(Cell.measured(key, [0.0229, 0.0231]), telemetry=telemetry)
    path = write_record(str(tmp_path), record(cells=[measured]))
    (back,) = read_record_file(path)
    assert back.cells[0].telemetry == telemetry
    with open(path) as stream:
        lines = stream.read().splitlines()
    assert sum('"telemetry":{' in line for line in lines) == 1  # the cell on one line, not a line a number
    old = record().to_json() | {"format": "fusedbench-record/1"}  # records before telemetry still read
    assert read_record_file(write_json(tmp_path / "old.fbenv", old))[0].cells[0] == record().cells[0]


@pytest.mark.parametrize(
    "telemetry", [{"power_w": [300, float("inf")]}, {"power_w": [1.7]}, {"power_w": "123"}, {"power_w": [True]}, [1]]
)
def test_a_cell_whose_telemetry_is_not_lists_of_whole_numbers_is_refused_in_one_line(telemetry):
    key = CellKey("RELU_BIAS", "fp16", 65536, 16384, 8192, "fused", "h100-80gb-hbm3", COMMIT)
    written = Cell.measured(key, [0.02]).to_json() | {"telemetry": telemetry}
    with pytest.raises(FormatError, match=r"^cell\.telemetry"):
        cell_from_json(written)


def test_a_cells_telemetry_is_small_enough_for_a_default_run_to_carry_under_a_megabyte():
    """docs/measurement.md: 242 bytes a cell in 4e54cb3's committed quick record, 0.70 MB for a default run at most."""
    import json
    from pathlib import Path

    from fusedbench.catalog.suites import GROUPS, SUITES
    from fusedbench.measure.records import load_records

    root = Path(__file__).parent.parent
    records, _ = load_records(str(root / "results"))
    (quick,) = [r for r in records if r.commit.startswith("4e54cb3") and r.group == "Quick"]
    carried = [cell.telemetry for cell in quick.cells if cell.telemetry]
    assert len(carried) == 28 < len(quick.cells)  # the measured cells; the refused ones carry none
    per_cell = round(sum(len(json.dumps(series, separators=(",", ":"))) for series in carried) / len(carried))
    default_cells = sum(GROUPS[name].cell_count for name in SUITES["default"] if name in GROUPS)
    assert (per_cell, default_cells, round(per_cell * default_cells / 1e6, 2)) == (242, 2884, 0.70)
    text = finding("protocol-screen", folded=False)
    assert "242 bytes a cell" in text and "2,884 cells would carry at most 0.70 MB" in " ".join(text.split())


def test_a_records_numbers_are_kept_as_written_an_int_stays_an_int(tmp_path):
    """The report's environment card shows them as recorded: a checked 73 read back as 73.0 changed the page."""
    key = CellKey("BIAS", "fp16", 65536, 16384, 8192, "unfused", "h100-80gb-hbm3", COMMIT)
    copied = Cell(key, Status.OK, provenance={"same_size_copy": {"bytes": 2147614720, "us": 707.5}, "compile_s": 3})
    written = record(cells=[copied]).to_json()
    written["environment"]["telemetry"] = {"max_temperature_c": 73, "max_power_w": 635.398}
    (back,) = read_record_file(write_json(tmp_path / "a.fbenv", written))
    assert repr(back.environment["telemetry"]) == "{'max_temperature_c': 73, 'max_power_w': 635.398}"
    assert repr(back.cells[0].provenance["same_size_copy"]["bytes"]) == "2147614720"
    assert repr(back.cells[0].provenance["compile_s"]) == "3"
