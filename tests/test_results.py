"""The tidy table, read from real asv results (an H200 run kept in tests/fixtures) and broken copies."""

import json
import math
import os
import shutil
from datetime import datetime, timezone

import pytest

from fusedbench.catalog.shapes import parse_shape
from fusedbench.cli import main
from fusedbench.errors import FusedbenchError
from fusedbench.results.loader import COLUMNS, NO_REASON, load_results

FIXTURE = os.path.join(os.path.dirname(__file__), "fixtures", "results-h200")
MACHINE = "h200-141gb"
COMMIT = "37415b8673334f91c8679387b65931ce18659c3f"


def load_table(results_dir):
    return load_results(results_dir).cells


def test_every_cell_of_the_run_is_a_row_with_the_documented_columns():
    table = load_table(FIXTURE)
    assert list(table.columns) == COLUMNS
    assert len(table) == 16 * 4 * 6  # Fp16Membound: 16 epilogs x 4 shapes x 6 providers
    assert set(table["machine"]) == {MACHINE}
    assert set(table["dtype"]) == {"fp16"}
    assert set(table["commit"]) == {"37415b8673334f91c8679387b65931ce18659c3f"}


def test_timed_cells_carry_their_samples_and_an_interval_around_the_median():
    ok = load_table(FIXTURE).query("status == 'ok'")
    assert len(ok) == 344
    assert (ok["samples"] == 10).all()
    assert (ok["ci_low_s"] <= ok["time_s"]).all() and (ok["time_s"] <= ok["ci_high_s"]).all()
    relu = ok.query("epilog == 'RELU_BIAS' and provider == 'fused' and m == 16384 and k == 256 and n == 16384")
    (row,) = relu.itertuples()
    assert row.tflops == pytest.approx((2 * 16384 * 256 * 16384 + 2 * 16384 * 16384) / row.time_s / 1e12)


def test_refused_cells_keep_the_reason_fusedbench_run_recorded():
    table = load_table(FIXTURE)
    refused = table.query("status == 'unsupported'")
    assert len(refused) == 10 * 4  # the torch peer for the ten epilogs torch has no op for
    assert set(refused["provider"]) == {"torch"}
    assert refused["reason"].str.startswith("torch has no op for").all()
    assert refused["time_s"].isna().all()


def test_without_its_record_a_skip_says_no_reason_was_recorded_and_a_warning_says_what_was_lost(tmp_path):
    copy = tmp_path / "results"
    shutil.copytree(FIXTURE, copy)
    for name in os.listdir(copy / MACHINE):
        if name.endswith(".fbenv"):
            os.remove(copy / MACHINE / name)
    results = load_results(str(copy))
    skipped = results.cells.query("status != 'ok'")
    assert set(skipped["status"]) == {"skipped"}
    assert set(skipped["reason"]) == {NO_REASON}
    (problem,) = results.problems
    assert problem.startswith(f"{copy / MACHINE / '37415b86-existing-py_opt_torch_.venv_bin_python3.json'}: ")
    assert "no fusedbench record for group(s) Fp16Membound of commit 37415b86 on h200-141gb: 40 cells" in problem


def test_a_corrupt_machine_json_is_a_warning_that_names_the_lost_results(tmp_path, capsys):
    copy = tmp_path / "results"
    shutil.copytree(FIXTURE, copy)
    (copy / MACHINE / "machine.json").write_text("{oops")
    results = load_results(str(copy))
    assert results.cells.empty
    (problem,) = results.problems
    assert problem.startswith(f"{copy / MACHINE}/machine.json is missing or unreadable")
    assert "its 1 results files were not read" in problem
    assert main(["table", str(copy)]) == 0  # a warning by default ...
    err = capsys.readouterr().err
    assert err.startswith("warning: ") and err.count("\n") == 1
    assert main(["table", str(copy), "--strict"]) == 2  # ... and an error with --strict
    assert capsys.readouterr().err.splitlines()[-1] == f"error: 1 data problem(s) in {copy} (--strict)"


