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
from tests.conftest import blocked_after
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
    assert code == 0 and f"warning: {path} is not an asv results file fusedbench can read" in err
    assert "(results['cells.Quick.time_cell']: samples has 29 entries for 30 results); its cells were not read" in err
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


# ---- the contract at the top: one line, exit 2, never a traceback (issue: bad input, fuzzed) ------------------------


def test_an_unexpected_error_is_one_line_naming_the_command_and_exit_2_and_debug_shows_the_traceback(
    capsys, monkeypatch
):
    import fusedbench.cli.table as table

    def broken(**_):
        raise RuntimeError("boom\nsecond line")

    monkeypatch.setattr(table, "command_table", broken)
    code, out, err = run_cli(capsys, "table")
    assert (code, out) == (2, "") and "Traceback" not in err and len(err.splitlines()) == 1
    assert err.startswith("error: fusedbench table failed unexpectedly (RuntimeError: boom second line)")
    assert "--debug (or FUSEDBENCH_DEBUG=1)" in err
    code, _, err = run_cli(capsys, "--debug", "table")
    assert code == 2 and "Traceback (most recent call last)" in err and err.endswith("and report it\n")
    monkeypatch.setenv("FUSEDBENCH_DEBUG", "1")
    assert "Traceback" in run_cli(capsys, "table")[2]
    monkeypatch.setenv("FUSEDBENCH_DEBUG", "0")
    assert "Traceback" not in run_cli(capsys, "table")[2]


def test_a_numpy_or_pandas_warning_in_a_command_is_an_error_line_never_a_raw_warning(capsys, monkeypatch):
    """Under Python's default filters (pytest's make every warning an error): main's own policy decides."""
    import warnings

    import numpy as np

    import fusedbench.cli.table as table

    def run(handler):
        monkeypatch.setattr(table, "command_table", handler)
        with warnings.catch_warnings():
            warnings.simplefilter("default")
            return run_cli(capsys, "table")

    code, _, err = run(lambda **_: int(np.float64(1.0) / np.float64(0.0)))
    assert code == 2 and err.startswith("error: fusedbench table failed unexpectedly (RuntimeWarning: divide by zero")
    code, _, err = run(lambda **_: _warn_pandas())
    assert code == 2 and err.startswith("error: fusedbench table failed unexpectedly (PerformanceWarning: fragmented")
    code, _, err = run(lambda **_: _warn_other())  # another library's warning: one line, and the command goes on
    assert (code, err) == (0, "warning: UserWarning: a library's word on two lines\n")


def _warn_pandas() -> int:
    import warnings

    import pandas as pd

    warnings.warn("fragmented", pd.errors.PerformanceWarning, stacklevel=1)
    return 0


def _warn_other() -> int:
    import warnings

    warnings.warn("a library's word\non two lines", UserWarning, stacklevel=1)
    return 0


def test_an_unknown_option_before_the_command_is_named_not_read_as_a_missing_command(capsys):
    with pytest.raises(SystemExit) as exited:
        main(["--bogus"])
    err = capsys.readouterr().err
    assert exited.value.code == 2 and err.startswith("error: unknown option '--bogus' before the command")


