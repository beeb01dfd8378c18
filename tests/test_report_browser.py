"""The report in a real browser: headless Chromium, no network, every figure drawn, no console errors.

Runs where Debian's chromium and playwright are installed (CI installs both and sets
FUSEDBENCH_REQUIRE_BROWSER=1, which turns a missing browser into a failure, not a skip).
"""

import os
import shutil

import pytest

from fusedbench.report import write_report
from fusedbench.results import load_results

FIXTURE = os.path.join(os.path.dirname(__file__), "fixtures", "results-h200")
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
REQUIRED = os.environ.get("FUSEDBENCH_REQUIRE_BROWSER") == "1"
# As the workplace's probe runs Chromium: no sandbox as root, and none of its background traffic.
FLAGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def _playwright():
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        if REQUIRED:
            raise
        pytest.skip("needs playwright (pip install -e '.[dev]')")
    if CHROMIUM is None:
        if REQUIRED:
            pytest.fail("FUSEDBENCH_REQUIRE_BROWSER=1 but no chromium on PATH")
        pytest.skip("needs Debian's chromium (apt-get install chromium)")
    return sync_playwright


@pytest.mark.browser
def test_every_figure_renders_offline_without_console_errors(tmp_path):
    sync_playwright = _playwright()
    path = write_report(load_results(FIXTURE), out_dir=str(tmp_path))
    errors, requests = [], []
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
        context = browser.new_context(offline=True)
        page = context.new_page()
        page.on("console", lambda message: errors.append(message.text) if message.type == "error" else None)
        page.on("pageerror", lambda error: errors.append(str(error)))
        page.on("request", lambda request: requests.append(request.url))
        page.goto(f"file://{path}")
        page.wait_for_function(
            "() => { const divs = [...document.querySelectorAll('.plotly-graph-div')];"
            " return divs.length > 0 && divs.every(d => d.querySelector('svg.main-svg')); }",
            timeout=60_000,
        )
        figures = page.eval_on_selector_all(".plotly-graph-div", "divs => divs.length")
        drawn = page.eval_on_selector_all(".plotly-graph-div svg.main-svg", "svgs => svgs.length")
        heatmap_cells = page.eval_on_selector_all(".plotly-graph-div .hm, .plotly-graph-div image", "n => n.length")
        browser.close()
    assert figures == 2 + 1 + 1 + 4  # two heatmaps, the epilog cost, the roofline, four ladders
    assert drawn >= figures
    assert heatmap_cells >= 2
    assert errors == []
    assert all(url.startswith(("file:", "data:", "blob:")) for url in requests), requests