def test_an_empty_folder_is_a_warning_for_table_and_report_alike(tmp_path, capsys):
    (tmp_path / "results").mkdir()
    assert main(["table", str(tmp_path / "results")]) == 0
    out, err = capsys.readouterr()
    assert out.startswith(",".join(COLUMNS)) and out.count("\n") == 1
    assert (
        err
        == f"warning: {tmp_path / 'results'} holds no asv results yet; `fusedbench run` on a GPU machine writes them\n"
    )
    assert main(["report", str(tmp_path / "results"), "-o", str(tmp_path / "out")]) == 0
    empty_page = (tmp_path / "out" / "index.html").read_text()
    assert "No fusedbench results yet" in empty_page and len(empty_page) < 10_000  # no plotly.js to draw nothing
    assert capsys.readouterr().err == err
    assert main(["report", str(tmp_path / "results"), "-o", str(tmp_path / "out"), "--strict"]) == 2


def test_a_failed_cell_is_reported_as_failed(tmp_path):
    copy = tmp_path / "results"
    shutil.copytree(FIXTURE, copy)
    (env,) = [copy / MACHINE / n for n in os.listdir(copy / MACHINE) if n.endswith(".fbenv")]
    payload = json.loads(env.read_text())
    victim = next(c for c in payload["cells"] if c["status"] == "unsupported")
    victim.update(status="failed", reason="RuntimeError: synthetic failure for this test")
    env.write_text(json.dumps(payload))
    failed = load_table(str(copy)).query("status == 'failed'")
    assert list(failed["reason"]) == ["RuntimeError: synthetic failure for this test"]


def test_spread_is_each_cells_relative_iqr_of_its_own_raw_samples():
    import statistics

    table = load_table(FIXTURE).set_index(["epilog", "m", "k", "n", "provider"])
    for epilog, provider in (("GELU_BIAS", "fused"), ("DEFAULT", "textbook"), ("DRELU_BGRAD", "unfused")):
        samples = _raw_samples(FIXTURE, epilog, "(16384,256)x(256,16384)", provider)
        q1, median, q3 = statistics.quantiles(samples, n=4, method="inclusive")
        row = table.loc[(epilog, 16384, 256, 16384, provider)]
        assert row["rel_iqr"] == pytest.approx((q3 - q1) / median) and row["rel_iqr"] > 0
        assert row["samples"] == len(samples) == 10


def test_results_of_another_asv_suite_are_refused(tmp_path):
    copy = tmp_path / "results"
    shutil.copytree(FIXTURE, copy)
    (result,) = [copy / MACHINE / n for n in os.listdir(copy / MACHINE) if n.endswith("python3.json")]
    payload = json.loads(result.read_text())
    payload["results"] = {"other_suite.time_something": payload["results"].pop("cells.Fp16Membound.time_cell")}
    result.write_text(json.dumps(payload))
    with pytest.raises(FusedbenchError, match="none of fusedbench's suite"):
        load_table(str(copy))


def test_floors_need_the_ceilings_of_the_same_run():
    # This run was narrowed to one group before narrowed runs kept the ceilings: no floors.
    assert load_table(FIXTURE)["floor_s"].isna().all()


def _cell(provider, m, k, n, time_s, flops, bytes_, commit="c1"):
    return {"machine": MACHINE, "commit": commit, "dtype": "fp16", "epilog": "BIAS", "provider": provider} | {
        "status": "ok", "m": m, "k": k, "n": n, "time_s": time_s, "flops": flops, "bytes": bytes_, "floor_s": math.nan
    }  # fmt: skip


