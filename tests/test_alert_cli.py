"""`fusedbench compare` and `fusedbench alert` on committed runs: choices of runs, outputs, exit codes, bad input."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from fusedbench.cli import main

ROOT = Path(__file__).parent.parent
MACHINE = "h100-80gb-hbm3"
QUICK_RUNS = ("6c07033f", "c29370f9", "b42fdf64", "dcb8dbf7", "7dd23c51")  # the A/A quick runs, in git order


def copy_runs(target: Path, commits, machine: str = MACHINE) -> Path:
    """A results folder with only these commits' runs on `machine` (a fraction of the committed results: fast)."""
    (target / machine).mkdir(parents=True)
    shutil.copy(ROOT / "results" / "benchmarks.json", target)
    shutil.copy(ROOT / "results" / machine / "machine.json", target / machine)
    for commit in commits:
        for path in (ROOT / "results" / machine).glob(f"{commit}-*"):
            shutil.copy(path, target / machine)
    return target


@pytest.fixture(scope="module")
def quick(tmp_path_factory) -> Path:
    return copy_runs(tmp_path_factory.mktemp("quick") / "results", QUICK_RUNS)


def run_cli(capsys, *argv):
    code = main([str(a) for a in argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_alert_takes_each_groups_newest_run_against_the_run_before_it_and_is_silent_on_a_a(capsys, quick):
    code, out, err = run_cli(capsys, "alert", quick, "--machine", MACHINE)
    assert code == 0, out + err
    lines = out.splitlines()
    assert lines[0] == f"fusedbench alert: green ({MACHINE}: no alert)"
    assert lines[1] == "quick: green; 30 of 30 cells compared"
    assert lines[2].startswith(f"  compared: Quick: {MACHINE}@7dd23c51 against {MACHINE}@dcb8dbf7; preset ")


def test_the_verdict_does_not_depend_on_where_it_is_asked(capsys, quick, tmp_path, monkeypatch):
    """No git is asked: from outside any checkout the runs and the verdict are the same."""
    inside = run_cli(capsys, "alert", quick, "--machine", MACHINE, "--format", "json")
    monkeypatch.chdir(tmp_path)
    assert run_cli(capsys, "alert", quick, "--machine", MACHINE, "--format", "json") == inside


def test_compare_json_has_every_cell_and_metric_of_the_two_named_runs(capsys, quick):
    code, out, _ = run_cli(
        capsys,
        "compare",
        quick,
        "--baseline",
        f"{MACHINE}@6c07033",
        "--candidate",
        "7dd23c5",
        "--machine",
        MACHINE,
        "--format",
        "json",
    )
    assert code == 0
    (suite,) = json.loads(out)["suites"]
    (group,) = suite["groups"]
    assert group["baseline"]["commit"].startswith("6c07033")
    assert group["candidate"]["commit"].startswith("7dd23c5")
    metrics = [c["metric"] for c in group["rows"]]
    assert (metrics.count("time"), metrics.count("epilog-cost"), metrics.count("fusion-speedup")) == (28, 23, 5)
    assert all(c["ci_low"] <= c["ratio"] <= c["ci_high"] for c in group["rows"])
    assert suite["alerts"] == [] and {"time", "epilog-cost"} <= set(metrics)


def test_two_results_folders_compare_their_newest_runs(capsys, tmp_path):
    before = copy_runs(tmp_path / "before", QUICK_RUNS[:1])
    after = copy_runs(tmp_path / "after", QUICK_RUNS[1:])
    code, out, _ = run_cli(capsys, "compare", before, after, "--machine", MACHINE, "--format", "json")
    assert code == 0
    (group,) = json.loads(out)["suites"][0]["groups"]
    assert group["baseline"]["results"] == str(before) and group["candidate"]["results"] == str(after)
    assert group["baseline"]["commit"].startswith("6c07033") and group["candidate"]["commit"].startswith("7dd23c5")


def test_dump_thresholds_prints_the_preset_in_force_for_each_suite_and_why(capsys, quick):
    code, out, _ = run_cli(capsys, "alert", quick, "--dump-thresholds")
    assert code == 0
    in_force = json.loads(out)
    assert set(in_force) == {"quick", "default", "full", "peers", "mlp"}
    classes = ("large", "medium", "small", "group", "provider")
    for preset in in_force.values():
        assert {"name", "thresholds", "calibrated_on", "runs", "noise", "rates", "in_force_because"} <= preset.keys()
        assert set(preset["thresholds"]) == {
            f"{m}/{k}" for m in ("time", "epilog-cost", "fusion-speedup") for k in classes
        }
    assert in_force["quick"]["name"] == f"{MACHINE}/quick@6c07033"  # the fixture's runs are back to back
    assert "calibrated on this GPU's own A/A runs of the quick suite" in in_force["quick"]["in_force_because"]
    assert in_force["peers"]["name"] == f"{MACHINE}/peers@028e8a3"  # all 17 groups, two sets of runs
    assert in_force["full"]["name"] == f"{MACHINE}/default@6fd4f0d"  # no A/A runs of the full suite: compared
    assert "no A/A runs of the full suite" in in_force["full"]["in_force_because"]
    code, out, _ = run_cli(capsys, "alert", quick, "--dump-thresholds", "--suite", "quick")
    assert code == 0 and set(json.loads(out)) == {"quick"}


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["--machine", "h900"], f"machine 'h900' has no results; machines with results: {MACHINE}"),
        (["--machine", MACHINE, "--baseline", "deadbee"], f"commit 'deadbee' matches no runs of {MACHINE}; commits"),
        (["--baseline", "@@@"], "--baseline '@@@' is not COMMIT, MACHINE@COMMIT or MACHINE@"),
        (["--candidate", "h100@xyz"], "--candidate 'h100@xyz' is not COMMIT"),
        (["--machine", MACHINE, "--baseline", "7dd23c5", "--candidate", "7dd23c5"], "are the same run"),
        (["--preset", "nope"], "no threshold preset 'nope'; presets: "),
    ],
)
def test_a_bad_choice_is_one_line_naming_the_value_and_exit_2(capsys, quick, argv, says):
    code, out, err = run_cli(capsys, "alert", quick, *argv)
    assert code == 2 and out == ""
    assert err.startswith("error: ") and says in err and err.count("\n") == 1


