"""The report's tables and sections beside the figures: alerts, advice, kernels, noise, the CSV download."""

from __future__ import annotations

import base64
import dataclasses
import io
import os
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from fusedbench.regressions.gate import Choice, judge
from fusedbench.report import render_report
from fusedbench.report.tables import (
    CSV_COLUMNS,
    advice_section,
    csv_link,
    multi_kernel_table,
    noisy_table,
    verdict_section,
)
from fusedbench.results.loader import load_results
from tests.test_alert_cli import MACHINE, QUICK_RUNS, copy_runs

ROOT = Path(__file__).parent.parent
PROVENANCE = os.path.join(os.path.dirname(__file__), "fixtures", "results-provenance")


@pytest.fixture(scope="module")
def quick(tmp_path_factory):
    return load_results(str(copy_runs(tmp_path_factory.mktemp("quick") / "results", QUICK_RUNS)))


def _newest(results):
    return results.cells["commit"][results.cells["commit"].str.startswith(QUICK_RUNS[-1])].iloc[0]


def _section(results) -> str:
    return verdict_section(judge(results, Choice(MACHINE, ("quick",))))


def test_the_gate_section_says_what_fusedbench_alert_says_of_the_newest_run(quick):
    section = _section(quick)
    assert f"<b>fusedbench alert: green ({MACHINE}: no alert)</b>" in section
    assert f"Quick: {MACHINE}@7dd23c51 against {MACHINE}@dcb8dbf7" in section
    assert "data-verdict='green' data-alerts='0' data-compared='30' data-cells='30'" in section
    # Synthetic for this test only: the newest run's fused cells 30% slower, every sample of them.
    fused = (quick.cells["commit"] == _newest(quick)) & (quick.cells["provider"] == "fused")
    cells = quick.cells.assign(time_s=quick.cells["time_s"].where(~fused, quick.cells["time_s"] * 1.3))
    detail = quick.detail.copy()
    for index in detail.index[fused]:
        detail.at[index, "raw"] = np.asarray(detail.at[index, "raw"]) * 1.3
    slower = _section(dataclasses.replace(quick, cells=cells, detail=detail))
    assert re.search(rf"<b>fusedbench alert: RED \({MACHINE}: \d+ alert\(s\)\): the build fails</b>", slower)
    assert "regression: " in slower and "fused" in slower and "data-verdict='red'" in slower


def test_a_first_run_of_a_new_measurement_is_not_judged_and_says_why(quick):
    first = dataclasses.replace(quick, cells=quick.cells, detail=quick.detail.assign(version="2: a new method"))
    first.detail.loc[quick.cells["commit"] != _newest(quick), "version"] = "1: the old method"
    section = _section(first)
    assert "data-verdict='not judged' data-alerts='0' data-compared='0' data-cells='30'" in section
    assert "no earlier run at the same benchmark version (the first runs of a changed measurement) (Quick)" in section


def test_the_csv_link_holds_the_runs_cells_as_a_gzipped_data_url():
    results = load_results(PROVENANCE)
    commit = results.cells["commit"].iloc[0]
    cells = results.cells.copy()
    cells.loc[cells.index[0], "flags"] = "multi-kernel slow-pass"  # synthetic: a value with a space
    link = csv_link(cells, "h200-141gb", commit)
    name, packed = re.match(r"<a download='([^']+)' href='data:application/gzip;base64,([^']*)'>", link).groups()
    assert name == f"h200-141gb-{commit[:8]}.csv.gz"
    table = pd.read_csv(io.BytesIO(base64.b64decode(packed)), compression="gzip")  # as a user reads the download
    assert csv_link(cells, "h200-141gb", commit) == link  # the same page from the same results
    assert list(table.columns) == CSV_COLUMNS and len(table) == len(results.cells)
    essential = ["epilog", "dtype", "m", "k", "n", "provider", "status", "time_s", "ci_low_s", "ci_high_s"]
    assert {*essential, "samples", "rel_iqr", "kernels", "flags"} <= set(table.columns)
    first = results.cells.iloc[0]
    assert table["time_s"].iloc[0] == pytest.approx(first["time_s"], rel=1e-3)
    assert table["flags"].iloc[0] == "multi-kernel slow-pass"


def test_multi_kernel_cells_are_grouped_by_epilog_dtype_and_provider():
    cells = pd.DataFrame(
        {
            "epilog": ["DRELU", "DRELU", "RELU"],
            "dtype": ["bf16", "bf16", "bf16"],
            "provider": ["fused", "fused", "fused"],
            "kernels": [2, 2, 1],
            "m": [1, 2, 3],
            "kernel_names": ["gemm_a + epilogue", "gemm_b + epilogue", "gemm"],
            "flags": ["multi-kernel", "multi-kernel slow-pass", ""],
        }
    )
    table = multi_kernel_table(cells)
    assert "2 cells, by epilog, dtype and provider in 1 row<" in table
    assert re.search(
        r"<td>DRELU</td>\s*<td>bf16</td>\s*<td>fused</td>\s*<td class=n>2</td>\s*<td class=n>2</td>", table
    )
    assert "gemm_<wbr>a + epilogue" in table and "gemm_b" not in table  # a wrap point after each _
    assert "every fused cell ran as one kernel" in multi_kernel_table(cells.iloc[2:])