@pytest.mark.parametrize(
    ("change", "says"),
    [
        (lambda d: d.update(results=None), "results: Input should be an object (got None)"),
        (lambda d: d.update(date=10**20), "date: Input should be less than or equal to 4102444800000"),
        (lambda d: _row(d).__setitem__(3, 10**20), "started_at: Input should be less than or equal to"),
        (lambda d: _row(d)[0].pop(), "result has 29 values for 30 parameter sets"),
        (lambda d: _row(d)[1][2].__setitem__(0, "'fusedx'"), "params: unknown provider 'fusedx'"),
        (lambda d: _row(d)[1][0].__setitem__(0, "'RELU_BIASX'"), "params: unknown epilog 'RELU_BIASX'"),
        (lambda d: _row(d)[1][2].__setitem__(1, "'fused"), 'params: the provider "\'fused" is not a Python literal'),
        (lambda d: _row(d)[0].__setitem__(0, -0.026), "holds the time -0.026 s: a timed call takes 1e-09 s to 86400"),
        (lambda d: _row(d)[0].__setitem__(0, 0), "holds the time 0.0 s"),
        (
            lambda d: _column(d, "samples")[0].__setitem__(0, float("inf")),
            "samples[0][0]: Input should be a finite number",
        ),
        (
            lambda d: _column(d, "samples")[0].__setitem__(0, float("nan")),
            "samples[0][0]: Input should be a finite number",
        ),
        (lambda d: _row(d)[0].__setitem__(0, 0.5), "result[0] = 0.5 lies outside its 99% interval"),
        (lambda d: _column(d, "samples")[0].append(0.0262), "samples[0] holds 11 samples where stats_repeat says 10"),
        (lambda d: _row(d).__setitem__(2, None), "version: Input should be a valid string (got None)"),
        (lambda d: _row(d)[0].__setitem__(0, "0.026"), "result[0]: Input should be a valid number (got '0.026')"),
        (lambda d: _row(d)[0].__setitem__(0, True), "result[0]: Input should be a valid number (got True)"),
    ],
)
def test_a_damaged_results_file_is_a_warning_naming_it_and_its_field_and_the_gate_refuses(capsys, quick, change, says):
    path = newest_file(quick)
    edit(path, change)
    code, out, err = run_cli(capsys, "table", quick, "--format", "json")
    assert code == 0 and f"warning: {path} is not an asv results file fusedbench can read (" in err
    assert says in err and "; its cells were not read; fix or remove it" in err
    assert {row["commit"][:8] for row in json.loads(out)} == {QUICK_RUNS[-2]}  # the other run, every cell of it
    code, out, err = run_cli(capsys, "alert", quick, "--machine", MACHINE)
    assert code == 2 and "error: alert judges only results it can read in full" in err


def _row(document) -> list:
    return document["results"]["cells.Quick.time_cell"]


def _column(document, name: str):
    return _row(document)[document["result_columns"].index(name)]


@pytest.mark.parametrize("kind", ["fifo", "devzero", "loop", "dangling", "folder"])
def test_a_special_file_among_the_results_is_named_and_skipped_never_opened(capsys, quick, kind):
    for name in ("zz-existing.json", "notes.txt"):  # one the loader lists, one only the cache's fingerprint sees
        path = quick / MACHINE / name
        {
            "fifo": lambda p: os.mkfifo(p),
            "devzero": lambda p: p.symlink_to("/dev/zero"),
            "loop": lambda p: p.symlink_to(p),
            "dangling": lambda p: p.symlink_to(p.with_name("gone.json")),
            "folder": lambda p: p.mkdir(),
        }[kind](path)
    with blocked_after(30):
        code, out, err = run_cli(capsys, "table", quick)
    what = {
        "fifo": "is a FIFO, not a regular file",
        "devzero": "is a character device, not a regular file",
        "loop": "is a link that loops back on itself",
        "dangling": "is a link to",
        "folder": "is a folder, not a regular file",
    }[kind]
    warned = f"warning: {quick / MACHINE / 'zz-existing.json'} {what}"
    assert code == 0 and warned in err and f": it was not read; move it out of {quick / MACHINE}" in err
    assert "notes.txt" not in err and len(out.splitlines()) == 1 + 2 * 30  # both runs' cells, each said
    assert run_cli(capsys, "alert", quick, "--machine", MACHINE)[0] == 2


def test_a_results_file_over_64_mib_is_refused_by_its_size_unread(capsys, quick):
    path = quick / MACHINE / "zz-existing.json"
    with open(path, "wb") as stream:
        stream.truncate(65 * 2**20)  # sparse: its size, not its bytes
    code, _, err = run_cli(capsys, "table", quick)
    assert code == 0 and f"warning: {path} is 65 MiB, over the 64 MiB a file may be: it was not read" in err


def test_an_unreadable_results_folder_is_one_error_line(capsys, quick, monkeypatch):
    listdir = os.listdir

    def refuse(path):
        if str(path) == str(quick):
            raise PermissionError(13, "Permission denied")
        return listdir(path)

    monkeypatch.setattr(os, "listdir", refuse)
    code, out, err = run_cli(capsys, "table", quick)
    assert (code, out) == (
        2,
        "",
    ) and err == f"error: the results folder {quick} cannot be read (Permission denied); fix its permissions\n"


def test_an_output_named_by_a_link_loop_or_a_dangling_link_is_refused_before_any_work(capsys, quick, tmp_path):
    loop, dangling = tmp_path / "loop", tmp_path / "dangling"
    loop.symlink_to(loop)
    dangling.symlink_to(tmp_path / "nowhere" / "deeper")
    for out_dir, says in ((loop, "is a link that loops back on itself"), (dangling, "which does not exist")):
        code, out, err = run_cli(capsys, "report", quick, "-o", out_dir)
        assert (code, out) == (2, "") and err.startswith(f"error: -o '{out_dir}' ") and says in err


