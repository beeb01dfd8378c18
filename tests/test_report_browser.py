"""The report in a real browser: headless Chromium, no network, every figure drawn, no console errors, and
the structure a reader relies on, read from what plotly drew: one colour range for every speedup heatmap,
grey marks exactly where the analysis cannot tell fused from its baseline, anchors that resolve, the status strip
saying the gate's verdicts, figures named for screen readers, and a ladder whose view switch a keyboard reaches
and works.

Runs where Debian's chromium and playwright are installed (CI installs both and sets
FUSEDBENCH_REQUIRE_BROWSER=1, which turns a missing browser into a failure, not a skip).
"""

import os

import pytest

from fusedbench.analysis.speedups import indistinct, speedups
from fusedbench.catalog.providers import BASELINES
from fusedbench.regressions.gate import judge_every_suite
from fusedbench.report import write_report
from fusedbench.results.loader import load_results
from tests.browser import ALL_DRAWN, CHROMIUM, FLAGS, load_seconds

FIXTURES = os.path.join(os.path.dirname(__file__), "fixtures")
PAIRED = os.path.join(FIXTURES, "results-provenance")  # timed in paired rounds: speedups have intervals
SHAPES = os.path.join(FIXTURES, "results-h200")  # four shapes: a ladder with a dropdown
REQUIRED = os.environ.get("FUSEDBENCH_REQUIRE_BROWSER") == "1"


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


def _open(playwright, path: str, errors: list, requests: list, width: int = 1280):
    browser = playwright.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
    page = browser.new_context(offline=True, viewport={"width": width, "height": 900}).new_page()
    page.on("console", lambda message: errors.append(message.text) if message.type == "error" else None)
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.on("request", lambda request: requests.append(request.url))
    page.goto(f"file://{path}")
    page.wait_for_function(ALL_DRAWN, timeout=60_000)
    return browser, page


# What plotly drew, per figure div: each speedup trace's colour range and ticks, and the (epilog, column)
# cells of the grey cover drawn under it (a cover comes just before the speedup trace it greys).
DRAWN_HEATMAPS = """() => [...document.querySelectorAll('.plotly-graph-div')].flatMap(d => d.data
    .map((t, i) => [t, d.data[i - 1]])
    .filter(([t]) => t.type === 'heatmap' && String(t.name).startsWith('over_'))
    .map(([t, before]) => ({
        figure: d.id,
        baseline: t.name.slice(5),
        range: [t.zmin, t.zmax, t.colorbar.ticktext],
        greyed: before && before.name === 'interval includes 1x'
            ? before.z.flatMap((row, i) => row.flatMap((v, j) => v === null ? [] : [[before.y[i], before.x[j]]]))
            : [],
    })))"""


# The status strip at the top of the page, box by box, with the verdict each box says.
STATUS_STRIP = """() => [...document.querySelectorAll('#status a')].map(a => ({machine: a.dataset.machine,
    suite: a.dataset.suite, verdict: a.dataset.verdict, alerts: a.dataset.alerts}))"""


# Every figure's toolbar buttons, by their titles (no button may send the data anywhere).
MODEBAR_TITLES = """() => [...document.querySelectorAll('.plotly-graph-div')]
    .map(d => [...d.querySelectorAll('.modebar-btn')].map(b => b.getAttribute('data-title')))
    .filter(titles => titles.length)"""


# The figures whose margins plotly resized after drawing them (and so drew them twice): each should have had what it
# needed reserved (report.plot_margins).
RESIZED = """() => [...document.querySelectorAll('.plotly-graph-div')].filter(d => ['l', 'r', 't', 'b']
    .some(side => Math.abs(d._fullLayout._size[side] - d._fullLayout.margin[side]) > 1)).map(d => d.id)"""


# The headline tables (between the Headline and Contents headings) wider than the box they scroll in.
HEADLINE_SCROLLED = """() => [...document.querySelectorAll('table')]
    .filter(t => document.getElementById('headline').compareDocumentPosition(t) & Node.DOCUMENT_POSITION_FOLLOWING)
    .filter(t => t.compareDocumentPosition(document.getElementById('contents')) & Node.DOCUMENT_POSITION_FOLLOWING)
    .filter(t => t.scrollWidth > t.clientWidth + 1).map(t => [t.scrollWidth, t.clientWidth])"""