def test_the_roof_is_the_fastest_gemm_the_machine_measured_and_floors_follow_it():
    import pandas as pd

    from fusedbench.results.loader import CEILING_COLUMNS, machine_roofs, with_floors

    ceilings = pd.DataFrame(
        [
            [MACHINE, "c1", "fp16", 700.0, "(8192,8192)x(8192,8192) ceiling", 3.0],
            [MACHINE, "c3", "fp16", 690.0, "(8192,8192)x(8192,8192) ceiling", 3.2],  # another run: a faster copy
            ["another-gpu", "c1", "fp16", 900.0, "(8192,8192)x(8192,8192) ceiling", 5.0],  # not this machine's
        ],
        columns=CEILING_COLUMNS,
    )
    work = pd.DataFrame(
        [
            _cell("gemm", 8192, 8192, 65536, 1e-3, 750e9, 1e9),
            _cell("gemm", 16384, 256, 16384, 1e-3, 100e9, 1e9),  # slow, memory-bound: no roof
            _cell("fused", 8192, 8192, 65536, 1e-3, 760e9, 3.2e9),  # 760 TFLOP/s: beats the ceiling GEMMs
            _cell("gemm", 8192, 8192, 65536, 2e-3, 750e9, 1e9, commit="c2"),  # a run without ceilings: same floors
        ]
    )
    roofs = machine_roofs(work, ceilings)
    mine = roofs[roofs["machine"] == MACHINE].iloc[0]
    assert mine["gemm_tflops"] == pytest.approx(760.0)
    assert mine["gemm_at"] == "(8192,8192)x(8192,65536) BIAS fused at c1"
    assert mine["copy_tbps"] == 3.2 and mine["copy_at"] == "c3" and mine["runs"] == 2
    floors = with_floors(work, roofs)["floor_s"]
    assert floors[0] == pytest.approx(750e9 / 760e12)
    assert floors[2] == pytest.approx(1e-3)  # max(1 ms of FLOPs, 3.2 GB / 3.2 TB/s = 1 ms): the cell is at its floor
    assert floors[1] == pytest.approx(1e9 / 3.2e12)  # memory-bound: bytes over the best bandwidth
    assert floors[3] == floors[0]  # one floor per workload and machine, whichever run timed it
    slower = machine_roofs(work[work["provider"] == "gemm"].assign(time_s=2e-3), ceilings)
    assert slower.loc[slower["machine"] == MACHINE, "gemm_at"].item() == "(8192,8192)x(8192,8192) ceiling at c1"
    assert (
        machine_roofs(work, ceilings.iloc[:0]).empty
        and with_floors(work, machine_roofs(work, ceilings.iloc[:0]))["floor_s"].isna().all()
    )  # no ceilings measured anywhere: no floors


def _raw_samples(results_dir, epilog, shape, provider):
    """One cell's samples straight from asv's file, in the order asv recorded them."""
    import ast
    import itertools

    (name,) = [n for n in os.listdir(os.path.join(results_dir, MACHINE)) if n.startswith("37415b86-")]
    with open(os.path.join(results_dir, MACHINE, name)) as stream:
        data = json.load(stream)
    result = dict(zip(data["result_columns"], data["results"]["cells.Fp16Membound.time_cell"], strict=False))
    combos = [tuple(ast.literal_eval(v) for v in combo) for combo in itertools.product(*result["params"])]
    return result["samples"][combos.index((epilog, shape, provider))]


def test_runs_that_sampled_in_rounds_compare_each_provider_to_the_gemm_round_by_round(tmp_path):
    import statistics

    copy = tmp_path / "results"
    shutil.copytree(FIXTURE, copy)
    (env,) = [copy / MACHINE / n for n in os.listdir(copy / MACHINE) if n.endswith(".fbenv")]
    env.write_text(json.dumps(json.loads(env.read_text()) | {"sampling": "williams-rounds"}))
    table = load_table(str(copy)).set_index(["epilog", "m", "k", "n", "provider"])
    shape = "(16384,256)x(256,16384)"
    fused, gemm = (_raw_samples(copy, "GELU_BIAS", shape, p) for p in ("fused", "gemm"))
    per_round = sorted(f / g for f, g in zip(fused, gemm, strict=True))
    row = table.loc[("GELU_BIAS", 16384, 256, 16384, "fused")]
    assert row["gemm_ratio"] == pytest.approx(statistics.median(per_round))
    assert (row["gemm_ratio_low"], row["gemm_ratio_high"]) == pytest.approx((per_round[1], per_round[8]))
    assert table.loc[("GELU_BIAS", 16384, 256, 16384, "gemm"), "gemm_ratio"] == 1.0
    assert table.query("status == 'ok'")["gemm_ratio"].notna().all()
    assert table.query("status != 'ok'")["gemm_ratio"].isna().all()


