"""Bad input and broken data: one line naming the value and the fix (exit 2), or a warning naming the file and what
was lost; never a traceback, never an exit code that reads as a verdict, never an output replaced by a worse one."""

from __future__ import annotations

import glob
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from fusedbench.cli import main
from tests.test_alert_cli import MACHINE, QUICK_RUNS, copy_runs

ROOT = Path(__file__).parent.parent


@pytest.fixture
def quick(tmp_path) -> Path:
    return copy_runs(tmp_path / "results", QUICK_RUNS[-2:])


def run_cli(capsys, *argv):
    code = main([str(a) for a in argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def newest_file(results: Path) -> Path:
    return Path(glob.glob(str(results / MACHINE / f"{QUICK_RUNS[-1]}-*.json"))[0])


def edit(path: Path, change) -> None:
    document = json.loads(path.read_text())
    change(document)
    path.write_text(json.dumps(document))


def _alert_process(quick, **options) -> subprocess.CompletedProcess:
    """`fusedbench alert` on the quick results in its own process, its standard output as `options` say."""
    command = [sys.executable, "-m", "fusedbench", "alert", str(quick), "--machine", MACHINE]
    return subprocess.run(command, stderr=subprocess.PIPE, text=True, cwd=ROOT, **options)


def test_a_green_verdict_that_cannot_be_written_is_exit_2_not_a_regression(quick):
    with open(os.devnull if sys.platform != "linux" else "/dev/full", "w") as full:
        result = _alert_process(quick, stdout=full)
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert result.stderr.strip() == "error: could not write to standard output (No space left on device)"


def test_a_step_summary_that_cannot_be_written_comes_after_the_verdict_and_is_exit_2(capsys, quick, monkeypatch):
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(quick / "no-such-folder" / "summary.md"))
    code, out, err = run_cli(capsys, "alert", quick, "--machine", MACHINE)
    assert code == 2 and out.startswith(f"fusedbench alert: green ({MACHINE}: no alert)")
    assert err.startswith("error: cannot append the verdict to GITHUB_STEP_SUMMARY") and "printed above" in err


def test_samples_one_short_of_the_times_are_a_warning_naming_the_file_and_the_gate_refuses(capsys, quick):
    path = newest_file(quick)

    def drop_one(document):
        row = document["results"]["cells.Quick.time_cell"]
        samples = document["result_columns"].index("samples")
        row[samples] = row[samples][:-1]

    edit(path, drop_one)
    code, out, err = run_cli(capsys, "table", quick)
    assert code == 0 and f"warning: {path} holds asv results fusedbench cannot read" in err
    assert "has no samples for 1 of its 28 timed parameter sets); its cells were not read" in err
    code, out, err = run_cli(capsys, "alert", quick, "--machine", MACHINE)
    assert code == 2 and out == "" and "error: alert judges only results it can read in full" in err


def test_a_benchmark_the_checkout_does_not_know_is_a_warning_and_the_gate_refuses(capsys, quick):
    path = newest_file(quick)
    edit(
        path, lambda d: d["results"].update({"cells.QuickRenamed.time_cell": d["results"].pop("cells.Quick.time_cell")})
    )
    code, out, err = run_cli(capsys, "table", quick)
    assert code == 0 and f"{path}: benchmark(s) cells.QuickRenamed.time_cell are not in this checkout's suite" in err
    assert len(out.splitlines()) == 1 + 30  # the other run's rows, each said
    assert run_cli(capsys, "alert", quick, "--machine", MACHINE)[0] == 2  # never "no alert" on what it could not read


def test_two_asv_environments_for_one_commit_are_refused_in_one_line(capsys, quick):
    path = newest_file(quick)
    shutil.copy(path, path.with_name(path.name.replace("existing-py", "existing-other")))
    for command in ("table", "report", "advise", "compare"):
        code, out, err = run_cli(capsys, command, quick, *(["-o", quick.parent / "r"] if command == "report" else []))
        assert code == 2 and out == "" and err.count("error: ") == 1
        assert "hold two asv environments for commit 7dd23c51 on h100-80gb-hbm3" in err


def test_an_unreadable_machine_folder_is_a_warning_naming_it(capsys, quick, monkeypatch):
    listdir = os.listdir

    def refuse(path):
        if str(path).endswith(MACHINE):
            raise PermissionError(13, "Permission denied")
        return listdir(path)

    monkeypatch.setattr(os, "listdir", refuse)
    code, _, err = run_cli(capsys, "table", quick)
    assert code == 0 and f"warning: {quick / MACHINE} cannot be read (Permission denied)" in err
    assert run_cli(capsys, "alert", quick, "--machine", MACHINE)[0] == 2


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["advise", "{empty}"], "no ladder results timed in paired rounds to advise from"),
        (["table", "{quick}", "--commit", "7dd23c5,nosuch"], "--commit nosuch matches no results here; commits: "),
        (["report", "{quick}", "-o", "/proc/x"], "'/proc' takes no new files"),
        (
            ["mlp", "--device", "cpu", "--hidden", "100000000"],
            "--hidden 100000000: the network's float64 weights alone",
        ),
        # a protocol screen: refused before any GPU is touched
        (["protocols", "--repeats", "1"], "--repeats 1: a spread needs at least 2 runs"),
        (["protocols", "--group", "Fp16Sed"], "no group 'Fp16Sed'; pick from Quick"),
        (["protocols", "--protocol", "idle"], "no protocol 'idle'; pick from back-to-back, burst"),
        (["protocols", "--workloads", "-1"], "--workloads -1: pass how many workloads"),
        (["protocols", "--json", "/proc/screen.json"], "--json '/proc/screen.json': cannot write"),
    ],
)
def test_bad_input_is_one_line_naming_the_value(capsys, quick, tmp_path, argv, says):
    (tmp_path / "empty").mkdir()
    filled = [a.format(quick=quick, empty=tmp_path / "empty") for a in argv]
    code, out, err = run_cli(capsys, *filled)
    lines = [line for line in err.splitlines() if not line.startswith("warning: ")]
    assert code == 2 and out == "" and len(lines) == 1 and lines[0].startswith("error: ") and says in lines[0]


