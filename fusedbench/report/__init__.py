"""`fusedbench report`: one self-contained HTML file (plotly's JS embedded once) from asv results.

The report only draws: every number comes from `fusedbench.analysis` on the tidy table of
`fusedbench.results`. Every section and figure has a stable HTML id named after what it shows
(`#h100-80gb-hbm3-fp16-over-unfused`), so links into a report keep working and the same results
give the same bytes.
"""

from __future__ import annotations

import html
import importlib.util
import os
import re

import pandas as pd
import plotly.graph_objects as go
from plotly.offline import get_plotlyjs

from fusedbench.analysis import (
    INVERSION,
    INVERSIONS_COLUMN,
    headline,
    ladder_cells,
    noisy_cells,
    speedups,
    with_shape,
)
from fusedbench.errors import FusedbenchError
from fusedbench.files import check_writable_file, check_writable_folder, write_bytes_atomically, write_text_atomically
from fusedbench.model import Status
from fusedbench.providers import BASELINES
from fusedbench.records import GroupRecord
from fusedbench.report.figures import (
    epilog_cost_figure,
    history_figure,
    ladder_figure,
    machines_figure,
    roofline_figure,
    speedup_heatmap,
)
from fusedbench.results import ResultSet, select_cells

REPORT_NAME = "index.html"
PNG_WIDTH, PNG_SCALE = 1100, 2  # sharp on HiDPI screens

GLOSSARY = {
    "textbook": "the seed blog's naive code: the matmul, then each pointwise step as its own cupy (or torch) "
    "statement, in the blog's layout",
    "unfused": "the best honest version without fusion: the same cuBLASLt GEMM, then one pass at copy bandwidth "
    "for all the pointwise work, and one row reduction per bias gradient",
    "fused": "the cuBLASLt epilog through nvmath-python, the algorithm cuBLASLt's heuristic ranks first",
    "fused-autotuned": "the same epilog with the algorithm Matmul.autotune picks",
    "gemm": "the plain GEMM alone, no epilog: what the epilog's cost is measured against",
    "DEFAULT": "the epilog that does nothing: the plain GEMM through the fused provider (a control)",
    "AUX": "an epilog that also writes its pre-activation (GELU) or ReLU bit-mask for the backward pass",
    "DRELU / DGELU": "the backward epilogs: the gradient masked by ReLU's mask or scaled by GELU's derivative",
    "BGRADA / BGRADB": "the bias gradient of A or B: a row sum of an operand, fused into the weight-gradient GEMM",
    "speedup": "the baseline's time over fused's time (above 1x: fusion pays), the median of round-by-round "
    "ratios where the run paired its samples",
    "grey cell": "the speedup's paired 95% interval includes 1x: fused and its baseline are not told apart",
    "epilog cost": "fused / gemm - 1: what the epilog adds to the plain GEMM",
    "floor": "max(FLOPs / the run's GEMM rate, bytes / the run's copy bandwidth): the least time the work can take",
    "arithmetic intensity": "the GEMM's FLOPs per element of A, B and D it moves, 2MNK / (MK + KN + MN)",
}

_STYLE = """
body { font-family: system-ui, sans-serif; margin: 2rem auto; max-width: 1200px; color: #222; }
h1 { margin-bottom: 0.2rem; } h2 { border-bottom: 1px solid #ddd; padding-bottom: 0.3rem; margin-top: 2.5rem; }
table { border-collapse: collapse; margin: 0.5rem 0 1rem; font-size: 0.9rem; }
th, td { border: 1px solid #ddd; padding: 0.25rem 0.6rem; text-align: left; }
th { background: #f5f5f5; } .card { display: inline-block; vertical-align: top; margin: 0 1rem 1rem 0; }
.muted { color: #666; font-size: 0.9rem; }
.toc { columns: 3; font-size: 0.9rem; } .toc .level-3 { margin-left: 1rem; }
.glossary dt { font-weight: 600; } .glossary dd { margin: 0 0 0.4rem 1rem; }
"""


def commits_in_order(cells: pd.DataFrame, records: list[GroupRecord], machine: str) -> list[str]:
    """A machine's commits, oldest run first (by record; commits without one come first)."""
    present = list(dict.fromkeys(cells[cells["machine"] == machine]["commit"]))
    ordered = [r.commit for r in records if r.machine == machine and r.commit in present]
    ordered = list(dict.fromkeys(reversed(ordered)))[::-1]  # keep each commit's latest run
    return [c for c in present if c not in ordered] + ordered


def _table(frame: pd.DataFrame) -> str:
    return frame.to_html(index=False, border=0, na_rep="", escape=True, float_format=lambda v: f"{v:.4g}")


