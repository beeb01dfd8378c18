"""`fusedbench compare` and `fusedbench alert` on committed runs: choices of runs, outputs, exit codes, bad input."""

from __future__ import annotations

import json
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


@pytest.fixture(autouse=True)
def in_the_checkout(monkeypatch):
    monkeypatch.chdir(ROOT)  # the default baseline is found in this checkout's git history


def run_cli(capsys, *argv):
    code = main([str(a) for a in argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_alert_takes_the_newest_run_against_the_nearest_earlier_commit_and_is_silent_on_a_a(capsys, quick):
    code, out, err = run_cli(capsys, "alert", quick, "--machine", MACHINE)
    assert code == 0, out + err
    assert out.splitlines()[0].startswith(f"{MACHINE}@7dd23c51 against {MACHINE}@dcb8dbf7")
    assert out.rstrip().endswith("no alert: nothing failed")


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
    document = json.loads(out)
    assert document["baseline"]["commit"].startswith("6c07033")
    assert document["candidate"]["commit"].startswith("7dd23c5")
    metrics = [c["metric"] for c in document["cells"]]
    assert (metrics.count("time"), metrics.count("epilog-cost"), metrics.count("fusion-speedup")) == (28, 23, 5)
    assert all(c["ci_low"] <= c["ratio"] <= c["ci_high"] for c in document["cells"])
    assert document["alerts"] == [] and {"time", "epilog-cost"} <= set(metrics)


def test_two_results_folders_compare_their_newest_runs(capsys, tmp_path):
    before = copy_runs(tmp_path / "before", QUICK_RUNS[:1])
    after = copy_runs(tmp_path / "after", QUICK_RUNS[1:])
    code, out, _ = run_cli(capsys, "compare", before, after, "--machine", MACHINE, "--format", "json")
    assert code == 0
    document = json.loads(out)
    assert document["baseline"]["results"] == str(before) and document["candidate"]["results"] == str(after)
    assert document["baseline"]["commit"].startswith("6c07033") and document["candidate"]["commit"].startswith(
        "7dd23c5"
    )


def test_dump_thresholds_prints_the_preset_in_force_and_why(capsys, quick):
    code, out, _ = run_cli(capsys, "alert", quick, "--dump-thresholds")
    assert code == 0
    preset = json.loads(out)
    assert {"name", "thresholds", "calibrated_on", "runs", "noise", "rates", "in_force_because"} <= preset.keys()
    classes = ("large", "medium", "small", "group", "provider")
    assert set(preset["thresholds"]) == {f"{m}/{k}" for m in ("time", "epilog-cost", "fusion-speedup") for k in classes}
    assert preset["name"] == MACHINE and "calibrated on this GPU's own A/A runs" in preset["in_force_because"]


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["--machine", "h900"], f"machine 'h900' has no results; machines with results: {MACHINE}"),
        (["--machine", MACHINE, "--baseline", "deadbee"], f"commit 'deadbee' matches no runs of {MACHINE}; runs: "),
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


def test_without_git_history_the_default_baseline_asks_for_one(capsys, quick, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # not a checkout: git cannot order the commits
    code, _, err = run_cli(capsys, "alert", quick, "--machine", MACHINE)
    assert code == 2 and "pass --baseline COMMIT" in err
    assert run_cli(capsys, "alert", quick, "--machine", MACHINE, "--baseline", "dcb8dbf")[0] == 0


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
        # the forced 8th algorithm: GELU_AUX_BIAS's fused cell 18% slower (its fusion speedup x0.85 stays
        # inside that class's 19.5%)
        ("algorithm-7", {("regression", "GELU_AUX_BIAS", "time")}),
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
    alerts = json.loads(out)["alerts"]
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
    from fusedbench.regressions.alerts import default_baseline
    from fusedbench.regressions.compare import select_run
    from fusedbench.results.loader import load_results

    loaded = load_results(str(quick))
    candidate = select_run(loaded, MACHINE, QUICK_RUNS[-1])
    assert default_baseline(loaded, candidate, str(ROOT)).startswith(QUICK_RUNS[-2])
    older = loaded.cells["commit"].str.startswith(QUICK_RUNS[-2])
    loaded.detail.loc[older, "version"] = "another measurement"
    assert default_baseline(loaded, candidate, str(ROOT)).startswith(QUICK_RUNS[-3])


def test_compare_markdown_lists_what_moved_worst_first_and_the_gates(capsys, tmp_path):
    tuned, results = tuned_results(tmp_path, "algorithm-7")
    code, out, _ = run_cli(
        capsys, "compare", results, "--baseline", f"{MACHINE}@7dd23c5", "--candidate", f"{tuned}@", "--format", "md"
    )
    assert code == 0  # compare reports; only alert fails a build
    lines = out.splitlines()
    assert lines[0] == f"## {tuned}@67306e2d against {MACHINE}@7dd23c51"
    assert "| slower | GELU_AUX_BIAS/fp16/(65536,16384)x(16384,8192)/fused | time | large | 1.184 |" in out
    assert "| slower | Quick | * | time | 1.029 |" in out and "| same |" not in out


def test_alert_refuses_to_judge_a_machine_whose_newest_results_cannot_be_read(capsys, tmp_path):
    results = copy_runs(tmp_path / "results", QUICK_RUNS)
    (newest,) = (results / MACHINE).glob(f"{QUICK_RUNS[-1]}-existing-*.json")
    newest.write_text("{bad")
    code, _, err = run_cli(capsys, "alert", results, "--machine", MACHINE)
    assert code == 2 and "error: alert judges only results it can read in full: " in err and str(newest) in err
    assert run_cli(capsys, "compare", results, "--machine", MACHINE, "--baseline", QUICK_RUNS[0])[0] == 0  # warns


def test_a_reader_that_goes_away_does_not_turn_a_red_alert_green(capsys, tmp_path, monkeypatch):
    import fusedbench.cli as cli

    tuned, results = tuned_results(tmp_path, "workspace-0")
    summary = tmp_path / "summary.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))

    def reader_gone(*args, **kwargs):
        raise BrokenPipeError

    monkeypatch.setattr(cli, "_print_comparison", reader_gone)
    monkeypatch.setattr(cli, "_silence_stdout", lambda: None)
    code, _, _ = run_cli(capsys, "alert", results, "--baseline", f"{MACHINE}@7dd23c5", "--candidate", f"{tuned}@")
    assert code == 1 and summary.read_text().startswith("## fusedbench alert: RED")


def test_without_git_the_default_baseline_asks_for_one(monkeypatch):
    import subprocess

    from fusedbench.regressions.alerts import git_ancestors

    def no_git(*args, **kwargs):
        raise FileNotFoundError("git")

    monkeypatch.setattr(subprocess, "run", no_git)
    assert git_ancestors("HEAD", str(ROOT)) is None


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
    entry = committed[MACHINE]
    for change, says in (
        (lambda t: t.pop("time/large"), "lacks time/large"),
        (lambda t: t.update({"time/large": -1}), "not above 0"),
    ):
        broken = json.loads(json.dumps(committed))
        change(broken[MACHINE]["thresholds"])
        path = tmp_path / "presets.json"
        path.write_text(json.dumps(broken))
        with pytest.raises(FusedbenchError, match=says):
            load_presets(str(path))
    path.write_text(json.dumps(committed))
    preset = load_presets(str(path))[MACHINE]
    assert save_preset(preset, str(path)).endswith(
        f"replaced: it came from {entry['pairs']} A/A pair(s), now {entry['pairs']}"
    )


def test_a_negative_row_count_is_a_usage_error(capsys):
    with pytest.raises(SystemExit) as exited:
        main(["compare", "--rows", "-1"])
    assert exited.value.code == 2 and "expected a whole number of rows, 0 or more, got '-1'" in capsys.readouterr().err


def test_the_first_run_of_a_new_benchmark_version_is_green_with_nothing_to_compare(capsys, tmp_path, monkeypatch):
    """The committed 77f3acc run changed every cell group's version: the gate has no baseline, says so in one
    warning line and the step summary, and passes; naming a baseline keeps it an error."""
    results = copy_runs(tmp_path / "results", ("95e3ed8f", "77f3acc4"))
    summary = tmp_path / "summary.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    code, out, err = run_cli(capsys, "alert", results, "--machine", MACHINE)
    assert (
        code == 0
        and out == "no alert: nothing to compare (the first run of these benchmark versions on this machine)\n"
    )
    assert err.startswith(f"warning: no earlier commit has results on {MACHINE} for the groups 77f3acc4 ran")
    assert summary.read_text().startswith("## fusedbench alert: green (nothing to compare)")
    code, out, _ = run_cli(capsys, "alert", results, "--machine", MACHINE, "--format", "json")
    found = json.loads(out)
    assert code == 0 and found["baseline"] is None and found["candidate"]["commit"].startswith("77f3acc4")
    assert {"cells", "groups", "alerts", "warnings", "preset"} <= found.keys() and found["alerts"] == []
    alone = copy_runs(tmp_path / "alone", ("77f3acc4",))  # no history at all: lost, or never made
    code, _, err = run_cli(capsys, "alert", alone, "--machine", MACHINE)
    assert code == 2 and "nor at any version; pass --baseline COMMIT, or fetch the machine's results" in err
    code, _, err = run_cli(capsys, "alert", results, "--machine", MACHINE, "--baseline", "95e3ed8")
    assert code == 2 and "share no group at one benchmark version" in err  # asked for: an error, as before
    code, _, err = run_cli(capsys, "compare", results, "--machine", MACHINE)
    assert code == 2 and "no earlier commit has results" in err


def test_a_tuned_run_without_a_named_baseline_is_an_error_never_a_pass(capsys, tmp_path):
    """A run degraded on purpose has no history of its own machine: the gate asks for its GPU's baseline."""
    tuned = "h100-80gb-hbm3-tuned-fused-algorithm-7"
    results = copy_runs(tmp_path / "results", ("95e3ed8f", "67306e2d"))
    for path in (ROOT / "results" / tuned).iterdir():
        (results / tuned).mkdir(exist_ok=True)
        shutil.copy(path, results / tuned)
    code, out, err = run_cli(capsys, "alert", results, "--machine", tuned)
    assert code == 2 and out == ""
    assert err.rstrip().endswith(f"pass --baseline {MACHINE}@COMMIT (a tuned run is judged against its GPU's runs)")


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
