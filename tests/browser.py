"""Headless Chromium for the report's browser test, and its load time as a person would wait for it.

`python tests/browser.py reports/index.html` prints the median of 5 loads: from navigation to every
plotly figure drawn (`svg.main-svg` in every figure div), measured by the page's own clock.
"""

from __future__ import annotations

import shutil
import statistics
import sys

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
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
# The whole document parsed (a figure's script runs as the parser reaches it) and every figure's SVG there.
ALL_DRAWN = (
    "() => { const divs = [...document.querySelectorAll('.plotly-graph-div')];"
    " return document.readyState === 'complete' && divs.length > 0"
    " && divs.every(d => d.querySelector('svg.main-svg')); }"
)


def load_seconds(browser, path: str) -> float:
    """One cold load in a fresh context: seconds from navigation until every figure is drawn."""
    context = browser.new_context(offline=True, viewport={"width": 1280, "height": 900})
    page = context.new_page()
    page.goto(f"file://{path}", wait_until="commit")
    page.wait_for_function(ALL_DRAWN, polling="raf", timeout=120_000)
    seconds = page.evaluate("performance.now()") / 1000
    context.close()
    return seconds


def main(path: str, loads: int = 5) -> None:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
        times = [load_seconds(browser, path) for _ in range(loads)]
        browser.close()
    print(
        f"{path}: every figure drawn in {statistics.median(times):.2f} s (median of {loads}: "
        + ", ".join(f"{t:.2f}" for t in times)
        + ")"
    )


if __name__ == "__main__":
    main(sys.argv[1])
