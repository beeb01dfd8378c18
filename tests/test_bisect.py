"""`fusedbench bisect` on the CPU: 16 commits, one of them a real code change that slows one cell by 5% (the stand-in
worker times its source's fusedbench/slow.txt cells slower), found in 5 paired steps; stacks bisected the same way;
refusals in a line."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pandas as pd
import pytest
from conftest import git, make_checkout
from test_ab import MACHINE, PYPROJECT, TARGET, WORKER, fake_gpu, run  # noqa: F401 (fake_gpu: a fixture)

from fusedbench.errors import FusedbenchError
from fusedbench.paired.bisect import RECORD_SUFFIX, Bisection, Step, alert_labels, bisect, moved_cells

ROOT = Path(__file__).parent.parent
SLOW_AT = 11  # the commit, of 16 after GOOD, that slows TARGET


@pytest.fixture
def history(tmp_path, monkeypatch):
    """GOOD, then 16 commits; the SLOW_AT-th makes TARGET 5% slower (and every later one keeps it)."""
    files = {"pyproject.toml": PYPROJECT, "fusedbench/measure/gpu/confirm_worker.py": WORKER,
             "fusedbench/x.py": "A = 0\n", ".gitignore": "/results/\n"}  # fmt: skip
    root = make_checkout(tmp_path / "repo", files)
    commits = [git(root, "rev-parse", "HEAD").strip()]
    for i in range(1, 17):
        (root / "fusedbench" / "x.py").write_text(f"A = {i}\n")
        if i == SLOW_AT:
            (root / "fusedbench" / "slow.txt").write_text(f"{TARGET}=5%\n")
            git(root, "add", "fusedbench/slow.txt")
        git(root, "commit", "-qam", f"change {i}")
        commits.append(git(root, "rev-parse", "HEAD").strip())
    (root / "results").mkdir()
    shutil.copy(ROOT / "results" / "benchmarks.json", root / "results")
    monkeypatch.chdir(root)
    return root, commits


@pytest.mark.usefixtures("fake_gpu")
def test_sixteen_commits_one_of_them_slow_the_first_slow_commit_is_found_in_five_paired_steps(history, capsys):
    root, commits = history
    code, out, err = run_bisect(capsys, commits[0][:8], "HEAD", "--cells", "RELU_BIAS/fp16/", "--rounds", "4")
    assert code == 0, out + err
    steps = [line for line in out.splitlines() if line.startswith("step ")]
    assert len(steps) == 5 and "(16 of 16)" in steps[0] and ": red (" in steps[0]
    assert f"first past the margin: {commits[SLOW_AT][:8]} 'change {SLOW_AT}'" in out
    (record,) = (root / "results" / MACHINE).glob(f"bisect-*-commits{RECORD_SUFFIX}")
    kept = json.loads(record.read_text())
    assert kept["first"] == commits[SLOW_AT] and [s["index"] for s in kept["steps"]] == [16, 8, 12, 10, 11]
    assert all(s["cells"] == "^RELU_BIAS/fp16/\\(65536,16384\\)x\\(16384,8192\\)/" for s in kept["steps"][1:])
    assert [s["outcome"] for s in kept["steps"]] == ["red", "green", "red", "green", "red"]
    assert kept["seconds"] == pytest.approx(sum(s["seconds"] for s in kept["steps"]))


@pytest.mark.usefixtures("fake_gpu")
def test_a_range_whose_last_commit_is_not_slower_has_nothing_to_bisect(history, capsys):
    _, commits = history
    code, out, _ = run_bisect(capsys, commits[0][:8], commits[SLOW_AT - 1][:8], "--cells", "RELU_BIAS/fp16/",
                              "--rounds", "2")  # fmt: skip
    assert code == 0 and "is not past the margin beside" in out and "nothing to bisect (1 paired step(s)" in out


@pytest.mark.usefixtures("fake_gpu")
def test_a_bad_that_does_not_descend_from_good_or_a_dependency_change_in_the_range_is_refused(history, capsys):
    root, commits = history
    git(root, "checkout", "-q", "-b", "side", commits[2])
    (root / "fusedbench" / "x.py").write_text("A = 'side'\n")
    git(root, "commit", "-qam", "a side branch")
    code, _, err = run_bisect(capsys, commits[5][:8], "side")
    assert code == 2 and "'side' does not come after" in err
    git(root, "checkout", "-q", "main")
    (root / "pyproject.toml").write_text(PYPROJECT.replace('["numpy>=1.25"]', '["numpy>=2"]'))
    git(root, "commit", "-qam", "a dependency change")
    code, _, err = run_bisect(capsys, commits[0][:8], "HEAD")
    assert code == 2 and "depends on other packages than" in err and "bisect the stacks with --stacks instead" in err


@pytest.fixture(autouse=True)
def gpu_present(monkeypatch):
    """bisect's refusal without a GPU is its first, after the arguments' own: taken as passed here."""
    import fusedbench.cli.bisect as bisect_cli

    monkeypatch.setattr(bisect_cli, "require_gpu", lambda what, instead: None)


def run_bisect(capsys, *argv):
    from fusedbench.cli import main

    try:
        code = main(["bisect", *argv])
    except SystemExit as exited:
        code = exited.code
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize(
    "argv, says",
    [
        ([], "name GOOD and BAD (two commits) or --stacks A,B,... (in order), one of the two"),
        (["HEAD~3"], "name GOOD and BAD"),
        (["HEAD~3", "HEAD", "--stacks", "a,b"], "name GOOD and BAD"),
        (["nosuch", "HEAD"], "'nosuch' is no commit of"),
        (["HEAD", "HEAD~3"], "'HEAD~3' does not come after 'HEAD': name the good commit first"),
        (["HEAD~3", "HEAD", "--cells", "("], "--cells '(' is not a regular expression"),
    ],
)
def test_refusals_are_one_line_before_anything_is_measured(history, capsys, argv, says):
    code, _, err = run_bisect(capsys, *argv)
    assert code == 2 and says in err and len(err.strip().splitlines()) == 1, err


def test_bisection_stops_at_the_first_red_point_in_log2_steps_beside_the_first():
    for slow in range(1, 17):
        asked = []

        def measure(point, index, cells, slow=slow, asked=asked):
            asked.append((index, cells))
            red = index >= slow
            return Step(point, index, "red" if red else "green", [f"{TARGET}"] if red else [], {}, 10.0, 1, cells)

        found = bisect(Bisection([f"p{i}" for i in range(17)], "commits"), measure)
        assert found.first == f"p{slow}" and len(found.steps) == 5 and found.seconds == 50.0
        assert asked[0] == (16, "") and {cells for _, cells in asked[1:]} == {moved_cells([TARGET])}


def test_the_cells_that_moved_are_their_workloads_every_provider_and_only_group_alerts_are_every_cell():
    alerts = pd.DataFrame([
        {"epilog": "RELU_BIAS", "dtype": "fp16", "m": 65536.0, "k": 16384.0, "n": 8192.0, "provider": "fused",
         "group": "Quick"},
        {"epilog": float("nan"), "dtype": "fp16", "m": float("nan"), "k": float("nan"), "n": float("nan"),
         "provider": "*", "group": "Quick"},
    ])  # fmt: skip
    labels = alert_labels(alerts)
    assert labels == [TARGET, "Quick"]
    assert moved_cells(labels) == "^RELU_BIAS/fp16/\\(65536,16384\\)x\\(16384,8192\\)/" and moved_cells(["Quick"]) == ""


def test_a_step_that_is_not_judged_stops_the_bisection_with_the_steps_taken_kept():
    outcomes = iter(["red", "not judged"])

    def measure(point, index, cells):
        return Step(point, index, next(outcomes), [TARGET], {}, 10.0, 1, cells)

    found = Bisection([f"p{i}" for i in range(5)], "commits")
    with pytest.raises(
        FusedbenchError, match="the step at p2 was not judged: no margins of this GPU's judge those cells"
    ):
        bisect(found, measure)
    assert [step.outcome for step in found.steps] == ["red", "not judged"]


def test_the_points_are_goods_descendants_on_the_first_parent_line(tmp_path):
    from fusedbench.paired.bisect import commit_points

    root = make_checkout(tmp_path / "repo", {"f": "a\n"})
    git(root, "checkout", "-q", "-b", "feature")
    (root / "g").write_text("good\n")
    git(root, "add", "g")
    git(root, "commit", "-qm", "GOOD, on a branch")
    git(root, "checkout", "-q", "main")
    (root / "f").write_text("b\n")
    git(root, "commit", "-qam", "B, before the merge: not after GOOD")
    git(root, "merge", "-q", "--no-ff", "feature", "-m", "M")
    (root / "f").write_text("c\n")
    git(root, "commit", "-qam", "C")
    subjects = [git(root, "log", "-1", "--format=%s", c).strip() for c in commit_points(str(root), "feature", "main")]
    assert subjects == ["GOOD, on a branch", "M", "C"]


@pytest.mark.usefixtures("fake_gpu")
def test_a_step_that_fails_stops_the_bisection_and_the_steps_taken_are_kept(history, capsys):
    root, commits = history
    git(root, "checkout", "-q", "-b", "broken", commits[0])
    (root / "fusedbench" / "measure" / "gpu" / "confirm_worker.py").write_text("PROTOCOL = 2\n")  # an old worker
    git(root, "commit", "-qam", "a worker of another protocol")
    (root / "fusedbench" / "slow.txt").write_text(f"{TARGET}=5%\n")
    (root / "fusedbench" / "measure" / "gpu" / "confirm_worker.py").write_text(WORKER)
    git(root, "add", "fusedbench/slow.txt")
    git(root, "commit", "-qam", "the worker back, a cell slower")
    code, out, err = run_bisect(capsys, commits[0][:8], "HEAD", "--cells", "RELU_BIAS/fp16/", "--rounds", "2")
    assert code == 2 and "speaks protocol 2" in err and "the steps taken are kept in" in err
    assert out.startswith("step 1: ") and ": red (" in out
    (record,) = (root / "results" / MACHINE).glob(f"bisect-*-commits{RECORD_SUFFIX}")
    kept = json.loads(record.read_text())
    assert kept["first"] is None and "speaks protocol 2" in kept["stopped"] and len(kept["steps"]) == 1
