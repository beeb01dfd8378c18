"""`fusedbench run` without a GPU: machine names, the asv command line, suites, and runs with asv faked."""

import json
import os
import re
import shutil
import subprocess
from pathlib import Path
from types import SimpleNamespace

import pytest
from conftest import blocked_after, git, make_checkout

from fusedbench.catalog.providers import LADDER
from fusedbench.catalog.suites import GROUPS, SUITES, select_groups, suite_bench_regex, suite_groups
from fusedbench.cli.run import asv_command, run_targets
from fusedbench.errors import FusedbenchError
from fusedbench.measure.machine import machine_name

FIXTURE_RESULTS = Path(__file__).parent / "fixtures" / "results-h200"
ROOT = Path(__file__).parent.parent
COMMIT = "37415b8673334f91c8679387b65931ce18659c3f"  # the fixture run's commit
MACHINE = "h200-141gb"


def test_machine_name_carries_the_gpu_model_and_memory():
    assert machine_name("NVIDIA H100 80GB HBM3", 85_520_809_984) == "h100-80gb-hbm3"
    assert machine_name("NVIDIA H200", 143771 * 2**20) == "h200-141gb"


def test_asv_runs_in_the_existing_environment_with_the_real_commit_and_samples():
    command = asv_command(bench_regex="^x", machine="h200-141gb", commit="abc123", launch_method="spawn")
    joined = " ".join(command)
    for expected in ("asv run", "--set-commit-hash abc123", "--machine h200-141gb", "--record-samples", "--bench ^x"):
        assert expected in joined
    assert command[command.index("--launch-method") + 1] == "spawn"
    assert command[command.index("--environment") + 1].startswith("existing:")


def test_unknown_launch_method_suite_and_bench_are_refused(monkeypatch):
    import fusedbench.measure.gpu
    from fusedbench.cli.run import run_suite

    monkeypatch.setattr(fusedbench.measure.gpu, "load_gpu_stack", lambda command: pytest.fail("looked for a GPU first"))
    with pytest.raises(FusedbenchError, match="unknown launch method 'fork'; choose from forkserver, spawn"):
        run_suite(suite="quick", bench=None, launch_method="fork", repo=str(ROOT), echo=print)
    with pytest.raises(FusedbenchError, match="unknown suite 'huge'; choose from quick, default, full"):
        suite_groups("huge")
    with pytest.raises(FusedbenchError, match="no group of suite 'quick' matches --bench 'Bf16'; its groups: Quick"):
        select_groups("quick", "Bf16")
    with pytest.raises(FusedbenchError, match=r"--bench '\[' is not a regular expression \(unterminated"):
        select_groups("default", "[")


def test_a_run_is_the_ceilings_then_one_asv_invocation_per_group():
    targets = run_targets(suite_groups("default"))
    assert targets[0][0] == "ceilings" and re.search(targets[0][1], "ceilings.GemmCeiling.time_gemm")
    assert [label for label, _, _ in targets[1:]] == list(SUITES["default"])
    label, regex, cells = targets[1]
    assert re.search(regex, f"cells.{label}.time_cell") and not re.search(regex, "cells.Quick.time_cell")
    assert cells == GROUPS[label].cell_count
    assert [label for label, _, _ in run_targets(select_groups("default", "Bf16"))] == [
        "ceilings",
        "Bf16Seed",
        "Bf16Llm",
        "Bf16Membound",
    ]


def test_one_asv_regex_selects_exactly_a_suites_groups_and_the_ceilings():
    regex = suite_bench_regex("default")
    names = [f"cells.{g}.time_cell" for g in GROUPS] + [
        "ceilings.GemmCeiling.time_gemm",
        "ceilings.CopyCeiling.time_copy",
    ]
    chosen = {name for name in names if re.search(regex, name)}
    assert chosen == {f"cells.{g}.time_cell" for g in SUITES["default"]} | set(names[-2:])