def test_three_folders_or_a_missing_one_are_refused(capsys, quick, tmp_path):
    assert run_cli(capsys, "compare", quick, quick, quick)[0] == 2
    code, _, err = run_cli(capsys, "alert", tmp_path / "nowhere")
    assert code == 2 and "no results folder at" in err


@pytest.mark.parametrize("flag", ["--machine", "--preset"])
def test_an_empty_name_is_a_usage_error_never_unset(capsys, flag):
    with pytest.raises(SystemExit) as exited:
        main(["compare", flag, ""])
    assert exited.value.code == 2 and "expected a name, got ''" in capsys.readouterr().err


TUNED = "67306e2d"  # quick runs with one provider degraded on purpose (fusedbench run --tune), on the H100


def tuned_results(tmp_path: Path, setting: str) -> tuple[str, Path]:
    """(the tuned machine, a results folder with the last A/A quick run and the run tuned with `setting`)."""
    tuned = f"{MACHINE}-tuned-fused-{setting}"
    results = copy_runs(tmp_path / "results", QUICK_RUNS[-1:])
    copy_runs(tmp_path / "tuned", [TUNED], tuned)
    shutil.copytree(tmp_path / "tuned" / tuned, results / tuned)
    return tuned, results


@pytest.mark.parametrize(
    ("setting", "expected"),
    [
        # the forced 8th algorithm: GELU_AUX_BIAS's fused cell 18% slower, and its fusion speedup x0.85, beyond
        # the large class's 17%, a new fusion inversion
        (
            "algorithm-7",
            {("regression", "GELU_AUX_BIAS", "time"), ("fusion-inversion", "GELU_AUX_BIAS", "fusion-speedup")},
        ),
        # no workspace: cuBLASLt refuses DRELU_BGRAD's fused cell, which the baseline timed
        ("workspace-0", {("missing", "DRELU_BGRAD", "time")}),
    ],
)
def test_a_run_degraded_on_purpose_fails_on_its_touched_cells_and_no_untouched_cell(
    capsys, tmp_path, setting, expected
):
    tuned, results = tuned_results(tmp_path, setting)
    code, out, _ = run_cli(
        capsys, "alert", results, "--baseline", f"{MACHINE}@7dd23c5", "--candidate", f"{tuned}@", "--format", "json"
    )
    assert code == 1
    alerts = json.loads(out)["suites"][0]["alerts"]
    cells = [a for a in alerts if a["epilog"] is not None]
    assert {(a["kind"], a["epilog"], a["metric"]) for a in cells} == expected
    assert {a["provider"] for a in cells} == {"fused"}  # the only provider the tuning touched
    assert all(a["provider"] in ("fused", "*") for a in alerts)  # no gate of an untouched provider either