def test_calibrate_write_where_the_presets_cannot_be_written_is_refused_before_the_table(capsys, quick, monkeypatch):
    import fusedbench.regressions.thresholds as thresholds

    monkeypatch.setattr(thresholds, "PRESETS_FILE", "/proc/presets.json")
    argv = ("calibrate", quick, "--machine", MACHINE, "--runs", ",".join(QUICK_RUNS[-2:]), "--write")
    code, out, err = run_cli(capsys, *argv)
    assert (code, out) == (2, "") and err.startswith("error: --write '/proc/presets.json': cannot write in '/proc'")
    assert "calibrate from a checkout you can write (pip install -e .), or leave out --write" in err


def _mlp_process(**options) -> subprocess.CompletedProcess:
    command = [sys.executable, "-m", "fusedbench", "mlp", "--device", "cpu", "--epochs", "1", "--hidden", "8"]
    return subprocess.run(command, stderr=subprocess.PIPE, text=True, cwd=ROOT, **options)


def test_mlp_text_that_cannot_be_written_is_exit_2_never_a_silent_0():
    with open("/dev/full", "w") as full:
        result = _mlp_process(stdout=full)
    assert (
        result.returncode == 2
        and result.stderr.strip() == "error: could not write to standard output (No space left on device)"
    )
    closed = _mlp_process(stdout=None, preexec_fn=lambda: os.close(1))
    assert closed.returncode == 2 and "error: standard output is closed" in closed.stderr


@pytest.mark.parametrize(("folder", "machine"), [("{tmp}/missing", None), ("{quick}", "nosuch")])
def test_dump_thresholds_without_the_machines_runs_is_an_error_not_another_gpus_presets(
    capsys, quick, tmp_path, folder, machine
):
    argv = ["alert", folder.format(tmp=tmp_path, quick=quick), "--dump-thresholds"]
    code, out, err = run_cli(capsys, *argv, *(["--machine", machine] if machine else []))
    assert (code, out) == (2, "") and err.count("error: ") == 1
    assert ("no results folder at" if machine is None else "machine 'nosuch' has no results") in err


def test_a_garbage_machine_json_is_said_before_the_machine_has_no_results(capsys, quick):
    (quick / MACHINE / "machine.json").write_text("garbage")
    code, _out, err = run_cli(capsys, "alert", quick, "--machine", MACHINE)
    lines = err.splitlines()
    assert code == 2 and lines[0].startswith(
        f"warning: {quick / MACHINE}/machine.json is missing or unreadable (not JSON"
    )
    assert lines[1].startswith(f"error: machine '{MACHINE}' has no results")


def test_a_red_verdict_that_cannot_be_written_is_still_exit_1(tmp_path):
    tuned = f"{MACHINE}-tuned-fused-workspace-0"
    results = copy_runs(tmp_path / "results", ["67306e2d"])
    shutil.copytree(ROOT / "results" / tuned, results / tuned)
    command = [sys.executable, "-m", "fusedbench", "alert", str(results), "--machine", tuned, "--suite", "quick"]
    with open("/dev/full", "w") as full:
        result = subprocess.run(command, stdout=full, stderr=subprocess.PIPE, text=True, cwd=ROOT)
    assert result.returncode == 1 and "error: could not write to standard output" in result.stderr
    assert "Traceback" not in result.stderr


def test_a_step_summary_that_is_a_fifo_is_refused_not_waited_on(capsys, quick, monkeypatch, tmp_path):
    fifo = tmp_path / "summary"
    os.mkfifo(fifo)
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(fifo))
    with blocked_after(30):
        code, out, err = run_cli(capsys, "alert", quick, "--machine", MACHINE)
    assert code == 2 and out.startswith("fusedbench alert: green") and "is a FIFO, not a regular file" in err


def test_a_results_file_that_timed_no_group_is_a_problem_and_the_gate_refuses(capsys, quick):
    edit(newest_file(quick), lambda d: d.update(results={}))
    code, _, err = run_cli(capsys, "table", quick)
    assert code == 0 and "holds no cell of fusedbench's suite (asv ran none of its groups): nothing was read" in err
    assert run_cli(capsys, "alert", quick, "--machine", MACHINE)[0] == 2


