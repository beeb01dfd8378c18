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
    command = "pip install -e '.[cu13,torch,mlp]'"
    assert command in install["run"] and command in readme
    assert step(job, "alert")["if"] == "github.event_name == 'pull_request'"
    assert step(job, "alert")["run"].endswith(" --confirm")  # flagged cells measured again before the job goes red
    checkout = next(s for s in job["steps"] if s.get("uses", "").startswith("actions/checkout"))
    assert checkout["with"]["fetch-depth"] == 0  # the baseline's commit, for its code


def test_the_alert_step_refuses_in_one_line_where_there_is_no_gpu():
    alert = step(gpu_workflow()["jobs"]["bench"], "alert")
    env = os.environ | {"MACHINE": "h100-80gb-hbm3", "SUITE": "quick"}
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), os.environ["PATH"]])
    result = run_step(alert["run"], env)
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr.startswith("error: --confirm measures flagged cells again on this machine's GPU")


def run_step(command: str, env: dict) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", "-e", "-c", command], cwd=ROOT, env=env, capture_output=True, text=True)


def test_the_alert_step_run_on_the_committed_results_says_what_it_judged_and_writes_the_summary(tmp_path):
    """The step as the workflow runs it, from the checkout's root, on the H100's committed results. The default
    suite's newest runs are its burst A/A pair, 8fda10a against 6fd4f0d, two cards in two sessions, judged by the
    default suite's preset earned on that pair: green (in-sample), with the fusion inversions both runs share as
    warnings. The quick suite's back-to-back A/A runs, with 95e3ed8 as the candidate, are judged against the run
    before it, 884f601, by the preset earned at their version: green. The peers suite has no calibration of its
    own: not judged, never judged with another suite's thresholds. CI has no GPU: the step's first look, which
    --confirm starts from (and where nothing is flagged, ends with)."""
    alert = step(gpu_workflow()["jobs"]["bench"], "alert")
    alert = alert | {"run": alert["run"].removesuffix(" --confirm")}
    summary = tmp_path / "summary.md"
    env = os.environ | {
        "MACHINE": "h100-80gb-hbm3",
        "SUITE": "default",
        "GITHUB_STEP_SUMMARY": str(summary),
        "PATH": os.pathsep.join([str(Path(sys.executable).parent), os.environ["PATH"]]),
    }
    result = run_step(alert["run"], env)
    assert result.returncode == 0, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    assert lines[:2] == [
        "fusedbench alert: green (h100-80gb-hbm3: no alert)",
        "default: green; 2884 of 2884 cells compared",
    ]
    assert (
        "Blog: h100-80gb-hbm3@8fda10a1 against h100-80gb-hbm3@6fd4f0d4; Fp16Llm: h100-80gb-hbm3@49715220 " in lines[2]
    )
    assert "against h100-80gb-hbm3@8fda10a1; preset 'h100-80gb-hbm3/default@6fd4f0d'" in lines[2]
    assert "warning: 3 known fusion inversion(s)" in result.stderr
    assert summary.read_text().startswith("## fusedbench alert: green")
    summary.unlink()
    result = run_step(alert["run"] + " --candidate 95e3ed8", env | {"SUITE": "quick"})
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.splitlines()[:2] == [
        "fusedbench alert: green (h100-80gb-hbm3: no alert)",
        "quick: green; 30 of 30 cells compared",
    ]
    assert (
        "Quick: h100-80gb-hbm3@95e3ed8f against h100-80gb-hbm3@884f6018; preset 'h100-80gb-hbm3/quick@6c07033'"
        in result.stdout
    )
    assert summary.read_text().startswith("## fusedbench alert: green")
    summary.unlink()
    result = run_step(alert["run"], env | {"SUITE": "peers"})
    # the newest peers runs are the H100's A/A pairs its peers preset was earned on (in-sample: green): 15 groups
    # 7479c6f against 028e8a3, the two membound Compiled ones 57d8a23 against fcf16cf
    assert result.returncode == 0 and "peers: green; 2216 of 2216 cells compared" in result.stdout
    assert "TwoPass: h100-80gb-hbm3@7479c6f4 against h100-80gb-hbm3@028e8a31; Fp16MemboundCompiled" in result.stdout
    assert (
        "Bf16MemboundCompiled: h100-80gb-hbm3@57d8a237 against h100-80gb-hbm3@fcf16cf0; preset "
        "'h100-80gb-hbm3/peers@028e8a3', calibrated on this GPU's own A/A runs of the peers suite" in result.stdout
    )


def test_the_nightly_job_pairs_the_newest_stack_with_the_pinned_bisects_when_red_and_moves_the_pin_when_green():
    workflow = yaml.safe_load((WORKFLOWS / "nightly.yml").read_text())
    job = workflow["jobs"]["stack"]
    assert job["strategy"]["matrix"]["gpu"] == ["h100", "h200"] and job["strategy"]["fail-fast"] is False
    assert "cron" in workflow[True]["schedule"][0]  # yaml reads the key `on` as True
    ab = step(job, "ab")
    assert "fusedbench ab --stack pinned --stack newest" in ab["run"] and '[ "$code" -le 1 ] || exit' in ab["run"]
    red, green = (next(s for s in job["steps"] if s.get("name", "").startswith(n)) for n in ("Red", "Green"))
    assert red["if"] == "steps.ab.outputs.outcome == 'red'" and 'fusedbench bisect --stacks "$chain"' in red["run"]
    assert 'fusedbench stack create "$stack"' in red["run"]  # every stack of the chain made before the bisect
    assert red["run"].rstrip().endswith("exit 1")  # the job is red where the newest stack is
    assert green["if"] == "steps.ab.outputs.outcome == 'green'" and "gh pr create" in green["run"]


def test_every_fusedbench_command_of_the_workflows_parses():
    import re
    import shlex

    from fusedbench.cli import build_parser

    parser, commands = build_parser(), 0
    for path in sorted(WORKFLOWS.glob("*.yml")):
        for job in yaml.safe_load(path.read_text())["jobs"].values():
            for run in (s.get("run", "") for s in job["steps"]):
                # a line's command, or one in $( ), up to a pipe, a redirection, the $( )'s end or a comment
                for command in re.findall(r"(?:^\s*|\$\()(fusedbench [^|>)#\n]*)", run, re.MULTILINE):
                    words = shlex.split(
                        command.replace("$SUITE", "quick").replace('"$chain"', "a,b").replace('"$stack"', "a")
                    )
                    parser.parse_args(words[1:])
                    commands += 1
    assert commands >= 8