def test_history_prints_a_cells_series_in_git_order_and_the_step(capsys, quick):
    cell = "RELU_BIAS/fp16/(65536,16384)x(16384,8192)/fused"
    code, out, _ = run_cli(capsys, "history", quick, "--machine", MACHINE, "--cell", cell)
    assert code == 0
    lines = out.splitlines()
    assert [line.split()[0] for line in lines[:-1]] == [c[:8] for c in QUICK_RUNS]
    assert all(line.endswith(" ms") for line in lines[:-1])
    assert lines[-1].startswith("step up (asv.step_detect): ")


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["history", "--machine", MACHINE, "--cell", "RELU/fp16/fused"], "is not EPILOG/DTYPE/SHAPE/PROVIDER"),
        (["history", "--machine", MACHINE, "--cell", "RELU/fp16/(1,2)x(2,3)/fused"], "has no timed results"),
        (["calibrate", "--machine", MACHINE, "--runs", "6c07033"], "a set needs at least two A/A runs"),
        (["calibrate", "--machine", MACHINE, "--runs", "6c07033,deadbee"], "commit 'deadbee' matches no runs"),
        (["history", "--machine", "h900", "--cell", "RELU/fp16/(1,2)x(2,3)/fused"], "machine 'h900' has no results in"),
        (["history", "--machine", MACHINE, "--cell", "relu/fp16/(1,2)x(2,3)/fused"], "unknown epilog 'relu'; choose"),
        (["history", "--machine", MACHINE, "--cell", "RELU/fp16/(1,2)x(2,3)/cublas"], "unknown provider 'cublas'"),
        (["calibrate", "--machine", MACHINE, "--runs", "6c07033,6c07033f"], "names run 6c07033f twice"),
    ],
)
def test_history_and_calibrate_refuse_bad_input_in_one_line(capsys, quick, argv, says):
    code, out, err = run_cli(capsys, *argv[:1], quick, *argv[1:])
    assert code == 2 and out == "" and says in err and err.count("\n") == 1


def test_each_cell_carries_its_benchmark_version_as_asv_recorded_it(quick):
    from fusedbench.results.loader import load_results

    loaded = load_results(str(quick))
    recorded = json.loads(next((quick / MACHINE).glob(f"{QUICK_RUNS[0]}-existing-*.json")).read_text())
    column = recorded["result_columns"].index("version")
    assert set(loaded.detail["version"]) == {recorded["results"]["cells.Quick.time_cell"][column]}


def test_the_default_baseline_skips_an_earlier_run_whose_benchmark_version_differs(quick):
    from fusedbench.results.loader import load_results
    from fusedbench.results.runs import baseline_of, group_runs

    loaded = load_results(str(quick))
    runs = group_runs(loaded)
    assert [c[:8] for c in runs["commit"]] == list(QUICK_RUNS)  # the runs in the order asv started them
    assert baseline_of(runs, runs.iloc[-1])["commit"].startswith(QUICK_RUNS[-2])
    assert baseline_of(runs, runs.iloc[0]) is None  # the first run has nothing before it
    older = loaded.cells["commit"].str.startswith(QUICK_RUNS[-2])
    loaded.detail.loc[older, "version"] = "another measurement"
    runs = group_runs(loaded)
    assert baseline_of(runs, runs.iloc[-1])["commit"].startswith(QUICK_RUNS[-3])