@pytest.mark.parametrize("argv", [["list", "--asv-bench", ""], ["report", "-o", ""], ["table", ""]])
def test_an_empty_name_is_a_usage_error(capsys, argv):
    with pytest.raises(SystemExit) as exited:
        main(argv)
    assert exited.value.code == 2 and "expected a name, got ''" in capsys.readouterr().err


def test_a_report_is_replaced_only_by_a_report_of_something(capsys, quick, tmp_path):
    good = tmp_path / "reports"
    good.mkdir()
    (good / "index.html").write_text("the report before")
    (tmp_path / "empty").mkdir()
    code, _, err = run_cli(capsys, "report", tmp_path / "empty", "-o", good)
    assert code == 2 and "the results hold no fusedbench runs, so the report already in" in err
    (tmp_path / "blocked" / "index.html").mkdir(parents=True)  # a folder where the page goes
    code, _, err = run_cli(capsys, "report", quick, "-o", tmp_path / "blocked")
    assert code == 2 and "index.html is a folder, where the report goes" in err
    assert (good / "index.html").read_text() == "the report before"


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["--baseline", "nosuchmachine@"], "machine 'nosuchmachine' has no results"),
        (["--machine", MACHINE, "--candidate", "h200-141gb@e022eab"], "name two machines; give one"),
        (["{quick}", "--machine", MACHINE], "is named twice"),
    ],
)
def test_a_baseline_or_candidate_that_names_nothing_real_is_an_error_never_a_pass(capsys, quick, argv, says):
    filled = [a.format(quick=quick) for a in argv]
    code, out, err = run_cli(capsys, "alert", quick, *filled)
    assert code == 2 and out == "" and says in err and err.count("error: ") == 1


def test_a_baseline_folder_without_the_machine_is_an_error(capsys, quick, tmp_path):
    other = copy_runs(tmp_path / "other", ["e022eaba"], "h200-141gb")
    code, _, err = run_cli(capsys, "alert", other, quick, "--suite", "quick")
    assert code == 2 and f"machine '{MACHINE}' has no results in {other}" in err


def test_a_run_is_never_its_own_baseline_and_a_suite_named_twice_is_judged_once(capsys, quick):
    code, out, err = run_cli(capsys, "alert", quick, "--machine", MACHINE, "--baseline", QUICK_RUNS[-1])
    assert code == 2 and out == "" and "the baseline 7dd23c51 is the candidate itself (the newest run of Quick)" in err
    code, out, _ = run_cli(capsys, "alert", quick, "--machine", MACHINE, "--suite", "quick", "--suite", "quick")
    assert code == 0 and out.count("quick: green") == 1


def test_alert_with_standard_output_closed_is_exit_2_not_a_traceback(quick):
    closed = _alert_process(quick, stdout=None, preexec_fn=lambda: os.close(1))
    assert closed.returncode == 2 and "error: standard output is closed" in closed.stderr
    assert "Traceback" not in closed.stderr


def test_the_verdict_comes_before_its_warnings(tmp_path):
    """The default suite's burst A/A pair: green, with the fusion inversions both runs share as warnings."""
    results = copy_runs(tmp_path / "results", ["6fd4f0d4", "8fda10a1"])
    both = subprocess.run(
        [sys.executable, "-m", "fusedbench", "alert", str(results), "--machine", MACHINE, "--suite", "default"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        cwd=ROOT,
    ).stdout
    assert both.startswith(f"fusedbench alert: green ({MACHINE}: no alert)") and "\nwarning: 3 known fusion" in both
