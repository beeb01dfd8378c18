"""The tidy table, read from real asv results (an H200 run kept in tests/fixtures) and broken copies."""

import json
import math
import os
import shutil

import pytest

from fusedbench.cli import main
from fusedbench.errors import FusedbenchError
from fusedbench.results import COLUMNS, NO_REASON, load_table, parse_shape

FIXTURE = os.path.join(os.path.dirname(__file__), "fixtures", "results-h200")
MACHINE = "h200-141gb"


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


def test_without_the_environment_file_a_skip_says_no_reason_was_recorded(tmp_path):
    copy = tmp_path / "results"
    shutil.copytree(FIXTURE, copy)
    for name in os.listdir(copy / MACHINE):
        if name.endswith(".fbenv"):
            os.remove(copy / MACHINE / name)
    skipped = load_table(str(copy)).query("status != 'ok'")
    assert set(skipped["status"]) == {"skipped"}
    assert set(skipped["reason"]) == {NO_REASON}


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


def test_spread_is_reported_as_relative_iqr():
    ok = load_table(FIXTURE).query("status == 'ok'")
    assert (ok["rel_iqr"] >= 0).all()
    assert ok["rel_iqr"].median() < 0.1  # most cells are steady on this machine


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


def test_the_roof_is_the_fastest_gemm_the_run_measured_and_floors_follow_it():
    import pandas as pd

    from fusedbench.results import CEILING_COLUMNS, best_gemm_rates, with_floors

    ceiling = pd.DataFrame(
        [[MACHINE, "c1", "fp16", 700.0, "(8192,8192)x(8192,8192) ceiling", 3.0]], columns=CEILING_COLUMNS
    )
    work = pd.DataFrame(
        [
            _cell("gemm", 8192, 8192, 65536, 1e-3, 750e9, 1e9),
            _cell("gemm", 16384, 256, 16384, 1e-3, 100e9, 1e9),  # slow, memory-bound: no roof
            _cell("fused", 8192, 8192, 65536, 1e-3, 760e9, 3e9),  # 760 TFLOP/s: beats the ceiling GEMM
            _cell("gemm", 8192, 8192, 65536, 1e-4, 750e9, 1e9, commit="c2"),  # another run: not this roof
        ]
    )
    roofs = best_gemm_rates(work, ceiling)
    assert roofs.loc[0, "gemm_tflops"] == pytest.approx(760.0)
    assert roofs.loc[0, "gemm_at"] == "(8192,8192)x(8192,65536) BIAS fused"
    floors = with_floors(work, roofs)["floor_s"]
    assert floors[0] == pytest.approx(750e9 / 760e12)
    assert floors[2] == pytest.approx(1e-3)  # max(1 ms of FLOPs, 3 GB / 3 TB/s = 1 ms): the cell is at its floor
    assert floors[1] == pytest.approx(1e9 / 3e12)  # memory-bound: bytes over bandwidth
    assert math.isnan(floors[3])  # run c2 measured no ceilings
    slower = best_gemm_rates(work[work["provider"] == "gemm"].assign(time_s=2e-3), ceiling)
    assert slower.loc[0, "gemm_tflops"] == 700.0 and slower.loc[0, "gemm_at"].endswith("ceiling")


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


def test_a_corrupt_results_file_is_one_line_naming_the_file(tmp_path, capsys):
    copy = tmp_path / "results"
    shutil.copytree(FIXTURE, copy)
    (copy / MACHINE / "deadbeef-existing-py.json").write_text("{not json")
    with pytest.raises(FusedbenchError, match=r"deadbeef-existing-py\.json is not an asv results file"):
        load_table(str(copy))
    assert main(["table", str(copy)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("error: ")


def test_table_formats(capsys):
    assert main(["table", FIXTURE, "--format", "json"]) == 0
    records = json.loads(capsys.readouterr().out)
    assert len(records) == 384 and set(records[0]) == set(COLUMNS)
    assert main(["table", FIXTURE, "--format", "md"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("| machine | commit | epilog |") and len(lines) == 2 + 384
    assert main(["table", FIXTURE]) == 0
    assert capsys.readouterr().out.startswith(",".join(COLUMNS))


def test_shapes_parse_back_to_m_k_n():
    assert parse_shape("(65536,16384)x(16384,8192)") == (65536, 16384, 8192)
    assert not math.isnan(parse_shape("(129,33)x(33,77)")[2])