def test_compare_html_is_a_page_with_the_verdict_first_then_every_compared_row_in_tables_that_sort(capsys, tmp_path):
    from fusedbench.report.tables import SORTABLE, TABLE_SCRIPT

    tuned, results = tuned_results(tmp_path, "algorithm-7")
    asked = ["--baseline", f"{MACHINE}@7dd23c5", "--candidate", f"{tuned}@"]
    code, out, _ = run_cli(capsys, "compare", results, *asked, "--format", "html")
    _, said, _ = run_cli(capsys, "compare", results, *asked, "--format", "json")
    assert code == 0 and out.startswith("<!doctype html>") and "Plotly.newPlot" not in out  # no figures: no plotly.js
    verdict = json.loads(said)
    nav = out[out.index("<nav id='status'") : out.index("</nav>")]  # first, before the verdict's section
    strip = re.findall(r"data-suite='([^']+)' data-verdict='([^']+)' data-alerts='([0-9]+)'", nav)
    assert strip == [(suite["suite"], suite["outcome"], str(len(suite["alerts"]))) for suite in verdict["suites"]]
    assert ("quick", "red", "2") in strip  # the strip says what compare's json says, suite by suite
    rows = sum(len(group["rows"]) + len(group["gates"]) for suite in verdict["suites"] for group in suite["groups"])
    compared = out[out.index("<h2 id='rows'>") :]
    assert compared.count("<tr>") == rows  # every compared row, not only those that moved
    assert SORTABLE in out and TABLE_SCRIPT in out
    groups = [group for suite in verdict["suites"] for group in suite["groups"] if "rows" in group]
    for table, group in zip(compared.split("<table")[1:], groups, strict=True):  # the gates, then cells worst first
        shown = re.findall(r"<tr>\s*<td>([^<]*)</td>", table)
        assert shown == [row["verdict"] for row in group["gates"] + group["rows"]]
    assert "nan%" not in out


def test_compare_markdown_lists_what_moved_worst_first_and_the_gates(capsys, tmp_path):
    tuned, results = tuned_results(tmp_path, "algorithm-7")
    code, out, _ = run_cli(
        capsys, "compare", results, "--baseline", f"{MACHINE}@7dd23c5", "--candidate", f"{tuned}@", "--format", "md"
    )
    assert code == 0  # compare reports; only alert fails a build
    lines = out.splitlines()
    assert lines[0] == f"## {tuned}" and lines[4].startswith("### quick: red, ")
    assert (
        lines[2]
        == f"fusedbench compare: red by the gate's rules ({tuned}: 2 alert(s)); compare fails nothing, alert does"
    )
    assert f"Quick: {tuned}@67306e2d against {MACHINE}@7dd23c51" in lines
    assert "| slower | GELU_AUX_BIAS/fp16/(65536,16384)x(16384,8192)/fused | time | large | 1.184 |" in out
    assert "| slower | GELU_AUX_BIAS/fp16/(65536,16384)x(16384,8192)/fused | fusion-speedup | large | 0.85 |" in out
    assert "| same |" not in out  # the whole group's x1.029 is inside its 3.0% gate: not listed


def test_alert_refuses_to_judge_a_machine_whose_newest_results_cannot_be_read(capsys, tmp_path):
    results = copy_runs(tmp_path / "results", QUICK_RUNS)
    (newest,) = (results / MACHINE).glob(f"{QUICK_RUNS[-1]}-existing-*.json")
    newest.write_text("{bad")
    code, _, err = run_cli(capsys, "alert", results, "--machine", MACHINE)
    assert code == 2 and "error: alert judges only results it can read in full: " in err and str(newest) in err
    assert run_cli(capsys, "compare", results, "--machine", MACHINE, "--baseline", QUICK_RUNS[0])[0] == 0  # warns


