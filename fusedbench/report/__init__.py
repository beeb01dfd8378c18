"""`fusedbench report`: one self-contained HTML file (plotly's JS embedded once) from asv results.

The report only draws: every number comes from `fusedbench.analysis` on the tidy table of
`fusedbench.results`. The same results give the same bytes (figure ids are numbered, not random).
"""

from __future__ import annotations

import html
import importlib.util
import os

import pandas as pd
import plotly.graph_objects as go
from plotly.offline import get_plotlyjs

from fusedbench.analysis import headline, ladder_cells, noisy_cells, speedups, with_shape
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
PNG_WIDTH, PNG_SCALE = 1100, 1

_STYLE = """
body { font-family: system-ui, sans-serif; margin: 2rem auto; max-width: 1200px; color: #222; }
h1 { margin-bottom: 0.2rem; } h2 { border-bottom: 1px solid #ddd; padding-bottom: 0.3rem; margin-top: 2.5rem; }
table { border-collapse: collapse; margin: 0.5rem 0 1rem; font-size: 0.9rem; }
th, td { border: 1px solid #ddd; padding: 0.25rem 0.6rem; text-align: left; }
th { background: #f5f5f5; } .card { display: inline-block; vertical-align: top; margin: 0 1rem 1rem 0; }
.muted { color: #666; font-size: 0.9rem; }
"""


def commits_in_order(cells: pd.DataFrame, records: list[GroupRecord], machine: str) -> list[str]:
    """A machine's commits, oldest run first (by record; commits without one come first)."""
    present = list(dict.fromkeys(cells[cells["machine"] == machine]["commit"]))
    ordered = [r.commit for r in records if r.machine == machine and r.commit in present]
    ordered = list(dict.fromkeys(reversed(ordered)))[::-1]  # keep each commit's latest run
    return [c for c in present if c not in ordered] + ordered


def _table(frame: pd.DataFrame) -> str:
    return frame.to_html(index=False, border=0, na_rep="", escape=True, float_format=lambda v: f"{v:.4g}")


class _Figures:
    """Figures as HTML divs with ids numbered in page order, so the same results give the same bytes."""

    def __init__(self) -> None:
        self.count = 0

    def __call__(self, figure: go.Figure) -> str:
        self.count += 1
        return figure.to_html(
            full_html=False, include_plotlyjs=False, div_id=f"figure-{self.count}", config={"displaylogo": False}
        )


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
    """The whole report as one HTML string."""
    cells = select_cells(results.cells, machines=machines or (), commits=commits or ())
    div = _Figures()
    sections, latest = [], []
    if cells.empty:
        sections.append("<p>No fusedbench results yet: <code>fusedbench run</code> on a GPU machine writes them.</p>")
    for machine in dict.fromkeys(cells["machine"]):
        history = commits_in_order(cells, results.records, machine)
        commit = history[-1]
        current = cells[(cells["machine"] == machine) & (cells["commit"] == commit)]
        latest.append(current)
        ladder = ladder_cells(current)  # each workload's providers once: not the Blog control's, not Quick's twice
        table = speedups(current, results.detail.loc[current.index])
        sections.append(f"<h2>{html.escape(machine)} <span class='muted'>commit {commit[:8]}</span></h2>")
        sections.append("<div class='card'><h3>Headline</h3>" + _table(headline(ladder, table, machine)) + "</div>")
        sections.append(
            "<div class='card'><h3>Environment</h3>" + environment_card(results.records, machine, commit) + "</div>"
        )
        for dtype in dict.fromkeys(table["dtype"]):
            for baseline in BASELINES:
                sections.append(div(speedup_heatmap(table, machine=machine, dtype=dtype, baseline=baseline)))
            sections.append(div(epilog_cost_figure(table, machine=machine, dtype=dtype)))
            sections.append(div(roofline_figure(ladder, results.ceilings, machine=machine, dtype=dtype)))
            shaped = with_shape(ladder[ladder["dtype"] == dtype]).sort_values("size")
            for shape in dict.fromkeys(shaped["shape"]):
                sections.append(div(ladder_figure(ladder, machine=machine, dtype=dtype, shape=shape)))
        not_ok = current[current["status"] != Status.OK.value]
        sections.append(f"<h3>Cells that did not run ({len(not_ok)})</h3>")
        grouped = (
            not_ok.groupby(["status", "provider", "dtype", "reason"]).size().reset_index(name="cells")
            if len(not_ok)
            else not_ok
        )
        sections.append(_table(grouped) if len(not_ok) else "<p>None.</p>")
        noisy = noisy_cells(current)
        sections.append(f"<h3>Noisy cells ({len(noisy)}: relative IQR above 10%)</h3>")
        columns = ["epilog", "dtype", "m", "k", "n", "provider", "time_s", "rel_iqr", "samples"]
        sections.append(_table(noisy[columns]) if len(noisy) else "<p>None.</p>")
        if len(history) > 1:
            every = speedups(cells[cells["machine"] == machine])
            sections.append(div(history_figure(every, machine=machine, commits=history)))
    newest = speedups(pd.concat(latest)) if latest else pd.DataFrame(columns=["machine"])
    if newest["machine"].nunique() > 1:
        sections.append("<h2>Machines side by side</h2>")
        for dtype in dict.fromkeys(newest["dtype"]):
            for baseline in BASELINES:
                sections.append(div(machines_figure(newest, dtype=dtype, baseline=baseline)))
    plotly = f"<script type='text/javascript'>{get_plotlyjs()}</script>" if div.count else ""  # none for no figures
    return (
        "<!doctype html><html lang='en'><head><meta charset='utf-8'><title>fusedbench report</title>"
        f"<style>{_STYLE}</style>{plotly}</head><body>"
        "<h1>fusedbench: what fusing epilogs into the matmul buys</h1>"
        "<p class='muted'>cuBLASLt epilogs through nvmath-python against the same work unfused; every cell "
        "verified against float64 before it was timed; times are medians of asv's recorded samples.</p>"
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
        for dtype in dict.fromkeys(table["dtype"]):
            figure = speedup_heatmap(table, machine=machine, dtype=dtype, baseline="unfused")
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
