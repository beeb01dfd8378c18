"""`fusedbench report`: one self-contained HTML file (plotly's JS embedded once) from asv results."""

from __future__ import annotations

import html
import os

import pandas as pd
import plotly.graph_objects as go
from plotly.offline import get_plotlyjs

from fusedbench.errors import FusedbenchError
from fusedbench.files import write_text_atomically
from fusedbench.report.figures import (
    BASELINES,
    epilog_cost_figure,
    geometric_mean,
    history_figure,
    ladder_figure,
    machines_figure,
    noisy_cells,
    roofline_figure,
    speedup_heatmap,
    speedups,
    with_shape,
)
from fusedbench.results import ResultSet, load_results
from fusedbench.verify import Status

REPORT_NAME = "index.html"

_STYLE = """
body { font-family: system-ui, sans-serif; margin: 2rem auto; max-width: 1200px; color: #222; }
h1 { margin-bottom: 0.2rem; } h2 { border-bottom: 1px solid #ddd; padding-bottom: 0.3rem; margin-top: 2.5rem; }
table { border-collapse: collapse; margin: 0.5rem 0 1rem; font-size: 0.9rem; }
th, td { border: 1px solid #ddd; padding: 0.25rem 0.6rem; text-align: left; }
th { background: #f5f5f5; } .card { display: inline-block; vertical-align: top; margin: 0 1rem 1rem 0; }
.muted { color: #666; font-size: 0.9rem; }
"""


def select(results: ResultSet, *, machines: list[str] | None, commits: list[str] | None) -> pd.DataFrame:
    """The cells of the chosen machines and commits (prefixes allowed), with a clear error if none."""
    cells = results.cells
    if cells.empty:
        raise FusedbenchError("no fusedbench results yet; `fusedbench run` on a GPU machine writes them")
    if machines:
        cells = cells[cells["machine"].isin(machines)]
    if commits:
        cells = cells[cells["commit"].map(lambda c: any(c.startswith(p) for p in commits))]
    if cells.empty:
        have = ", ".join(sorted(set(results.cells["machine"]))) or "none"
        raise FusedbenchError(
            f"no cells for machines {machines or 'any'} and commits {commits or 'any'}; machines: {have}"
        )
    return cells


def commits_in_order(cells: pd.DataFrame, environments: list[dict], machine: str) -> list[str]:
    """A machine's commits, oldest run first (by environment file; commits without one come first)."""
    present = list(dict.fromkeys(cells[cells["machine"] == machine]["commit"]))
    ordered = [env["commit"] for env in environments if env["machine"] == machine and env["commit"] in present]
    ordered = list(dict.fromkeys(reversed(ordered)))[::-1]  # keep each commit's latest run
    return [c for c in present if c not in ordered] + ordered


def _table(frame: pd.DataFrame) -> str:
    return frame.to_html(index=False, border=0, na_rep="", escape=True, float_format=lambda v: f"{v:.4g}")


def _figure(figure: go.Figure) -> str:
    return figure.to_html(full_html=False, include_plotlyjs=False, config={"displaylogo": False})


# A fused epilog this much slower than the unfused GEMM + pass is a fusion inversion.
INVERSION = 0.95


def headline(cells: pd.DataFrame, table: pd.DataFrame, machine: str) -> str:
    """Per dtype: geometric-mean speedups, the fusion inversions and the worst one, and the cell statuses."""
    rows = []
    for dtype in dict.fromkeys(table[table["machine"] == machine]["dtype"]):
        part = table[(table["machine"] == machine) & (table["dtype"] == dtype)]
        counts = cells[(cells["machine"] == machine) & (cells["dtype"] == dtype)]["status"].value_counts()
        inversions = part[part["over_unfused"] < INVERSION]
        worst = part.loc[part["over_unfused"].idxmin()] if part["over_unfused"].notna().any() else None
        rows.append(
            {
                "dtype": dtype,
                **{f"fused over {b} (geomean)": f"{geometric_mean(part[f'over_{b}']):.2f}x" for b in BASELINES},
                f"fused < {INVERSION:g}x unfused": f"{len(inversions)} of {part['over_unfused'].notna().sum()}",
                "worst": "" if worst is None else f"{worst['epilog']} {worst['shape']}: {worst['over_unfused']:.2f}x",
                **{status.value: int(counts.get(status.value, 0)) for status in Status},
            }
        )
    return _table(pd.DataFrame(rows))


def _version(number) -> str:
    """CUDA's packed versions, readable: 13020 -> '13.2', 130100 (cuBLASLt) -> '13.1.0'."""
    if not isinstance(number, int):
        return str(number)
    if number >= 100000:
        return f"{number // 10000}.{number // 100 % 100}.{number % 100}"
    return f"{number // 1000}.{number % 1000 // 10}"


def environment_card(environments: list[dict], machine: str, commit: str) -> str:
    runs = [env for env in environments if env["machine"] == machine and env["commit"] == commit]
    if not runs:
        return "<p class='muted'>No environment recorded (results not written by <code>fusedbench run</code>).</p>"
    env = runs[-1]
    telemetry, gpu = env.get("telemetry", {}), env.get("gpu", {})
    memory = gpu.get("memory_total_bytes")
    facts = {
        "GPU": gpu.get("name"),
        "memory (GiB)": f"{memory / 2**30:.1f}" if memory else None,
        "max SM clock (MHz)": gpu.get("max_sm_clock_mhz"),
        "driver": gpu.get("driver"),
        **{k: _version(v) if k.startswith(("cuda", "cublas")) else v for k, v in env.get("versions", {}).items()},
        "SM clock under load (MHz)": f"{telemetry.get('min_sm_clock_mhz')}-{telemetry.get('max_sm_clock_mhz')}",
        "max temperature (C)": telemetry.get("max_temperature_c"),
        "max power (W)": telemetry.get("max_power_w"),
        "throttled": ", ".join(telemetry.get("throttled", [])) or "no",
        "suite": env.get("suite"),
        "asv wall time (s)": env.get("wall_seconds"),
    }
    rows = "".join(f"<tr><th>{html.escape(str(k))}</th><td>{html.escape(str(v))}</td></tr>" for k, v in facts.items())
    return f"<table>{rows}</table>"