def test_a_named_machine_is_judged_from_its_own_results_and_its_baselines_alone(capsys, tmp_path, monkeypatch):
    """A results branch gathers every runner's history: alert and compare read only the machines they judge, so
    another machine's folder neither slows them nor, unreadable, stops them; unnamed, the newest run's machine is
    found among all."""
    import fusedbench.results.loader as loader

    results = copy_runs(tmp_path / "results", QUICK_RUNS)
    other = results / "h900"
    other.mkdir()
    (other / "machine.json").write_text('{"machine": "h900", "version": 1}')
    for path in (ROOT / "results" / MACHINE).glob(f"{QUICK_RUNS[0]}-existing-*.json"):
        run = json.loads(path.read_text())
        run["params"]["machine"] = "h900"  # a readable run of another machine
        (other / path.name).write_text(json.dumps(run))
    (other / "0000000-existing-py.json").write_text("{bad")
    (other / "0000000-Quick-20261126T000000Z.fbenv").write_text("{bad")  # and an unreadable record
    read = []
    real = loader._read_run
    monkeypatch.setattr(loader, "_read_run", lambda path, *rest: read.append(path) or real(path, *rest))
    code, out, err = run_cli(capsys, "alert", results, "--machine", MACHINE, "--strict")
    assert code == 0 and out.startswith(f"fusedbench alert: green ({MACHINE}: no alert)"), out + err
    assert read and all(f"/{MACHINE}/" in path for path in read)
    code, _, err = run_cli(capsys, "alert", results)  # no machine named: every folder is read, the bad file warned
    assert code == 0 and "0000000-existing-py.json is not an asv results file" in err


def test_two_folders_each_hold_their_sides_machine(capsys, tmp_path):
    """The baseline's folder holds the GPU's run, the candidate's the tuned run: each is read for its own side."""
    tuned = f"{MACHINE}-tuned-fused-workspace-0"
    base = copy_runs(tmp_path / "base", QUICK_RUNS[-1:])
    cand = copy_runs(tmp_path / "cand", [TUNED], tuned)
    code, out, err = run_cli(capsys, "compare", base, cand, "--candidate", f"{tuned}@")
    assert code == 0 and f"Quick: {tuned}@{TUNED} ({cand}) against {MACHINE}@{QUICK_RUNS[-1]} ({base})" in out
    code, _, err = run_cli(capsys, "compare", cand, base, "--candidate", f"{tuned}@")
    assert code == 2 and f"machine {MACHINE!r} has no results in {cand}; machines with results: {tuned}" in err


def test_a_reader_that_goes_away_does_not_turn_a_red_alert_green(capsys, tmp_path, monkeypatch):
    import fusedbench.cli.gating as gating  # where the gate's verdict is written and its exit code decided

    tuned, results = tuned_results(tmp_path, "workspace-0")
    summary = tmp_path / "summary.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))

    def reader_gone(*args, **kwargs):
        raise BrokenPipeError

    monkeypatch.setattr(gating, "emit", reader_gone)
    monkeypatch.setattr(gating, "silence_stdout", lambda: None)
    code, _, _ = run_cli(capsys, "alert", results, "--baseline", f"{MACHINE}@7dd23c5", "--candidate", f"{tuned}@")
    assert code == 1 and summary.read_text().startswith("## fusedbench alert: RED")


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("{bad", "JSONDecodeError"),
        ("[]", "expected an object of presets, found a list"),
        ('{"p": {"name": "p"}}', "KeyError"),
    ],
)
def test_a_broken_presets_file_is_one_error_line_naming_the_file_and_the_fix(capsys, tmp_path, monkeypatch, text, says):
    import fusedbench.regressions.thresholds as thresholds

    path = tmp_path / "presets.json"
    path.write_text(text)
    monkeypatch.setattr(thresholds, "PRESETS_FILE", str(path))
    monkeypatch.setattr(thresholds, "_PRESETS", {})
    code, out, err = run_cli(capsys, "alert", "--dump-thresholds", "--machine", MACHINE)
    assert code == 2 and out == "" and err.count("\n") == 1
    assert f"threshold presets {path} cannot be read" in err and says in err and "fusedbench calibrate --write" in err