@pytest.mark.browser
def test_the_report_draws_offline_one_colour_range_grey_where_the_analysis_says_and_every_anchor_resolves(
    tmp_path,
):
    sync_playwright = _playwright()
    results = load_results(PAIRED)
    path = write_report(results, out_dir=str(tmp_path))
    errors, requests = [], []
    with sync_playwright() as playwright:
        browser, page = _open(playwright, path, errors, requests)
        drawn = page.evaluate(DRAWN_HEATMAPS)
        links = page.eval_on_selector_all("a[href^='#']", "as => as.map(a => a.getAttribute('href').slice(1))")
        missing = page.evaluate("ids => ids.filter(id => !document.getElementById(id))", links)
        viewport = page.evaluate("() => document.querySelector('meta[name=viewport]').content")
        strip = page.evaluate(STATUS_STRIP)
        labels = page.evaluate("() => [...document.querySelectorAll('[role=figure]')].map(f => f.ariaLabel)")
        figures = page.evaluate("() => document.querySelectorAll('.plotly-graph-div').length")
        page.locator(".plotly-graph-div").first.hover()  # the toolbar is drawn on hover
        modebars = page.evaluate(MODEBAR_TITLES)
        scrolled = page.evaluate(HEADLINE_SCROLLED)
        resized = page.evaluate(RESIZED)
        print(f"\nreport of {PAIRED}: every figure drawn in {load_seconds(browser, path):.2f} s (one load)")
        browser.close()
    assert errors == []
    assert all(url.startswith(("file:", "data:", "blob:")) for url in requests), requests
    assert links and missing == []
    assert viewport == "width=device-width, initial-scale=1"  # a phone lays the page out at its own width
    assert modebars and not [title for titles in modebars for title in titles if "Share" in title or "Cloud" in title]
    assert all(titles == ["Download plot as a PNG", "Reset axes"] for titles in modebars)  # two tab stops a figure
    assert scrolled == []  # at 1280 px the headline tables are read whole, without a sideways scroll
    assert resized == []  # every figure drawn once: its margins were reserved before plotly drew it
    assert len(labels) == figures and all(labels)  # a screen reader names every figure by its title
    assert any(label.startswith("What fusion buys") for label in labels)
    verdicts = judge_every_suite(results, ["h200-141gb"])  # the first thing on the page: the gate's verdicts
    assert strip == [
        {"machine": v.machine, "suite": s.suite, "verdict": s.outcome.value, "alerts": str(len(s.alerts))}
        for v in verdicts
        for s in v.suites
    ]
    assert [(t["figure"], t["baseline"]) for t in drawn] == [("h200-141gb-heatmap", b) for b in BASELINES[::-1]]
    ranges = {(zmin, zmax, tuple(ticks)) for zmin, zmax, ticks in (t["range"] for t in drawn)}
    assert ranges == {(-1, 1, ("0.5x or less", "0.71x", "1x", "1.41x", "2x or more"))}
    table = speedups(results.cells, results.detail)
    for trace in drawn:
        unclear = table[indistinct(table, trace["baseline"])]
        assert {tuple(cell) for cell in trace["greyed"]} == set(zip(unclear["epilog"], unclear["shape"], strict=True))
    assert sum(len(trace["greyed"]) for trace in drawn) == 4  # 3 over unfused, 1 over textbook