def test_default_suite_covers_every_epilog_at_16_bit_on_seed_llm_and_membound():
    default = {GROUPS[name].dtype + "/" + GROUPS[name].shape_set for name in SUITES["default"]}
    for dtype in ("fp16", "bf16"):
        for shapes in ("seed", "llm", "membound"):
            assert f"{dtype}/{shapes}" in default
    ladder_groups = [name for name in SUITES["default"] if GROUPS[name].providers == LADDER]
    assert len(ladder_groups) == len(SUITES["default"]) - 1  # all but the Blog control
    assert all(len(GROUPS[name].epilogs) == 16 for name in ladder_groups)
    assert GROUPS["Blog"].providers == ("textbook", "blog")


@pytest.fixture
def checkout(tmp_path):
    """A committed fusedbench checkout whose results/ holds the fixture run, with its report."""
    asv_conf = (ROOT / "asv.conf.json").read_text()
    files = {"asv.conf.json": asv_conf, "reports/index.html": "an older report\n"}
    return make_checkout(tmp_path / "fusedbench", files, {"results": FIXTURE_RESULTS})


@pytest.fixture
def fake_gpu(monkeypatch):
    """No GPU: the stack, the check, NVML and `asv machine` stand in; asv itself is `fake_asv`."""
    import fusedbench.cli.run as run
    import fusedbench.measure.check
    import fusedbench.measure.gpu
    import fusedbench.measure.telemetry

    stack = SimpleNamespace(device_name="NVIDIA H200")
    monkeypatch.setattr(fusedbench.measure.gpu, "load_gpu_stack", lambda command: stack)
    monkeypatch.setattr(fusedbench.measure.check, "run_check", lambda **kw: SimpleNamespace(cells=[]))
    monkeypatch.setattr(fusedbench.measure.telemetry, "nvml_device", lambda: ("NVIDIA H200", 143771 * 2**20))
    monkeypatch.setattr(run, "register_asv_machine", lambda name, cwd: None)
    return run


def fake_asv(monkeypatch, behave):
    """Replace `asv run` by `behave(group label, results folder)`, which returns an exit code or raises."""
    real_run = subprocess.run
    invoked = []

    def fake_run(command, **kwargs):
        if "asv" not in command:  # git, or platform.processor() running `uname -p`
            return real_run(command, **kwargs)
        regex = command[command.index("--bench") + 1]
        label = "ceilings" if "ceilings" in regex else regex.split("\\.")[1]
        invoked.append(label)
        return SimpleNamespace(returncode=behave(label, Path(kwargs["cwd"]) / "results" / MACHINE))

    monkeypatch.setattr(subprocess, "run", fake_run)
    return invoked


def asv_file(folder: Path) -> Path:
    (path,) = folder.glob(f"{COMMIT[:8]}-existing*.json")
    return path


def test_running_twice_on_one_commit_works_and_the_report_is_the_same_bytes(checkout, fake_gpu, monkeypatch):
    monkeypatch.setattr(fake_gpu, "require_clean_checkout", _real_checkout_at(COMMIT))

    def rewrite(label, folder):  # as asv does: the commit's results file, benchmarks.json, a record
        payload = json.loads(asv_file(folder).read_text())
        asv_file(folder).write_text(json.dumps(payload | {"date": payload["date"] + 1}))
        described = folder.parent / "benchmarks.json"
        described.write_text(described.read_text())
        (folder / f"{COMMIT[:8]}-{label}-{len(list(folder.iterdir()))}.fbenv").write_text("{}")
        return 0

    fake_asv(monkeypatch, rewrite)
    echoed = []
    for _ in range(2):
        code = fake_gpu.run_suite(
            suite="default", bench="Fp16Membound", launch_method="forkserver", repo=str(checkout), echo=echoed.append
        )
        assert code == 0
    first = (checkout / "reports" / "index.html").read_bytes()
    fake_gpu.write_run_report(str(checkout), echoed.append)
    assert (checkout / "reports" / "index.html").read_bytes() == first  # same results, same bytes
    assert echoed[-1] == f"report: {checkout / 'reports' / 'index.html'}"
    changed = git(checkout, "status", "--porcelain", "--untracked-files=all").splitlines()
    assert changed and all(line[3:].startswith(("results/", "reports/")) for line in changed)  # data, not code