def test_a_preset_missing_a_class_or_with_a_threshold_not_above_zero_is_refused(tmp_path):
    from fusedbench.errors import FusedbenchError
    from fusedbench.regressions.thresholds import PRESETS_FILE, load_presets, save_preset

    committed = json.loads(Path(PRESETS_FILE).read_text())
    entry = committed[f"{MACHINE}/quick@17e9ce1"]
    for change, says in (
        (lambda t: t.pop("time/large"), "lacks time/large"),
        (lambda t: t.update({"time/large": -1}), "not above 0"),
    ):
        broken = json.loads(json.dumps(committed))
        change(broken[f"{MACHINE}/quick@17e9ce1"]["thresholds"])
        path = tmp_path / "presets.json"
        path.write_text(json.dumps(broken))
        with pytest.raises(FusedbenchError, match=says):
            load_presets(str(path))
    path.write_text(json.dumps(committed))
    preset = load_presets(str(path))[f"{MACHINE}/quick@17e9ce1"]
    assert save_preset(preset, str(path)).endswith(
        f"replaced: it came from {entry['pairs']} A/A pair(s), now {entry['pairs']}"
    )


def test_a_negative_row_count_is_a_usage_error(capsys):
    with pytest.raises(SystemExit) as exited:
        main(["compare", "--rows", "-1"])
    assert exited.value.code == 2 and "expected a whole number of rows, 0 or more, got '-1'" in capsys.readouterr().err


def test_the_first_run_of_a_new_benchmark_version_is_not_judged_and_fails_nothing(capsys, tmp_path, monkeypatch):
    """The committed 77f3acc run changed every cell group's version: no group has a baseline, so the gate says
    'not judged' with the reason, in the output and the step summary, and exits 0; naming a baseline that shares
    nothing is an error."""
    results = copy_runs(tmp_path / "results", ("95e3ed8f", "77f3acc4"))
    summary = tmp_path / "summary.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    code, out, _ = run_cli(capsys, "alert", results, "--machine", MACHINE)
    lines = out.splitlines()
    assert code == 0 and lines[0].startswith(f"fusedbench alert: not judged ({MACHINE}")
    assert lines[1].startswith("quick: not judged; 0 of 30 cells compared, fewer than half: no earlier run at the same")
    assert lines[2].startswith("default: not judged; 0 of 2884 cells compared")
    assert summary.read_text().startswith("## fusedbench alert: not judged")
    code, out, _ = run_cli(capsys, "alert", results, "--machine", MACHINE, "--format", "json")
    found = json.loads(out)
    assert (
        code == 0
        and found["outcome"] == "not judged"
        and [s["suite"] for s in found["suites"]]
        == [
            "quick",
            "default",
        ]
    )
    assert all(g["baseline"] is None for s in found["suites"] for g in s["groups"])
    assert all(
        g["candidate"] is None or g["candidate"]["commit"].startswith("77f3acc4") for g in found["suites"][1]["groups"]
    )
    code, _, err = run_cli(capsys, "alert", results, "--machine", MACHINE, "--baseline", "95e3ed8")
    assert code == 2 and "shares no group at one benchmark version" in err  # asked for: an error, as before


def test_a_tuned_run_is_judged_against_its_gpus_run_of_the_same_commit(capsys, tmp_path):
    """A run degraded on purpose has no history of its own machine: its baseline is the same code untuned."""
    tuned = "h100-80gb-hbm3-tuned-fused-algorithm-7"
    results = copy_runs(tmp_path / "results", ("95e3ed8f", "67306e2d"))
    for path in (ROOT / "results" / tuned).iterdir():
        (results / tuned).mkdir(exist_ok=True)
        shutil.copy(path, results / tuned)
    code, out, _ = run_cli(capsys, "alert", results, "--machine", tuned, "--format", "json")
    (suite,) = json.loads(out)["suites"]
    (group,) = suite["groups"]
    assert group["baseline"] == {"machine": MACHINE, "commit": group["candidate"]["commit"], "results": None}
    # against the same code untuned, the forced algorithm's cell is 16.8% slower and x0.839 unfused: both beyond
    # the large class's thresholds (15% and 17%), both on the one cell the tuning touched
    assert code == 1 and suite["outcome"] == "red"
    assert {(a["kind"], a["epilog"], a["provider"]) for a in suite["alerts"]} == {
        ("regression", "GELU_AUX_BIAS", "fused"),
        ("fusion-inversion", "GELU_AUX_BIAS", "fused"),
    }