def anchor(*parts) -> str:
    """A stable HTML id from what a section or figure shows: 'h100-80gb-hbm3-fp16-over-unfused'."""
    return re.sub(r"[^a-z0-9]+", "-", "-".join(str(part) for part in parts).lower()).strip("-")


class _Figures:
    """Figures as HTML divs with the stable id they are given (so the same results give the same bytes)."""

    def __init__(self) -> None:
        self.count = 0

    def __call__(self, figure: go.Figure, div_id: str) -> str:
        self.count += 1
        return figure.to_html(
            full_html=False,
            include_plotlyjs=False,
            div_id=div_id,
            config={"displaylogo": False, "modeBarButtonsToRemove": ["sendDataToCloud"]},
        )


def summary(headlines: dict[str, pd.DataFrame]) -> str:
    """The answer in a few sentences, from each machine's headline table: what fusion buys against the best
    unfused version and the textbook, where it loses, and how the machines differ."""
    sentences = []
    for machine, top in headlines.items():
        for row in top[top["worst"] != ""].to_dict("records"):
            sentences.append(
                f"On <b>{html.escape(machine)}</b>, {html.escape(row['dtype'])}: fused epilogs run "
                f"{row['fused over unfused (geomean)']} as fast as the best unfused version "
                f"({row['fused over unfused (range)']} over the workloads) and {row['fused over textbook (geomean)']} "
                f"as fast as the textbook (geometric means). Fusion loses in {row[INVERSIONS_COLUMN]} workloads "
                f"(below {INVERSION:g}x, told apart from 1x); the worst is {html.escape(row['worst'])}."
            )
    fp16 = [
        f"{html.escape(machine)} {row['fused over unfused (geomean)']}"
        for machine, top in headlines.items()
        for row in top[(top["dtype"] == "fp16") & (top["worst"] != "")].to_dict("records")
    ]
    if len(fp16) > 1:
        sentences.append("Fused over unfused at fp16, geometric mean, by machine: " + ", ".join(fp16) + ".")
    return "".join(f"<p>{sentence}</p>" for sentence in sentences)


def _glossary() -> str:
    rows = "".join(f"<dt>{html.escape(term)}</dt><dd>{html.escape(text)}</dd>" for term, text in GLOSSARY.items())
    return f"<dl class='glossary'>{rows}</dl>"


def _version(number) -> str:
    """CUDA's packed versions, readable: 13020 -> '13.2', 130100 (cuBLASLt) -> '13.1.0'."""
    if not isinstance(number, int):
        return str(number)
    if number >= 100000:
        return f"{number // 10000}.{number // 100 % 100}.{number % 100}"
    return f"{number // 1000}.{number % 1000 // 10}"


def environment_card(records: list[GroupRecord], machine: str, commit: str) -> str:
    """The newest record's GPU, versions and telemetry for one machine and commit."""
    runs = [r for r in records if r.machine == machine and r.commit == commit and r.environment]
    if not runs:
        return "<p class='muted'>No environment recorded (no fusedbench record beside these asv results).</p>"
    env = runs[-1].environment
    telemetry, gpu = env.get("telemetry") or {}, env.get("gpu") or {}
    memory = gpu.get("memory_total_bytes")
    latest = {r.group: r for r in runs}
    facts = {
        "GPU": gpu.get("name"),
        "memory (GiB)": f"{memory / 2**30:.1f}" if memory else None,
        "max SM clock (MHz)": gpu.get("max_sm_clock_mhz"),
        "driver": gpu.get("driver"),
        **{k: _version(v) if k.startswith(("cuda", "cublas")) else v for k, v in (env.get("versions") or {}).items()},
        "SM clock under load (MHz)": f"{telemetry.get('min_sm_clock_mhz')}-{telemetry.get('max_sm_clock_mhz')}",
        "max temperature (C)": telemetry.get("max_temperature_c"),
        "max power (W)": telemetry.get("max_power_w"),
        "throttled": ", ".join(telemetry.get("throttled", [])) or "no",
        "groups": ", ".join(latest),
        "measurement time (s)": f"{sum(r.seconds for r in latest.values()):.0f}",
    }
    rows = "".join(f"<tr><th>{html.escape(str(k))}</th><td>{html.escape(str(v))}</td></tr>" for k, v in facts.items())
    return f"<table>{rows}</table>"