@pytest.mark.browser
def test_every_figure_of_the_committed_report_is_drawn_once_in_the_margins_reserved_for_it():
    """Every kind of figure the report draws (peers, MLP steps, machines, trends as well): none has a margin plotly
    grows after drawing it at the page's width, which would draw it a second time."""
    sync_playwright = _playwright()
    path = os.path.join(os.path.dirname(FIXTURES), os.pardir, "reports", "index.html")
    errors, requests = [], []
    with sync_playwright() as playwright:
        browser, page = _open(playwright, os.path.abspath(path), errors, requests)
        resized = page.evaluate(RESIZED)
        kinds = page.evaluate("() => [...document.querySelectorAll('.plotly-graph-div')].map(d => d.id)")
        peers = page.evaluate(
            "() => [...document.querySelectorAll('optgroup')].filter(g => g.label.startsWith('peers '))"
        )
        browser.close()
    assert resized == [] and errors == []
    assert {
        kind
        for kind in ("heatmap", "ladder", "trend", "mlp-step", "machines", "headline")
        if any(kind in k for k in kinds)
    } == {"heatmap", "ladder", "trend", "mlp-step", "machines", "headline"}
    assert peers  # the peers runs' heatmaps and ladders: views of the machines' own figures


@pytest.mark.browser
def test_the_ladders_view_switch_is_reached_and_worked_by_keyboard_and_redraws_it_at_the_chosen_shape(tmp_path):
    sync_playwright = _playwright()
    path = write_report(load_results(SHAPES), out_dir=str(tmp_path))
    errors, requests = [], []
    with sync_playwright() as playwright:
        browser, page = _open(playwright, path, errors, requests)
        before = page.evaluate("() => document.getElementById('h200-141gb-ladder').layout.title.text")
        tabs = 0
        while page.evaluate("() => document.activeElement.id") != "h200-141gb-ladder-view":
            page.keyboard.press("Tab")  # from the top of the page, as a keyboard user gets there
            tabs += 1
            assert tabs < 100, "the ladder's view switch is not in the tab order"
        page.keyboard.press("ArrowDown")
        page.keyboard.press("ArrowDown")  # the third shape
        page.wait_for_function(
            "() => document.getElementById('h200-141gb-ladder').layout.title.text.includes('(16384,512)')"
        )
        fused = page.evaluate("() => document.getElementById('h200-141gb-ladder').data.find(t => t.name === 'fused')")
        label = page.evaluate("() => document.getElementById('h200-141gb-ladder').closest('[role=figure]').ariaLabel")
        chosen = page.evaluate("() => document.getElementById('h200-141gb-ladder-view').selectedOptions[0].text")
        browser.close()
    assert "(8192,256)x(256,65536)" in before
    assert "(16384,512)" in label and "<" not in label  # a screen reader names the view chosen, as text
    assert chosen.startswith("fp16: ")  # the closed switch says which dtype
    cells = load_results(SHAPES).cells.query("provider == 'fused' and m == 16384 and k == 512 and n == 16384")
    times = cells.set_index("epilog").loc[fused["x"], "time_s"]
    assert fused["y"] == [float(f"{t * 1e3:.3g}") for t in times]  # this run measured no ceilings: ms
    assert errors == []


# The table cells that hold an epilog's name, each with the number of lines it was laid out on.
EPILOG_CELL_LINES = """names => [...document.querySelectorAll('td')].filter(td => names.includes(td.textContent))
    .map(td => { const range = document.createRange(); range.selectNodeContents(td);
                 return [td.textContent, range.getClientRects().length]; })"""


# Each figure's drawn width (its plotly div's) and the width of the box it scrolls in.
FIGURE_BOXES = """() => [...document.querySelectorAll('[role=figure]')]
    .map(box => [box.querySelector('.plotly-graph-div').offsetWidth, box.clientWidth])"""


@pytest.mark.browser
def test_on_a_phone_the_page_is_as_wide_as_the_screen_and_no_epilog_name_is_cut(tmp_path):
    from fusedbench.catalog.epilogs import EPILOGS

    sync_playwright = _playwright()
    path = write_report(load_results(PAIRED), out_dir=str(tmp_path))
    errors, requests = [], []
    with sync_playwright() as playwright:
        browser, page = _open(playwright, path, errors, requests, width=390)
        page.evaluate("() => document.querySelectorAll('details').forEach(d => d.open = true)")
        width = page.evaluate("() => document.documentElement.scrollWidth")
        lines = page.evaluate(EPILOG_CELL_LINES, [epilog.name for epilog in EPILOGS])
        page.evaluate("() => document.querySelector('ul').insertAdjacentHTML('beforeend', '<li>' + 'RELU/'.repeat(60))")
        labelled = page.evaluate("() => document.documentElement.scrollWidth")  # a cell label longer than a line
        page.evaluate("() => document.querySelector('.card td').append('Fp32MemboundWalkthrough'.repeat(2))")
        carded = page.evaluate("() => document.documentElement.scrollWidth")  # a card's table wider than the screen
        figures = page.evaluate(FIGURE_BOXES)
        browser.close()
    assert width == labelled == carded == 390  # wide tables and figures scroll inside themselves; long labels wrap
    # each figure is laid out as wide as its labels and values need, and scrolls sideways inside its box
    assert figures and all(drawn >= 900 and box < 390 for drawn, box in figures), figures
    assert lines and all(count == 1 for _, count in lines), [cell for cell in lines if cell[1] > 1]