def _real_checkout_at(commit):
    """The real dirty-tree check, with the results labelled by the fixture's commit."""
    from dataclasses import replace

    from fusedbench.measure.checkout import require_clean_checkout

    return lambda repo: replace(require_clean_checkout(repo), commit=commit)


def test_a_failed_rerun_keeps_the_earlier_timings_and_drops_its_records(checkout, fake_gpu, monkeypatch):
    monkeypatch.setattr(fake_gpu, "require_clean_checkout", _real_checkout_at(COMMIT))
    before = asv_file(checkout / "results" / MACHINE).read_bytes()

    def crash(label, folder):  # asv nulls the group's timings and the measurement left a record, then it fails
        if label == "Fp16Membound":
            payload = json.loads(asv_file(folder).read_text())
            payload["results"]["cells.Fp16Membound.time_cell"][0] = [None] * 384
            asv_file(folder).write_text(json.dumps(payload))
            (folder / f"{COMMIT[:8]}-Fp16Membound-20261122T000000000000Z.fbenv").write_text("{}")
            return 2
        return 0

    fake_asv(monkeypatch, crash)
    echoed = []
    code = fake_gpu.run_suite(
        suite="default", bench="Fp16Membound", launch_method="forkserver", repo=str(checkout), echo=echoed.append
    )
    assert code == 2
    assert asv_file(checkout / "results" / MACHINE).read_bytes() == before
    assert [p.name for p in (checkout / "results" / MACHINE).glob("*.fbenv")] == ["env-37415b86-20261121T213603Z.fbenv"]
    assert (
        "Fp16Membound failed or was interrupted (asv exit code 2): this commit's earlier results are kept as they were"
        in echoed
    )


def test_asvs_own_error_is_an_error_never_the_failed_checks_verdict(checkout, fake_gpu, monkeypatch, capsys):
    """asv exits 1 on its own errors (no benchmark selected, a bad configuration); run's 1 means a failed check."""
    monkeypatch.setattr(fake_gpu, "require_clean_checkout", _real_checkout_at(COMMIT))
    fake_asv(monkeypatch, lambda label, folder: 1 if label == "Fp16Membound" else 0)
    code = fake_gpu.run_suite(
        suite="default", bench="Fp16Membound", launch_method="forkserver", repo=str(checkout), echo=lambda line: None
    )
    assert code == 2
    assert capsys.readouterr().err.startswith("error: asv failed Fp16Membound (exit 1): asv's output above says why")


def test_an_interrupt_keeps_finished_groups_and_the_earlier_timings_of_the_one_in_progress(
    checkout, fake_gpu, monkeypatch
):
    monkeypatch.setattr(fake_gpu, "require_clean_checkout", _real_checkout_at(COMMIT))
    before = asv_file(checkout / "results" / MACHINE).read_bytes()

    def interrupted(label, folder):
        if label == "Fp16Membound":
            asv_file(folder).write_text("{half written")
            raise KeyboardInterrupt
        return 0

    invoked = fake_asv(monkeypatch, interrupted)
    echoed = []
    code = fake_gpu.run_suite(
        suite="default", bench="Fp16", launch_method="forkserver", repo=str(checkout), echo=echoed.append
    )
    assert code == 130
    assert invoked == ["ceilings", "Fp16Seed", "Fp16Llm", "Fp16Membound"]  # interrupted in the last one
    assert asv_file(checkout / "results" / MACHINE).read_bytes() == before
    assert "interrupted during Fp16Membound: every group before it is saved in results/" in echoed
    assert echoed[-1] == f"report: {checkout / 'reports' / 'index.html'}"


def test_a_run_refuses_a_dirty_checkout_before_touching_anything(checkout, fake_gpu, monkeypatch):
    (checkout / "benchmarks" / "extra.py").write_text("# untracked: would be timed under HEAD\n")
    invoked = fake_asv(monkeypatch, lambda label, folder: 0)
    with pytest.raises(FusedbenchError, match=r"uncommitted changes \(benchmarks/extra.py\)"):
        fake_gpu.run_suite(suite="quick", bench=None, launch_method="forkserver", repo=str(checkout), echo=print)
    assert invoked == []