def render_report(results: ResultSet, *, machines=None, commits=None) -> str:
    """The whole report as one HTML string: the answer, the headline tables, contents and glossary above the
    fold, then a section per machine and the machines side by side."""
    cells = select_cells(results.cells, machines=machines or (), commits=commits or ())
    div = _Figures()
    sections, latest, contents, headlines, commit_notes = [], [], [], {}, {}
    if cells.empty:
        sections.append("<p>No fusedbench results yet: <code>fusedbench run</code> on a GPU machine writes them.</p>")

    def heading(level: int, ident: str, text: str, note: str = "") -> str:
        contents.append((level, ident, text))
        return f"<h{level} id='{ident}'>{html.escape(text)}{note}</h{level}>"

    for machine in dict.fromkeys(cells["machine"]):
        history = commits_in_order(cells, results.records, machine)
        commit = history[-1]
        current = cells[(cells["machine"] == machine) & (cells["commit"] == commit)]
        latest.append(current)
        ladder = ladder_cells(current)  # each workload's providers once: not the Blog control's, not Quick's twice
        table = speedups(current, results.detail.loc[current.index])
        headlines[machine] = headline(ladder, table, machine)
        commit_notes[machine] = f" <span class='muted'>commit {commit[:8]}</span>"
        sections.append(heading(2, anchor(machine), machine, commit_notes[machine]))
        sections.append(
            "<div class='card'><h3>Environment</h3>" + environment_card(results.records, machine, commit) + "</div>"
        )
        for dtype in dict.fromkeys(table["dtype"]):
            sections.append(heading(3, anchor(machine, dtype), f"{machine} {dtype}"))
            for baseline in BASELINES:
                figure = speedup_heatmap(table, machine=machine, dtype=dtype, baseline=baseline)
                sections.append(div(figure, anchor(machine, dtype, "over", baseline)))
            sections.append(
                div(epilog_cost_figure(table, machine=machine, dtype=dtype), anchor(machine, dtype, "cost"))
            )
            roofline = roofline_figure(ladder, results.ceilings, machine=machine, dtype=dtype)
            sections.append(div(roofline, anchor(machine, dtype, "roofline")))
            shaped = with_shape(ladder[ladder["dtype"] == dtype]).sort_values("size")
            for shape in dict.fromkeys(shaped["shape"]):
                figure = ladder_figure(ladder, machine=machine, dtype=dtype, shape=shape)
                sections.append(div(figure, anchor(machine, dtype, "ladder", shape)))
        not_ok = current[current["status"] != Status.OK.value]
        sections.append(heading(3, anchor(machine, "not-run"), f"Cells that did not run ({len(not_ok)})"))
        grouped = (
            not_ok.groupby(["status", "provider", "dtype", "reason"]).size().reset_index(name="cells")
            if len(not_ok)
            else not_ok
        )
        sections.append(_table(grouped) if len(not_ok) else "<p>None.</p>")
        noisy = noisy_cells(current)
        sections.append(heading(3, anchor(machine, "noisy"), f"Noisy cells ({len(noisy)}: relative IQR above 10%)"))
        columns = ["epilog", "dtype", "m", "k", "n", "provider", "time_s", "rel_iqr", "samples"]
        sections.append(_table(noisy[columns]) if len(noisy) else "<p>None.</p>")
        if len(history) > 1:
            every = speedups(cells[cells["machine"] == machine])
            sections.append(heading(3, anchor(machine, "history"), f"{machine} across commits"))
            sections.append(
                div(history_figure(every, machine=machine, commits=history), anchor(machine, "history-figure"))
            )
    newest = speedups(pd.concat(latest)) if latest else pd.DataFrame(columns=["machine"])
    if newest["machine"].nunique() > 1:
        sections.append(heading(2, "machines", "Machines side by side"))
        for dtype in dict.fromkeys(newest["dtype"]):
            for baseline in BASELINES:
                figure = machines_figure(newest, dtype=dtype, baseline=baseline)
                sections.append(div(figure, anchor("machines", dtype, "over", baseline)))
    toc = "".join(
        f"<li class='level-{level}'><a href='#{ident}'>{html.escape(text)}</a></li>" for level, ident, text in contents
    )
    above = (
        "<div id='summary'>"
        + summary(headlines)
        + "</div>"
        + ("<h2 id='headline'>Headline</h2>" if headlines else "")
        + "".join(f"<h3>{html.escape(m)}{commit_notes[m]}</h3>" + _table(top) for m, top in headlines.items())
        + (f"<h2 id='contents'>Contents</h2><ul class='toc'>{toc}</ul>" if contents else "")
        + "<h2 id='glossary'>Glossary</h2>"
        + _glossary()
    )
    plotly = f"<script type='text/javascript'>{get_plotlyjs()}</script>" if div.count else ""  # none for no figures
    return (
        "<!doctype html><html lang='en'><head><meta charset='utf-8'><title>fusedbench report</title>"
        f"<style>{_STYLE}</style>{plotly}</head><body>"
        "<h1>fusedbench: what fusing epilogs into the matmul buys</h1>"
        "<p class='muted'>cuBLASLt epilogs through nvmath-python against the same work unfused; every cell "
        "verified against float64 before it was timed; times are medians of asv's recorded samples.</p>"
        + above
        + "\n".join(sections)
        + "</body></html>"
    )


