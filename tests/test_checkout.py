"""Which checkout a run measures, and what makes it dirty: real git repositories in a temporary folder."""

import json
import os
import subprocess
import time

import pytest
from conftest import blocked_after, git, make_checkout

from fusedbench.errors import FusedbenchError
from fusedbench.measure.checkout import asv_machine_in_use, read_checkout, require_clean_checkout


@pytest.fixture
def checkout(tmp_path):
    """A minimal fusedbench checkout: the suite, a package file, committed results and report."""
    files = {
        "fusedbench/run.py": "# code\n",
        "results/benchmarks.json": "{}\n",
        "reports/index.html": "<html></html>\n",
    }
    return make_checkout(tmp_path / "fusedbench", files)


def test_a_clean_checkout_names_its_commit(checkout):
    state = read_checkout(str(checkout))
    assert not state.dirty and len(state.commit) == 40
    assert require_clean_checkout(str(checkout)) == state


def test_what_a_run_writes_does_not_make_the_next_run_refuse(checkout):
    (checkout / "reports" / "index.html").write_text("<html>new report</html>\n")  # tracked, rewritten
    (checkout / "results" / "benchmarks.json").write_text('{"rewritten": true}\n')
    (checkout / "results" / "h100-80gb-hbm3").mkdir()
    (checkout / "results" / "h100-80gb-hbm3" / "abc-existing.json").write_text("{}")  # untracked, new
    (checkout / "NOTES.txt").write_text("mine\n")  # untracked, at the root: not code asv runs
    assert read_checkout(str(checkout)).changes == ()


@pytest.mark.parametrize(
    "path",
    ["fusedbench/run.py", "benchmarks/extra.py", "fusedbench/new_module.py", "asv.conf.json"],
)
def test_changed_code_or_untracked_code_makes_the_checkout_dirty(checkout, path):
    with open(checkout / path, "a") as stream:
        stream.write("\n")
    state = read_checkout(str(checkout))
    assert state.changes == (path,)
    with pytest.raises(FusedbenchError, match=f"uncommitted changes \\({path}\\); commit or remove them"):
        require_clean_checkout(str(checkout))


def test_a_folder_that_is_not_a_fusedbench_root_is_refused(checkout, tmp_path):
    with pytest.raises(FusedbenchError, match="is not the root of a fusedbench checkout"):
        read_checkout(str(checkout / "benchmarks"))
    other = tmp_path / "other"
    (other / "vendored").mkdir(parents=True)
    git(other, "init", "-q")
    (other / "README").write_text("another project\n")
    git(other, "add", ".")
    git(other, "commit", "-qm", "init")
    copy = other / "vendored" / "fusedbench"
    subprocess.run(["cp", "-r", str(checkout), str(copy)], check=True)
    subprocess.run(["rm", "-rf", str(copy / ".git")], check=True)  # fusedbench's files inside another repository
    with pytest.raises(FusedbenchError, match=r"lies inside the git repository .*other"):
        read_checkout(str(copy))
    (tmp_path / "nogit").mkdir()
    for name in ("asv.conf.json", "benchmarks"):
        subprocess.run(["cp", "-r", str(checkout / name), str(tmp_path / "nogit" / name)], check=True)
    with pytest.raises(FusedbenchError, match="needs to be a git checkout of fusedbench"):
        read_checkout(str(tmp_path / "nogit"))


def test_the_machine_asv_records_under_is_the_newest_machine_json(tmp_path):
    assert asv_machine_in_use(str(tmp_path)) is None
    for name in ("vm", "h100-80gb-hbm3"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "machine.json").write_text(json.dumps({"machine": name, "version": 1}))
        time.sleep(0.01)
    assert asv_machine_in_use(str(tmp_path)) == "h100-80gb-hbm3"
    os.utime(tmp_path / "vm" / "machine.json")  # asv run --machine vm rewrites its machine.json as it starts
    assert asv_machine_in_use(str(tmp_path)) == "vm"
    (tmp_path / "zz").mkdir()
    os.mkfifo(tmp_path / "zz" / "machine.json")  # newer, but no machine.json to read: never opened (it would block)
    with blocked_after(30):
        assert asv_machine_in_use(str(tmp_path)) == "vm"