def test_a_run_with_no_results_yet_says_so_instead_of_a_report(tmp_path):
    from fusedbench.cli.run import write_run_report

    shutil.copy(ROOT / "asv.conf.json", tmp_path)
    (tmp_path / "results").mkdir()
    echoed = []
    write_run_report(str(tmp_path), echoed.append)
    assert echoed[-1] == "no report written: no results were recorded"
    assert not (tmp_path / "reports").exists()


def test_progress_line_reads_the_newest_group_file(tmp_path):
    import os
    import time

    from fusedbench.measure.progress import progress_line

    assert progress_line(str(tmp_path)) is None
    (tmp_path / "Fp16Seed.progress").write_text(json.dumps({"group": "Fp16Seed", "done": 96, "total": 96, "last": "a"}))
    older = time.time() - 60
    os.utime(tmp_path / "Fp16Seed.progress", (older, older))
    (tmp_path / "Fp16Llm.progress").write_text(json.dumps({"group": "Fp16Llm", "done": 36, "total": 864, "last": "b"}))
    (tmp_path / "Fp16Seed.json").write_text("{}")  # other files are not progress
    assert progress_line(str(tmp_path)) == "measuring Fp16Llm: 36/864 cells (b)"


def _record_asv_calls(fake_gpu, monkeypatch, variable: str) -> tuple[list, list]:
    """run_suite with a fake check and a fake asv: (the tuning each check was given, (machine, `variable`) of each
    asv call)."""
    import fusedbench.measure.check

    monkeypatch.setattr(fake_gpu, "require_clean_checkout", _real_checkout_at(COMMIT))
    checked, seen = [], []
    monkeypatch.setattr(
        fusedbench.measure.check, "run_check", lambda **kw: checked.append(kw["tuning"]) or SimpleNamespace(cells=[])
    )
    real_run = subprocess.run

    def fake_run(command, **kwargs):
        if "asv" not in command:
            return real_run(command, **kwargs)
        seen.append((command[command.index("--machine") + 1], kwargs["env"].get(variable)))
        return SimpleNamespace(returncode=0)

    monkeypatch.setattr(subprocess, "run", fake_run)
    return checked, seen


def test_a_tuned_run_checks_and_times_tuned_under_its_own_machine_and_an_untuned_one_clears_the_variable(
    checkout, fake_gpu, monkeypatch
):
    from fusedbench.catalog.deliberate import Deliberate
    from fusedbench.catalog.tuning import TUNE_VARIABLE, parse_tuning

    checked, seen = _record_asv_calls(fake_gpu, monkeypatch, TUNE_VARIABLE)
    monkeypatch.setenv(TUNE_VARIABLE, "gemm:workspace=0")  # left over in the shell: never applied by a plain run
    tuning = parse_tuning("fused:algorithm=3")
    for asked in (tuning, None):
        fake_gpu.run_suite(
            suite="quick",
            bench=None,
            launch_method="forkserver",
            repo=str(checkout),
            echo=print,
            deliberate=Deliberate(asked),
        )
    assert checked == [tuning, None]
    assert set(seen[:2]) == {(f"{MACHINE}-tuned-fused-algorithm-3", "fused:algorithm=3")}
    assert set(seen[2:]) == {(MACHINE, None)}