@pytest.mark.browser
def test_a_long_table_is_sorted_by_keyboard_on_a_number_column_and_filtered_by_what_is_typed(tmp_path):
    import pandas as pd

    from fusedbench.report.tables import FOLD_ROWS, TABLE_SCRIPT, table_html

    sync_playwright = _playwright()
    rows = FOLD_ROWS + 8
    frame = pd.DataFrame(
        {
            "epilog": [("RELU", "GELU_BIAS", "DRELU_BGRAD")[i % 3] for i in range(rows)],
            "change": [f"{(-1) ** i * i * 1.5:+.1f}%" for i in range(rows)],  # +0.0%, -1.5%, +3.0%, ...
            "median (ms)": [f"{1000 / (i + 1):.4g}" for i in range(rows)],  # 1000, 500, 333.3, ...: 4 digits, as shown
            "shape": [("(16384,256)x(256,16384)", "(8192,256)x(256,65536)", "")[i % 3] for i in range(rows)],
        }
    )
    frame.loc[3, "change"] = "n/a"
    path = tmp_path / "table.html"
    path.write_text(f"<!doctype html><html><body>{table_html(frame)}<script>{TABLE_SCRIPT}</script></body></html>")
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
        page = browser.new_context(offline=True).new_page()
        errors = []
        page.on("pageerror", lambda error: errors.append(str(error)))
        page.goto(f"file://{path}")
        column = (
            "() => [...document.querySelectorAll('tbody tr')].filter(r => !r.hidden).map(r => r.cells[1].textContent)"
        )
        page.keyboard.press("Tab")  # the filter box
        page.keyboard.press("Tab")  # the first header's button
        page.keyboard.press("Tab")  # the change column's
        page.keyboard.press("Enter")
        ascending = page.evaluate(column)
        sort = page.evaluate("() => document.querySelectorAll('th')[1].getAttribute('aria-sort')")
        page.keyboard.press("Enter")
        descending = page.evaluate(column)
        page.click("th:nth-child(4) button")  # text, numbers in it by their value: 8192 before 16384, an empty one last
        shapes = page.evaluate("() => [...document.querySelectorAll('tbody tr')].map(r => r.cells[3].textContent)")
        page.focus("input[type=search]")
        page.keyboard.type("gelu")
        kept = page.evaluate("() => [...document.querySelectorAll('tbody tr')].filter(r => !r.hidden).length")
        browser.close()
    values = [float(v.rstrip("%")) for v in frame["change"] if v != "n/a"]
    assert sort == "ascending" and ascending[:-1] == [f"{v:+.1f}%" for v in sorted(values)] and ascending[-1] == "n/a"
    assert descending[:-1] == [f"{v:+.1f}%" for v in sorted(values, reverse=True)] and descending[-1] == "n/a"
    assert kept == sum(e == "GELU_BIAS" for e in frame["epilog"]) and errors == []
    assert shapes == sorted(frame["shape"], key=lambda s: (s == "", s.startswith("(16384")))


def test_only_a_table_longer_than_the_fold_is_sortable():
    import pandas as pd

    from fusedbench.report.tables import FOLD_ROWS, SORTABLE, table_html

    assert SORTABLE in table_html(pd.DataFrame({"a": range(FOLD_ROWS + 1)}))
    assert SORTABLE not in table_html(pd.DataFrame({"a": range(FOLD_ROWS)}))