def render_report(results: ResultSet, *, machines=None, commits=None) -> str:
    """The whole report as one HTML string."""
    cells = select(results, machines=machines, commits=commits)
    sections, latest = [], []
    for machine in dict.fromkeys(cells["machine"]):
        history = commits_in_order(cells, results.environments, machine)
        commit = history[-1]
        current = cells[(cells["machine"] == machine) & (cells["commit"] == commit)]
        latest.append(current)
        table = speedups(current)
        sections.append(f"<h2>{html.escape(machine)} <span class='muted'>commit {commit[:8]}</span></h2>")
        sections.append("<div class='card'><h3>Headline</h3>" + headline(current, table, machine) + "</div>")
        sections.append(
            "<div class='card'><h3>Environment</h3>"
            + environment_card(results.environments, machine, commit)
            + "</div>"
        )
        for dtype in dict.fromkeys(table["dtype"]):
            for baseline in BASELINES:
                sections.append(_figure(speedup_heatmap(table, machine=machine, dtype=dtype, baseline=baseline)))
            sections.append(_figure(epilog_cost_figure(table, machine=machine, dtype=dtype)))
            sections.append(_figure(roofline_figure(current, results.ceilings, machine=machine, dtype=dtype)))
            shaped = with_shape(current[current["dtype"] == dtype]).sort_values("size")
            for shape in dict.fromkeys(shaped["shape"]):
                sections.append(_figure(ladder_figure(current, machine=machine, dtype=dtype, shape=shape)))
        not_ok = current[current["status"] != "ok"]
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
            sections.append(_figure(history_figure(every, machine=machine, commits=history)))
    newest = speedups(pd.concat(latest))
    if newest["machine"].nunique() > 1:
        sections.append("<h2>Machines side by side</h2>")
        for dtype in dict.fromkeys(newest["dtype"]):
            for baseline in BASELINES:
                sections.append(_figure(machines_figure(newest, dtype=dtype, baseline=baseline)))
    return (
        "<!doctype html><html lang='en'><head><meta charset='utf-8'><title>fusedbench report</title>"
        f"<style>{_STYLE}</style><script type='text/javascript'>{get_plotlyjs()}</script></head><body>"
        "<h1>fusedbench: what fusing epilogs into the matmul buys</h1>"
        "<p class='muted'>cuBLASLt epilogs through nvmath-python against the same work unfused; every cell "
        "verified against float64 before it was timed; times are medians of asv's recorded samples.</p>"
        + "\n".join(sections)
        + "</body></html>"
    )


def key_figures(results: ResultSet, *, machines=None, commits=None) -> dict[str, go.Figure]:
    """The figures worth a PNG for the README: each machine's fused-over-unfused heatmap per dtype."""
    cells = select(results, machines=machines, commits=commits)
    figures = {}
    for machine in dict.fromkeys(cells["machine"]):
        commit = commits_in_order(cells, results.environments, machine)[-1]
        table = speedups(cells[(cells["machine"] == machine) & (cells["commit"] == commit)])
        for dtype in dict.fromkeys(table["dtype"]):
            figure = speedup_heatmap(table, machine=machine, dtype=dtype, baseline="unfused")
            figures[f"{machine}-{dtype}-fused-over-unfused.png"] = figure
    return figures


def write_pngs(figures: dict[str, go.Figure], out_dir: str) -> list[str]:
    """Render figures to PNG with kaleido (which drives a local Chrome or Chromium)."""
    paths = []
    for name, figure in figures.items():
        path = os.path.join(out_dir, name)
        try:
            image = figure.to_image(format="png", width=1100, scale=1)
        except Exception as exc:  # kaleido missing, or no Chrome for it to drive
            raise FusedbenchError(f"--png needs kaleido and Chrome or Chromium ({type(exc).__name__}: {exc})") from None
        temporary = f"{path}.tmp"
        with open(temporary, "wb") as stream:
            stream.write(image)
        os.replace(temporary, path)
        paths.append(path)
    return paths


def write_report(
    *,
    results_dir: str,
    out_dir: str,
    machines=None,
    commits=None,
    export: str | None = None,
    png: bool = False,
) -> str:
    """Write `out_dir/index.html` atomically (the tidy table to `export`, CSV or Parquet; PNGs if asked)."""
    if export and not export.endswith((".csv", ".parquet")):
        raise FusedbenchError(f"--export {export!r}: name a .csv or .parquet file")
    results = load_results(results_dir)
    page = render_report(results, machines=machines, commits=commits)
    path = os.path.join(out_dir, REPORT_NAME)
    write_text_atomically(path, page)
    if png:
        write_pngs(key_figures(results, machines=machines, commits=commits), out_dir)
    if export:
        cells = select(results, machines=machines, commits=commits)
        if export.endswith(".csv"):
            cells.to_csv(export, index=False)
        else:
            try:
                cells.to_parquet(export, index=False)
            except ImportError:
                raise FusedbenchError(
                    "Parquet export needs pyarrow (pip install pyarrow); or --export a .csv"
                ) from None
    return path