def key_figures(results: ResultSet, *, machines=None, commits=None) -> dict[str, go.Figure]:
    """The figures worth a PNG for the README: each machine's fused-over-unfused heatmap per dtype."""
    cells = select_cells(results.cells, machines=machines or (), commits=commits or ())
    figures = {}
    for machine in dict.fromkeys(cells["machine"]):
        commit = commits_in_order(cells, results.records, machine)[-1]
        chosen = cells[(cells["machine"] == machine) & (cells["commit"] == commit)]
        table = speedups(chosen, results.detail.loc[chosen.index])
        started = [r.started for r in results.records if r.machine == machine and r.commit == commit]
        when = f", run {max(started)[:10]}" if started else ""
        for dtype in dict.fromkeys(table["dtype"]):
            figure = speedup_heatmap(table, machine=machine, dtype=dtype, baseline="unfused")
            # A PNG travels without the page: it names its commit and the run's date.
            figure.update_layout(title=f"{figure.layout.title.text}<br><sup>commit {commit[:8]}{when}</sup>")
            figures[f"{machine}-{dtype}-fused-over-unfused.png"] = figure
    return figures


def check_report_outputs(*, out_dir: str, export: str | None = None, png: bool = False) -> None:
    """Refuse, before any work, an output the report could not write: a bad -o or --export path, a missing
    Parquet engine, or --png without kaleido and a Chrome for it to drive."""
    check_writable_folder(out_dir, "-o")
    if export:
        if not export.endswith((".csv", ".parquet")):
            raise FusedbenchError(f"--export {export!r}: name a .csv or .parquet file")
        check_writable_file(export, "--export")
        if export.endswith(".parquet") and not any(importlib.util.find_spec(m) for m in ("pyarrow", "fastparquet")):
            raise FusedbenchError(f"--export {export!r} needs pyarrow (pip install pyarrow); or --export a .csv")
    if png:
        _check_png_renderer()


def _check_png_renderer() -> None:
    if importlib.util.find_spec("kaleido") is None:
        raise FusedbenchError("--png needs kaleido (pip install -e '.[dev]' or pip install kaleido)")
    try:
        from choreographer.browsers.chromium import Chromium  # what kaleido drives

        browser = Chromium.find_browser(skip_local=False)
    except Exception:  # another choreographer: leave the check to kaleido itself
        return
    if browser is None:
        raise FusedbenchError(
            "--png needs Chrome or Chromium for kaleido (apt-get install chromium, or `kaleido_get_chrome`)"
        )


def render_pngs(figures: dict[str, go.Figure]) -> dict[str, bytes]:
    """PNG bytes of each figure, rendered by kaleido (which drives a local Chrome or Chromium)."""
    images = {}
    for name, figure in figures.items():
        try:
            images[name] = figure.to_image(format="png", width=PNG_WIDTH, scale=PNG_SCALE)
        except Exception as exc:  # kaleido missing, or no Chrome for it to drive
            raise FusedbenchError(f"--png needs kaleido and Chrome or Chromium ({type(exc).__name__}: {exc})") from None
    return images


def write_pngs(figures: dict[str, go.Figure], out_dir: str) -> list[str]:
    """Render every figure first, then write them all (a failed render leaves no file)."""
    paths = []
    for name, image in render_pngs(figures).items():
        paths.append(os.path.join(out_dir, name))
        write_bytes_atomically(paths[-1], image)
    return paths


def write_report(
    results: ResultSet,
    *,
    out_dir: str,
    machines=None,
    commits=None,
    export: str | None = None,
    png: bool = False,
) -> str:
    """Write `out_dir/index.html` atomically (the tidy table to `export`, CSV or Parquet; PNGs if asked)."""
    check_report_outputs(out_dir=out_dir, export=export, png=png)
    page = render_report(results, machines=machines, commits=commits)
    images = render_pngs(key_figures(results, machines=machines, commits=commits)) if png else {}
    path = os.path.join(out_dir, REPORT_NAME)
    write_text_atomically(path, page)  # every output is ready before the first is written
    for name, image in images.items():
        write_bytes_atomically(os.path.join(out_dir, name), image)
    if export:
        cells = select_cells(results.cells, machines=machines or (), commits=commits or ())
        if export.endswith(".csv"):
            write_text_atomically(export, cells.to_csv(index=False))
        else:
            write_bytes_atomically(export, cells.to_parquet(index=False))
    return path