def test_a_file_whose_name_is_not_utf8_is_read_like_any_other(capsys, quick):
    odd = quick / MACHINE / os.fsdecode(b"notes-\xff.txt")
    odd.write_text("not results")
    assert run_cli(capsys, "table", quick)[0] == 0


def test_a_cell_asv_has_no_time_for_is_a_failed_cell_the_gate_calls_red_never_a_crash(capsys, quick):
    edit(newest_file(quick), lambda d: _row(d)[0].__setitem__(0, float("nan")))  # asv's "no value"
    code, out, err = run_cli(capsys, "alert", quick, "--machine", MACHINE)
    assert code == 1 and out.startswith(f"fusedbench alert: RED ({MACHINE}: 1 alert(s))") and "error" not in err
    assert "- failed: DEFAULT/fp16/(65536,16384)x(16384,8192)/textbook time failed - asv recorded no time" in out


def test_without_a_driver_the_gpu_line_says_so_not_that_the_driver_is_old(monkeypatch):
    """CUDA says 'driver version is insufficient' where there is no driver at all; NVML says what is missing."""
    import types

    from fusedbench.errors import GpuUnavailable
    from fusedbench.measure import gpu, telemetry

    def insufficient():
        raise RuntimeError("cudaErrorInsufficientDriver: CUDA driver version is insufficient for CUDA runtime version")

    cupy = types.SimpleNamespace(cuda=types.SimpleNamespace(runtime=types.SimpleNamespace(getDeviceCount=insufficient)))
    monkeypatch.setitem(sys.modules, "cupy", cupy)

    def no_driver():
        raise GpuUnavailable("NVML found no NVIDIA driver or GPU (NVML Shared Library Not Found)")

    monkeypatch.setattr(telemetry, "nvml_device", no_driver)
    with pytest.raises(GpuUnavailable) as missing:
        gpu.load_gpu_stack("check")
    assert str(missing.value) == (
        "check needs an NVIDIA GPU, and CUDA found none (NVML found no NVIDIA driver or GPU (NVML Shared Library Not "
        "Found))"
    )
    monkeypatch.setattr(telemetry, "nvml_device", lambda: ("NVIDIA H100 80GB HBM3", 85520809984))  # a driver: CUDA's
    with pytest.raises(GpuUnavailable, match="cudaErrorInsufficientDriver"):
        gpu.load_gpu_stack("check")


def test_a_file_is_read_by_its_own_size_never_by_the_limit(tmp_path):
    """The cache's limit is 4 GiB: reading up to the limit allocated it (MemoryError under a memory cap)."""
    from fusedbench.files import read_regular

    path = tmp_path / "small.json"
    path.write_bytes(b"{}")
    assert read_regular(str(path), limit=2**42) == b"{}"  # 4 TiB: no machine could allocate it


@pytest.mark.parametrize(
    "argv, says",
    [
        (["--machine", MACHINE, "--runs", "a,b", "--held-out-card", "GPU-6961"], "--held-out-card goes with --paired"),
        (["--paired", MACHINE], f"--paired '{MACHINE}' is no paired session (<gpu>-paired-<session>, ab's)"),
        (["--paired", "PAIRED", "--held-out-card", ""], "argument --held-out-card"),
        (["--paired", "PAIRED,PAIRED"], "twice: an A/A pair counts once"),
        (
            ["--paired", "PAIRED", "--held-out-card", "GPU-6961", "--write"],
            "--write: Quick's margins from 1 A/A session(s) would",
        ),
        (["--paired", "PAIRED", "--held-out-card", "GPU-zzz"], "--held-out-card GPU-zzz: it must leave out some"),
        (["--paired", "PAIRED", "--machine", MACHINE], "--machine does not go with --paired"),
    ],
)
def test_calibrate_paired_bad_input_is_one_line(capsys, argv, says):
    sessions = sorted(p.name for p in (ROOT / "results").glob(f"{MACHINE}-paired-*T0034*"))
    argv = [a.replace("PAIRED", ",".join(sessions)) for a in argv]
    try:
        code, out, err = run_cli(capsys, "calibrate", str(ROOT / "results"), *argv)
    except SystemExit as exited:  # argparse's own refusals
        (out, err), code = capsys.readouterr(), exited.code
    assert code == 2 and out == "" and err.startswith("error: ") and says in err and err.count("\n") == 1