def test_history_reads_one_group_per_commit_at_the_newest_runs_benchmark_version(capsys, tmp_path):
    """77f3acc timed the seed textbook in Fp16Seed and in Quick (and the Blog control): the history shows the
    default group's cell, and leaves out d1e4d02's run of the textbook's earlier measurement (revision 1)."""
    results = copy_runs(tmp_path / "results", ("d1e4d02b", "77f3acc4"))
    code, out, _ = run_cli(
        capsys, "history", results, "--machine", MACHINE, "--cell", "RELU_BIAS/fp16/(65536,16384)x(16384,8192)/textbook"
    )
    assert code == 0
    lines = out.splitlines()
    assert lines[0] == "77f3acc4     41.261 ms"  # Fp16Seed's cell (Quick's took 40.194 ms, the Blog group's 36.056)
    assert lines[1] == "(1 earlier run(s) at other benchmark versions left out: another measurement)"


def test_a_preset_judges_only_the_benchmark_version_it_was_earned_at(capsys, quick):
    """The back-to-back quick runs, named the burst quick preset: compared, and not judged by another
    measurement's noise; left to choose, alert takes the preset earned at their version."""
    code, out, _ = run_cli(capsys, "alert", quick, "--preset", f"{MACHINE}/quick@17e9ce1", "--format", "json")
    (suite,) = json.loads(out)["suites"]
    assert code == 0 and suite["outcome"] == "not judged"
    (group,) = suite["groups"]
    assert group["not_judged"] == (
        f"no calibration: preset '{MACHINE}/quick@17e9ce1' was earned on A/A runs of another benchmark version of it"
    )
    code, out, _ = run_cli(capsys, "alert", quick, "--format", "json")
    assert code == 0 and json.loads(out)["suites"][0]["preset"] == f"{MACHINE}/quick@6c07033"


def test_calibrate_refuses_one_suites_runs_at_two_benchmark_versions(capsys):
    code, out, err = run_cli(
        capsys, "calibrate", "--machine", MACHINE, "--runs", "67306e2,2e91ff2", "--runs", "17e9ce1,b42dd54"
    )
    assert code == 2 and out == "" and err.count("\n") == 1
    assert "the quick suite's A/A runs time Quick at two benchmark versions" in err


def test_a_suite_is_judged_by_a_preset_earned_at_its_versions_the_gpus_own_first(monkeypatch):
    import fusedbench.regressions.thresholds as thresholds
    from fusedbench.regressions.thresholds import Preset, preset_for

    def made(gpu: str, suite: str, version: str) -> Preset:
        return Preset(f"{gpu}/{suite}@{version}", {}, gpu, pairs=1, suite=suite, versions={"Quick": version})

    found = [made("h200-141gb", "quick", "v2"), made(MACHINE, "quick", "v1"), made(MACHINE, "default", "v1")]
    monkeypatch.setattr(thresholds, "_PRESETS", {p.name: p for p in found})
    assert preset_for("h200-141gb", "quick", versions={"Quick": "v2"})[0].name == "h200-141gb/quick@v2"
    chosen, why = preset_for("h200-141gb", "quick", versions={"Quick": "v1"})  # its own was earned at another
    assert chosen.name == f"{MACHINE}/quick@v1" and "h200-141gb has no A/A runs of the quick suite at these" in why
    chosen, why = preset_for("h200-141gb", "quick", versions={"Quick": "v3"})  # none: compared, judged nowhere
    assert chosen.name == "h200-141gb/quick@v2" and "no A/A runs of the quick suite at these benchmark versions" in why
    chosen, why = preset_for(MACHINE, "peers", versions={"Fp16SeedPeers": "p1"})
    assert chosen.name == f"{MACHINE}/default@v1" and not chosen.earned_at("Fp16SeedPeers", "p1")


def test_dump_thresholds_gives_the_preset_earned_at_the_machines_newest_versions(capsys):
    """The tuned run's quick group is at the back-to-back version: the preset in force is that version's, not the
    burst one the GPU's own newest quick runs get."""
    tuned = f"{MACHINE}-tuned-fused-algorithm-7"
    for machine, name in ((tuned, "quick@6c07033"), (MACHINE, "quick@17e9ce1")):
        code, out, _ = run_cli(
            capsys, "alert", ROOT / "results", "--dump-thresholds", "--machine", machine, "--suite", "quick"
        )
        assert code == 0 and json.loads(out)["quick"]["name"] == f"{MACHINE}/{name}"
