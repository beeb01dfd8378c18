"""results/ as asv's own tools read it: benchmarks.json current, every current-version run graphed by
`asv publish`, and `asv compare` between runs of one version free of incomparable ("x") rows.

These run asv itself, offline, on the committed results (they need the git history that a clone has).
"""

import glob
import itertools
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from fusedbench.catalog.suites import SUITES

ROOT = Path(__file__).parent.parent
RESULTS = ROOT / "results"


def asv(*args: str, cwd: Path = ROOT, home: Path | None = None) -> str:
    environment = dict(os.environ)
    if home is not None:
        environment["HOME"] = str(home)  # asv's machine file lives in $HOME: keep the user's untouched
    result = subprocess.run(
        [sys.executable, "-m", "asv", *args], cwd=cwd, env=environment, capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout


def committed_runs() -> list[dict]:
    runs = []
    for path in sorted(glob.glob(str(RESULTS / "*" / "*.json"))):
        if os.path.basename(path) == "machine.json":
            continue
        with open(path) as stream:
            payload = json.load(stream)
        version = payload["result_columns"].index("version")
        runs.append(
            {
                "machine": payload["params"]["machine"],
                "commit": payload["commit_hash"],
                "versions": {name: row[version] for name, row in payload["results"].items()},
            }
        )
    return runs


def current_versions() -> dict[str, str]:
    with open(RESULTS / "benchmarks.json") as stream:
        described = json.load(stream)
    return {name: entry["version"] for name, entry in described.items() if name != "version"}


def test_results_benchmarks_json_describes_the_benchmarks_as_committed(tmp_path):
    config = {
        "version": 1,
        "project": "fusedbench",
        "repo": str(ROOT),
        "dvcs": "git",
        "branches": ["main"],
        "environment_type": "existing",
        "benchmark_dir": str(ROOT / "benchmarks"),
        "results_dir": str(tmp_path / "results"),
        "html_dir": str(tmp_path / "html"),
    }
    (tmp_path / "asv.conf.json").write_text(json.dumps(config))
    asv("machine", "--yes", "--machine", "discovery", cwd=tmp_path, home=tmp_path)
    asv("--config", str(tmp_path / "asv.conf.json"), "run", "--bench", "just-discover", "-E", "existing:same",
        "--machine", "discovery", cwd=tmp_path, home=tmp_path)  # fmt: skip
    discovered = json.loads((tmp_path / "results" / "benchmarks.json").read_text())
    committed = json.loads((RESULTS / "benchmarks.json").read_text())
    current = tmp_path / "results" / "benchmarks.json"
    assert discovered == committed, f"results/benchmarks.json is stale; the current one: cp {current} results/"


def in_history(commit: str) -> bool:
    """Whether the commit is one of this repository's: a paired session's (`fusedbench ab`) may be a pull request's,
    or a device's own, which asv publish reads but graphs only on the branches it follows."""
    return (
        subprocess.run(["git", "cat-file", "-e", f"{commit}^{{commit}}"], cwd=ROOT, capture_output=True).returncode == 0
    )


def test_every_run_of_the_current_version_is_graphed_by_asv_publish(tmp_path):
    asv("publish", "--no-pull", "--html-dir", str(tmp_path / "html"), home=tmp_path)
    index = json.loads((tmp_path / "html" / "index.json").read_text())
    revisions = {commit: int(revision) for revision, commit in index["revision_to_hash"].items()}
    current = current_versions()
    graphed = set()
    paired = {run["machine"] for run in committed_runs() if "-paired-" in run["machine"]}
    assert paired and paired <= set(index["params"]["machine"])  # publish read every paired session's both sides
    for run in committed_runs():
        if run["machine"] in paired and not in_history(run["commit"]):
            continue
        for name, version in run["versions"].items():
            if current.get(name) != version:
                continue  # measured differently; asv keeps it out of the graphs, as it should
            (path,) = glob.glob(
                str(tmp_path / "html" / "graphs" / "branch-main" / f"machine-{run['machine']}" / "*" / f"{name}.json")
            )
            with open(path) as stream:
                points = json.load(stream)
            assert revisions[run["commit"]] in [point[0] for point in points], (run["machine"], run["commit"][:8], name)
            graphed.add((run["machine"], name))
    # Not vacuous: the mlp suite's runs on both machines kept their versions through the burst lead-in (which
    # started a new history for every cell group and the ceilings), and the H100's default suite ran under it.
    default = {f"cells.{group}.time_cell" for group in SUITES["default"]}
    assert {("h100-80gb-hbm3", name) for name in default} <= graphed
    mlp = {name for name in current if name.startswith("mlp.")}
    assert (
        len(mlp) == 4 and {(machine, name) for machine in ("h100-80gb-hbm3", "h200-141gb") for name in mlp} <= graphed
    )


def runs_of_one_version() -> list[tuple[str, str, str]]:
    """(machine, older commit, newer commit) for consecutive committed runs on a machine whose benchmarks
    ran at the same versions (asv's own order of the commits is the git history)."""
    order = subprocess.run(
        ["git", "rev-list", "--reverse", "HEAD"], cwd=ROOT, capture_output=True, text=True
    ).stdout.split()
    pairs = []
    by_machine: dict[str, list[dict]] = {}
    for run in committed_runs():
        if run["commit"] in order:
            by_machine.setdefault(run["machine"], []).append(run)
    for machine, runs in by_machine.items():
        runs.sort(key=lambda run: order.index(run["commit"]))
        for older, newer in itertools.pairwise(runs):
            shared = set(older["versions"]) & set(newer["versions"])
            if shared and all(older["versions"][n] == newer["versions"][n] for n in shared):
                pairs.append((machine, older["commit"], newer["commit"]))
    return pairs


# Consecutive runs that measured the same way: the same asv versions, which asv's compare must accept.
SAME_MEASUREMENT = [
    ("h100-80gb-hbm3", "253b8cc", "d1e4d02"),  # shuffled rounds, then Williams rounds: one benchmark source
    ("h200-141gb", "253b8cc", "d1e4d02"),
    ("h200-141gb", "451b904", "efffe95"),  # the quick runs of this two commits
]


def test_the_runs_of_one_version_are_the_ones_expected():
    found = {(machine, older[:7], newer[:7]) for machine, older, newer in runs_of_one_version()}
    assert set(SAME_MEASUREMENT) <= found


@pytest.mark.parametrize(("machine", "older", "newer"), SAME_MEASUREMENT)
def test_asv_compare_finds_nothing_incomparable_between_runs_of_one_version(tmp_path, machine, older, newer):
    marks = compare_marks(older, newer, machine, tmp_path)
    assert len(marks) >= 30 and "x" not in marks


def test_asv_compare_marks_runs_measured_differently_as_incomparable(tmp_path):
    """The control: 888c2b7 timed providers one after another, d1e4d02 in rounds, with other versions."""
    marks = compare_marks("888c2b7", "d1e4d02", "h200-141gb", tmp_path)
    assert marks.count("x") >= 2000


def compare_marks(older: str, newer: str, machine: str, home: Path) -> list[str]:
    """The first column of every row of `asv compare`: '', '+', '-', '~', '!' or 'x' (incomparable)."""
    table = asv("compare", older, newer, "--machine", machine, home=home)
    rows = [
        line for line in table.splitlines() if line.startswith("|") and "Benchmark" not in line and "---" not in line
    ]
    return [row.split("|")[1].strip() for row in rows]
