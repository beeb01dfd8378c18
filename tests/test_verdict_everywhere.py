"""One verdict wherever it is shown: the report's gate section, machine by machine and suite by suite, says what
`fusedbench alert --format json` says, on the committed results and report, and on a red run."""

from __future__ import annotations

import html
import json
import re
import shutil
from pathlib import Path

import pytest

from fusedbench.cli import main
from fusedbench.report import render_report
from fusedbench.results.loader import load_results
from tests.test_alert_cli import MACHINE, copy_runs

ROOT = Path(__file__).parent.parent
SPAN = re.compile(r"<span id='[^']*-verdict' ([^>]*)>")
MACHINE_VERDICT = re.compile(r"<p id='([\w-]+)-verdict' data-verdict='([^']*)'><b>[^<]*</b>[^<]*<code>([^<]*)</code>")


def verdicts_on_page(page: str) -> dict[tuple[str, str], dict]:
    """(machine, suite) -> the verdict, alerts, compared and cells the report's gate section gives."""
    found = {}
    for attributes in SPAN.findall(page):
        data = {k: html.unescape(v) for k, v in re.findall(r"data-(\w+)='([^']*)'", attributes)}
        found[(data.pop("machine"), data.pop("suite"))] = data
    return found


STRIP = re.compile(r"<a class='status [^']*' href='#([^']*)' ([^>]*)>")


def strip_on_page(page: str) -> dict[tuple[str, str], dict]:
    """(machine, suite) -> the verdict and alerts of the status strip at the top of the page, and where it links."""
    found = {}
    for target, attributes in STRIP.findall(page):
        data = {k: html.unescape(v) for k, v in re.findall(r"data-(\w+)='([^']*)'", attributes)}
        found[(data.pop("machine"), data.pop("suite"))] = data | {"links": target}
    return found


def verdicts_of_alert(capsys, folder, machine: str, suites) -> dict[tuple[str, str], dict]:
    """The same, from `fusedbench alert --machine M --suite S ... --format json` (exit 1 for red, 0 otherwise)."""
    argv = ["alert", str(folder), "--machine", machine, "--format", "json"]
    code = main([*argv, *(arg for suite in suites for arg in ("--suite", suite))])
    document = json.loads(capsys.readouterr().out)
    assert code == (1 if document["outcome"] == "red" else 0)
    return {
        (machine, s["suite"]): {
            "verdict": s["outcome"],
            "alerts": str(len(s["alerts"])),
            "compared": str(s["compared"]),
            "cells": str(s["cells"]),
        }
        for s in document["suites"]
    }


@pytest.fixture(scope="module")
def committed(committed_results):
    return committed_results


def test_the_committed_report_says_what_alert_says_on_the_committed_results(capsys, monkeypatch, committed):
    import fusedbench.results.loader as loader

    monkeypatch.setattr(loader, "load_results", lambda folder, machines=None: committed)  # read once for all
    shown = verdicts_on_page((ROOT / "reports" / "index.html").read_text())
    machines = sorted({machine for machine, _ in shown})
    assert machines == ["h100-80gb-hbm3", "h200-141gb"]
    assert {suite for _, suite in shown} == {"quick", "default", "peers", "mlp"}
    said = {}
    for machine in machines:
        said |= verdicts_of_alert(capsys, ROOT / "results", machine, [s for m, s in shown if m == machine])
    assert shown == said
    strip = strip_on_page((ROOT / "reports" / "index.html").read_text())  # the first thing on the page says the same
    assert {k: {"verdict": v["verdict"], "alerts": v["alerts"]} for k, v in said.items()} == {
        k: {"verdict": v["verdict"], "alerts": v["alerts"]} for k, v in strip.items()
    }
    page = (ROOT / "reports" / "index.html").read_text()
    assert page.index("<nav id='status'") < page.index("<div id='summary'>")
    assert all(f"<span id='{box['links']}' " in page for box in strip.values())  # each box opens its suite's verdict
    # the machine's verdict is the one the command the page names prints (all its suites, not a plain alert's)
    page = (ROOT / "reports" / "index.html").read_text()
    found = MACHINE_VERDICT.findall(page)
    assert [machine for machine, _, _ in found] == machines
    for machine, outcome, command in found:
        argv = html.unescape(command).split()
        assert argv[:4] == ["fusedbench", "alert", "--machine", machine]
        main([argv[1], str(ROOT / "results"), *argv[2:], "--format", "json"])
        document = json.loads(capsys.readouterr().out)
        assert document["outcome"] == outcome
        for suite in document["suites"]:  # each suite's thresholds, and why they are those, as alert gives them
            assert f"<td>{html.escape(suite['preset_reason'], quote=False)}</td>" in page


def test_a_red_run_is_red_in_the_report_and_in_alert_alike(capsys, tmp_path):
    """cuBLASLt refuses DRELU_BGRAD's fused cell without a workspace: the tuned run misses a cell its GPU's run of
    the same commit timed."""
    tuned = f"{MACHINE}-tuned-fused-workspace-0"
    results = copy_runs(tmp_path / "results", ["67306e2d"])
    shutil.copytree(ROOT / "results" / tuned, results / tuned)
    page = render_report(load_results(str(results)), machines=[tuned])
    shown = verdicts_on_page(page)
    assert shown == verdicts_of_alert(capsys, results, tuned, ["quick"])
    assert shown[(tuned, "quick")]["verdict"] == "red" and shown[(tuned, "quick")]["alerts"] == "1"
    (box,) = strip_on_page(page).values()
    assert box["verdict"] == "red" and box["alerts"] == "1"
    assert (
        "<span class='word'>red, 1 alert(s)</span><br><span class='runs'>67306e2d against h100-80gb-hbm3@67306e2d"
        in page
    )
    # the thresholds the page judged by: the back-to-back quick runs' preset, the GPU's, as alert says
    line = f"preset '{MACHINE}/quick@6c07033', calibrated on this GPU's own A/A runs of the quick suite"
    assert f"<td>{html.escape(line, quote=False)}</td>" in page
