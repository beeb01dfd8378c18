"""The CI workflows: valid for actionlint, the GPU matrix as the fleet, and the alert step run for real
against the committed results (what a pull request's GPU job would print and exit with)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).parent.parent
WORKFLOWS = ROOT / ".github" / "workflows"


def gpu_workflow() -> dict:
    return yaml.safe_load((WORKFLOWS / "gpu.yml").read_text())


def step(job: dict, step_id: str) -> dict:
    (found,) = [s for s in job["steps"] if s.get("id") == step_id]
    return found


def test_actionlint_finds_nothing_in_the_workflows():
    actionlint = shutil.which(
        "actionlint", path=os.pathsep.join([str(Path(sys.executable).parent), os.environ["PATH"]])
    )
    assert actionlint, "actionlint is missing: install the dev extra (pip install -e '.[dev]')"
    result = subprocess.run([actionlint, "-color=false"], cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_gpu_matrix_is_the_fleet_each_model_on_its_own_self_hosted_runner():
    job = gpu_workflow()["jobs"]["bench"]
    assert job["strategy"]["matrix"]["gpu"] == ["h100", "h200"]
    assert job["runs-on"] == ["self-hosted", "linux", "${{ matrix.gpu }}"]
    assert job["strategy"]["fail-fast"] is False  # one GPU's regression does not cancel the other's run


def test_the_gpu_job_installs_with_the_readme_command_and_alerts_only_on_pull_requests():
    job = gpu_workflow()["jobs"]["bench"]
    install = next(s for s in job["steps"] if s.get("name", "").startswith("Install"))
    readme = (ROOT / "README.md").read_text()
    command = "pip install -e '.[cu13,torch]'"
    assert command in install["run"] and command in readme
    assert step(job, "alert")["if"] == "github.event_name == 'pull_request'"


def test_the_alert_step_run_on_the_committed_results_is_green_and_writes_the_summary(tmp_path):
    """The step as the workflow runs it, from the checkout's root: on the H100's newest run (6006c05, the cutlass
    groups with ten epilogs), red: the machine lent that day ran the groups' fused and cutlass-evt cells 3-9% slower
    than on 63e2c10, their first run, which is green with nothing to compare, and so is 28888e2 (the first of the
    triton groups);
    on c8c600b (revision 3 of every group but Blog), green, Blog compared and the rest named incomparable; on
    77f3acc (the first run of revision 2, which changed them all), green with nothing to compare; and with the
    newest run of the A/A quick runs as the candidate, compared with the nearest earlier one, green."""
    machine = "h100-80gb-hbm3"
    alert = step(gpu_workflow()["jobs"]["bench"], "alert")
    summary = tmp_path / "summary.md"
    env = os.environ | {
        "MACHINE": machine,
        "GITHUB_STEP_SUMMARY": str(summary),
        "PATH": os.pathsep.join([str(Path(sys.executable).parent), os.environ["PATH"]]),
    }
    result = subprocess.run(["bash", "-e", "-c", alert["run"]], cwd=ROOT, env=env, capture_output=True, text=True)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "h100-80gb-hbm3@6006c052 against h100-80gb-hbm3@63e2c104" in result.stdout
    assert "4 alert(s): the build fails" in result.stdout and "group Fp16MemboundCutlass (fused)" in result.stdout
    assert summary.read_text().startswith("## fusedbench alert: RED")
    summary.unlink()
    result = subprocess.run(["bash", "-e", "-c", alert["run"] + " --candidate 63e2c10"], cwd=ROOT, env=env,
                            capture_output=True, text=True)  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    assert (
        "no alert: nothing to compare" in result.stdout
        and "Bf16MemboundCutlass, Bf16SeedCutlass, Fp16MemboundCutlass, Fp16SeedCutlass" in result.stderr
    )
    summary.unlink()
    result = subprocess.run(["bash", "-e", "-c", alert["run"] + " --candidate 28888e2"], cwd=ROOT, env=env,
                            capture_output=True, text=True)  # fmt: skip
    assert (
        result.returncode == 0 and "no alert: nothing to compare" in result.stdout and "Fp16SeedPeers" in result.stderr
    )
    summary.unlink()
    command = alert["run"] + " --candidate c8c600b"
    result = subprocess.run(["bash", "-e", "-c", command], cwd=ROOT, env=env, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "against h100-80gb-hbm3@77f3acc" in result.stdout and "4 same" in result.stdout
    assert "Fp16Seed, Fp8Seed, Tf32Seed incomparable" in result.stderr
    assert "no alert: nothing failed" in result.stdout
    summary.unlink()
    command = alert["run"] + " --candidate 77f3acc"
    result = subprocess.run(["bash", "-e", "-c", command], cwd=ROOT, env=env, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "no alert: nothing to compare" in result.stdout
    assert summary.read_text().startswith("## fusedbench alert: green (nothing to compare)")
    summary.unlink()
    command = alert["run"] + " --candidate 95e3ed8"
    result = subprocess.run(["bash", "-e", "-c", command], cwd=ROOT, env=env, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "no alert: nothing failed" in result.stdout
    text = summary.read_text()
    assert text.startswith("## fusedbench alert: green") and text.count(f"**{machine}@") == 2