def test_noisy_cells_come_noisiest_first_in_percent_and_milliseconds():
    results = load_results(PROVENANCE)
    cells = results.cells.copy()
    cells.loc[cells.index[:2], "rel_iqr"] = [0.12, 0.31]  # synthetic noise for this test only
    table = noisy_table(cells)
    assert table.index("31.0%") < table.index("12.0%")
    noisy = ((cells["rel_iqr"] > 0.1) & (cells["status"] == "ok")).sum()
    assert noisy <= 12 and table.startswith(f"<details open><summary>{noisy} cells with a relative IQR above 10%")
    cells["rel_iqr"] = 0.5  # every cell noisy: a long table, folded under its summary line
    assert noisy_table(cells).startswith(f"<details><summary>{(cells['status'] == 'ok').sum()} cells")
    assert f"<td class=n>{cells['time_s'].iloc[1] * 1e3:.4g}</td>" in table


def test_advice_comes_from_paired_runs_or_says_why_not():
    results = load_results(PROVENANCE)
    section = advice_section(results, "h200-141gb")
    assert re.search(r"\d+ rules \(", section) and "unfused / fused (95% interval)" in section
    nothing = pd.DataFrame(  # synthetic: a class where neither fused nor unfused was timed
        [{"dtype": "fp8", "epilog": "BGRADA", "shape_class": "seed", "advice": "unfused", "ratio": np.nan,
          "ci_low": np.nan, "ci_high": np.nan, "why": "unfused: not supported", "commit": "c" * 40}]
    )  # fmt: skip
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr("fusedbench.report.tables.advise", lambda results, machines: nothing)
        section = advice_section(results, "h200-141gb")
        assert "<td>n/a: not timed</td>" in section and "rules (1 unfused), from commit cccccccc<" in section
        two = pd.concat([nothing, nothing.assign(epilog="BGRADB", commit="a" * 40 + "," + "b" * 40)])
        patch.setattr("fusedbench.report.tables.advise", lambda results, machines: two)
        assert "from commits aaaaaaaa, bbbbbbbb, cccccccc<" in advice_section(results, "h200-141gb")  # each named
    unpaired = load_results(os.path.join(os.path.dirname(__file__), "fixtures", "results-h200"))
    assert advice_section(unpaired, "h200-141gb").startswith("<p>No advice: no ladder results timed in paired")


def test_a_tuned_machine_is_shown_only_where_named(quick):
    tuned = quick.cells.assign(machine=f"{MACHINE}-tuned-fused-algorithm-7")
    both = dataclasses.replace(
        quick,
        cells=pd.concat([quick.cells, tuned], ignore_index=True),
        detail=pd.concat([quick.detail] * 2, ignore_index=True),
    )
    page = render_report(both, commits=[QUICK_RUNS[-1]])
    assert f"<h2 id='{MACHINE}-tuned" not in page and f"<h2 id='{MACHINE}'>" in page
    named = render_report(both, machines=[f"{MACHINE}-tuned-fused-algorithm-7"], commits=[QUICK_RUNS[-1]])
    assert f"<h2 id='{MACHINE}-tuned-fused-algorithm-7'>" in named


def test_a_table_wraps_kernel_names_after_their_punctuation_and_never_cuts_an_epilog_name():
    from fusedbench.report.tables import table_html

    frame = pd.DataFrame(
        {"epilog": ["DRELU_BGRAD"], "config (most chosen)": ["BLOCK_M=128,num_warps=8"], "fused < unfused": ["a<b & c"]}
    )
    page = table_html(frame, breakable=("config (most chosen)",))
    assert "<td>DRELU_BGRAD</td>" in page  # no wrap point: the browser keeps the name whole
    assert "<td>BLOCK_<wbr>M=<wbr>128,<wbr>num_<wbr>warps=<wbr>8</td>" in page
    assert "<td>a&lt;b &amp; c</td>" in page and "<th>fused &lt; unfused</th>" in page  # escaped, header too
    from fusedbench.report import _STYLE

    assert "anywhere" not in _STYLE  # which cut names at any letter


def test_a_tables_numbers_are_right_aligned_and_its_words_are_not():
    """Columns of numbers, as numbers or as the tables write them (1.03x, +2.1%, 23.9 ms, an interval after one, n/a
    where there is none), line up on the right; a column with one word in it stays on the left."""
    from fusedbench.report import _STYLE
    from fusedbench.report.tables import table_html

    frame = pd.DataFrame(
        {
            "epilog": ["RELU", "DRELU_BGRAD"],
            "fused over unfused": ["1.03x", "0.90x"],
            "rows": [3, 40],
            "change": ["+2.1%", "n/a"],
            "side by side": ["x1.022 [1.001, 1.035]", "\u22124.0%"],
            "verdict": ["2.1%", "slower"],
        }
    )
    page = table_html(frame)
    header = re.findall(r"<th( class=n)?>([^<]*)</th>", page)
    assert [name for klass, name in header if klass] == ["fused over unfused", "rows", "change", "side by side"]
    assert "<td class=n>0.90x</td>" in page and "<td class=n>n/a</td>" in page and "<td>slower</td>" in page
    assert "<td>RELU</td>" in page and "<td>2.1%</td>" in page
    assert "td.n { text-align: right" in _STYLE.replace("th.n, ", "")