def test_runs_that_did_not_sample_in_rounds_compare_the_medians_and_claim_no_interval():
    table = load_table(FIXTURE).set_index(["epilog", "m", "k", "n", "provider"])
    fused, gemm = (table.loc[("GELU_BIAS", 16384, 256, 16384, p)] for p in ("fused", "gemm"))
    assert fused["gemm_ratio"] == pytest.approx(fused["time_s"] / gemm["time_s"])
    assert table["gemm_ratio_low"].isna().all() and table["gemm_ratio_high"].isna().all()


def test_a_corrupt_results_file_is_a_warning_naming_the_file_and_the_rest_is_read(tmp_path, capsys):
    copy = tmp_path / "results"
    shutil.copytree(FIXTURE, copy)
    (copy / MACHINE / "deadbeef-existing-py.json").write_text("{not json")
    results = load_results(str(copy))
    assert len(results.cells) == 384
    (problem,) = results.problems
    assert problem.startswith(f"{copy / MACHINE / 'deadbeef-existing-py.json'} is not an asv results file")
    assert main(["table", str(copy), "--strict"]) == 2
    err = capsys.readouterr().err.splitlines()
    assert err[0].startswith("warning: ") and err[1].startswith("error: ")


def test_table_filters_by_machine_and_commit_prefix_and_names_what_exists(capsys):
    assert main(["table", FIXTURE, "--machine", MACHINE, "--commit", "37415b8"]) == 0
    assert capsys.readouterr().out.count("\n") == 1 + 384
    assert main(["table", FIXTURE, "--machine", "h100-80gb-hbm3"]) == 2
    assert capsys.readouterr().err == (
        "error: --machine 'h100-80gb-hbm3' has no results; machines with results: h200-141gb\n"
    )
    assert main(["table", FIXTURE, "--commit", "d1e4d02"]) == 2
    assert capsys.readouterr().err == "error: --commit d1e4d02 matches no results here; commits: 37415b86\n"