def test_an_injected_run_times_under_its_own_machine_and_a_target_outside_the_suite_is_refused(
    checkout, fake_gpu, monkeypatch
):
    from fusedbench.catalog.deliberate import Deliberate
    from fusedbench.catalog.injection import INJECT_VARIABLE, parse_injection

    checked, seen = _record_asv_calls(fake_gpu, monkeypatch, INJECT_VARIABLE)
    injection = parse_injection("RELU_BIAS/fp16/(65536,16384)x(16384,8192)/fused=5%")
    echoed = []
    fake_gpu.run_suite(
        suite="quick",
        bench=None,
        launch_method="forkserver",
        repo=str(checkout),
        echo=echoed.append,
        deliberate=Deliberate(None, injection),
    )
    assert checked == [None]  # the check is the plain one: an injection changes timing only
    assert set(seen) == {(f"{MACHINE}-inject-{injection.digest}", injection.label)}
    assert f"injected run ({injection.label} slower, on purpose), kept apart as machine" in "\n".join(echoed)
    elsewhere = Deliberate(None, parse_injection("Fp16Llm=2%"))
    with pytest.raises(FusedbenchError, match=r"^--inject 'Fp16Llm=2%' names no cell of suite 'quick'; `fusedbench"):
        fake_gpu.run_suite(suite="quick", bench=None, launch_method="forkserver", repo=str(checkout), echo=print,
                           deliberate=elsewhere)  # fmt: skip


def test_the_mlp_suite_runs_its_groups_unchecked_and_without_ceilings(checkout, fake_gpu, monkeypatch):
    """Its steps are verified as they are measured: no epilog check, no ceilings (nothing has a floor)."""
    import fusedbench.measure.check
    from fusedbench.catalog.deliberate import Deliberate
    from fusedbench.catalog.tuning import parse_tuning

    monkeypatch.setattr(fake_gpu, "require_clean_checkout", _real_checkout_at(COMMIT))
    monkeypatch.setattr(
        fusedbench.measure.check, "run_check", lambda **kw: pytest.fail("the mlp suite ran the epilog check")
    )
    invoked = fake_asv(monkeypatch, lambda label, folder: 0)
    echoed = []
    assert (
        fake_gpu.run_suite(suite="mlp", bench=None, launch_method="spawn", repo=str(checkout), echo=echoed.append) == 0
    )
    assert invoked == ["MlpStep", "MlpEpoch"]
    assert "timing suite 'mlp': 2 groups, 156 cells" in "\n".join(echoed)
    with pytest.raises(FusedbenchError, match="changes epilog cells; suite 'mlp' has none: run it without"):
        fake_gpu.run_suite(suite="mlp", bench=None, launch_method="spawn", repo=str(checkout), echo=print,
                           deliberate=Deliberate(parse_tuning("fused:algorithm=3")))  # fmt: skip


def test_check_of_the_mlp_suite_says_where_its_steps_are_verified(capsys):
    from fusedbench.cli import main

    assert main(["check", "--suite", "mlp"]) == 2
    assert "check verifies epilog cells: pass --suite quick, default, full or peers" in capsys.readouterr().err


def test_a_failed_check_times_nothing_and_names_the_failed_cells(checkout, fake_gpu, monkeypatch):
    import fusedbench.measure.check
    from fusedbench.catalog.model import Cell, CellKey

    monkeypatch.setattr(fake_gpu, "require_clean_checkout", _real_checkout_at(COMMIT))
    wrong = Cell.failed(CellKey("BIAS", "fp16", 64, 64, 64, "fused"), "error 0.5 > tolerance 0.01")
    monkeypatch.setattr(fusedbench.measure.check, "run_check", lambda **kw: SimpleNamespace(cells=[wrong]))
    invoked = fake_asv(monkeypatch, lambda label, folder: 0)
    echoed = []
    assert (
        fake_gpu.run_suite(suite="quick", bench=None, launch_method="spawn", repo=str(checkout), echo=echoed.append)
        == 1
    )
    assert invoked == [] and "FAILED BIAS/fp16/(64,64)x(64,64)/fused: error 0.5 > tolerance 0.01" in echoed
    assert echoed[-1] == "1 cells failed the check; nothing was timed (run `fusedbench check` for the table)"


def test_a_special_file_among_a_commits_results_is_refused_never_read(tmp_path):
    """`fusedbench run` keeps the commit's results to put back after a failed run: a FIFO would block it."""
    from fusedbench.cli.run import KeptResults
    from fusedbench.errors import FusedbenchError

    os.mkfifo(tmp_path / "c0ffee00-existing-py.json")
    with blocked_after(30), pytest.raises(FusedbenchError, match="is a FIFO, not a regular file; it cannot be kept"):
        KeptResults(str(tmp_path), "c0ffee00" * 5)