def test_table_formats(capsys):
    assert main(["table", FIXTURE, "--format", "json"]) == 0
    records = json.loads(capsys.readouterr().out)
    assert len(records) == 384 and set(records[0]) == set(COLUMNS)
    assert main(["table", FIXTURE, "--format", "md"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("| machine | commit | group | epilog |") and len(lines) == 2 + 384
    assert main(["table", FIXTURE]) == 0
    assert capsys.readouterr().out.startswith(",".join(COLUMNS))


def test_shapes_parse_back_to_m_k_n_and_refuse_anything_else():
    assert parse_shape("(65536,16384)x(16384,8192)") == (65536, 16384, 8192)
    assert parse_shape("(129,33)x(33,77)") == (129, 33, 77)
    for label in ("(129,33)x(34,77)", "129x33x77", "(1,2)x(2,3) "):
        with pytest.raises(ValueError, match="is not written"):
            parse_shape(label)


def _as_new_record(results_dir, *, sampling="williams-rounds", change=None):
    """The fixture's legacy run file rewritten as the record its measurement writes today (one per group)."""
    from fusedbench.measure.records import read_record_file, write_record

    (legacy,) = [results_dir / MACHINE / n for n in os.listdir(results_dir / MACHINE) if n.endswith(".fbenv")]
    (record,) = read_record_file(str(legacy))
    os.remove(legacy)
    cells = tuple(change(c) if change else c for c in record.cells)
    record = record.__class__(**{**record.__dict__, "sampling": sampling, "dirty": False, "cells": cells})
    write_record(str(results_dir), record)


def test_records_of_todays_format_give_statuses_reasons_and_pairing(tmp_path):
    copy = tmp_path / "results"
    shutil.copytree(FIXTURE, copy)
    _as_new_record(copy)
    results = load_results(str(copy))
    assert results.problems == []
    table = results.cells
    assert len(table.query("status == 'unsupported' and provider == 'torch'")) == 40
    assert table.query("status == 'ok'")["gemm_ratio_low"].notna().all()  # paired by round


def test_a_cell_its_record_timed_but_asv_has_no_time_for_is_failed(tmp_path):
    from dataclasses import replace

    from fusedbench.catalog.model import Status
    from fusedbench.results.loader import NO_TIME

    copy = tmp_path / "results"
    shutil.copytree(FIXTURE, copy)

    def timed(cell):  # as if the measurement had timed the torch cells asv has no value for
        return replace(cell, status=Status.OK, reason="") if cell.key.provider == "torch" else cell

    _as_new_record(copy, change=timed)
    failed = load_table(str(copy)).query("status == 'failed'")
    assert len(failed) == 40 and set(failed["reason"]) == {NO_TIME}


def test_the_record_of_asvs_samples_is_the_newest_that_began_before_asv_started_the_benchmark():
    from dataclasses import replace

    from fusedbench.measure.records import GroupRecord
    from fusedbench.results.loader import record_of

    def at(hour):
        return GroupRecord("m", "c", "Quick", f"2026-11-22T{hour:02d}:00:00+00:00", 10.0, None, False)

    records = [at(9), at(10), at(12)]  # the 12:00 one belongs to a dry run: asv saved nothing from it
    asv_started = int(datetime(2026, 11, 22, 11, tzinfo=timezone.utc).timestamp() * 1000)
    assert record_of(records, asv_started) == at(10)
    assert record_of(records, None) == at(12)  # asv recorded no start: the newest
    assert record_of(records[2:], asv_started) is None
    assert replace(at(9), started="").started_at < at(9).started_at  # a record without a start sorts first


def test_results_measured_from_a_dirty_checkout_are_a_problem_that_says_so(tmp_path):
    copy = tmp_path / "results"
    shutil.copytree(FIXTURE, copy)
    _as_new_record(copy)
    (path,) = (copy / MACHINE).glob("*.fbenv")
    payload = json.loads(path.read_text())
    path.write_text(json.dumps(payload | {"dirty": True}))
    (problem,) = load_results(str(copy)).problems
    assert "group(s) Fp16Membound were measured from a checkout with uncommitted changes" in problem
    assert problem.endswith("so they may not be the code of commit 37415b86")


@pytest.mark.parametrize("broken", ["x", [], [None], [[1]], {}, [[1.0, 2.0]]])
def test_a_results_file_with_malformed_values_is_a_warning_not_a_traceback(tmp_path, broken):
    copy = tmp_path / "results"
    shutil.copytree(FIXTURE, copy)
    (path,) = (copy / MACHINE).glob("37415b86-*.json")
    payload = json.loads(path.read_text())
    payload["results"]["cells.Fp16Membound.time_cell"] = broken
    path.write_text(json.dumps(payload))
    results = load_results(str(copy))
    assert results.cells.empty
    (problem,) = results.problems
    assert problem.startswith(f"{path} holds asv results fusedbench cannot read") or problem.startswith(
        f"{path} is not an asv results file"
    )


def test_the_table_gives_each_cells_median_clock_and_power_and_what_the_clock_explains():
    from dataclasses import replace

    from fusedbench.catalog.model import Cell, CellKey
    from fusedbench.results.loader import COLUMNS, cell_of, power_state

    key = CellKey("RELU_BIAS", "fp16", 65536, 16384, 8192, "fused", "h100-80gb-hbm3", "c" * 40)
    clocks = [1980, 1900, 1800, 1700, 1600]
    before, after = [c + 30 for c in clocks], [c - 30 for c in clocks]  # each sample's clock: their mean
    telemetry = {"sm_mhz_before": tuple(before), "sm_mhz_after": tuple(after), "power_w": (300, -1, 500, 700, 650)}
    recorded = replace(Cell.measured(key, ()), telemetry=telemetry)
    cell = cell_of(key, 0.03, [1 / c for c in clocks], recorded)  # asv's samples, the record's telemetry
    assert cell.telemetry == telemetry
    state = power_state(cell)
    assert state["sm_mhz"] == 1800 and state["power_w"] == 575  # -1: no reading, left out
    assert state["clock_explains"] == pytest.approx(1.0)
    assert {"sm_mhz", "power_w", "clock_explains"} <= set(COLUMNS)
    assert all(math.isnan(v) for v in power_state(Cell.measured(key, [0.03])).values())  # runs before telemetry
