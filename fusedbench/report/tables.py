"""The report's tables, as HTML: what a person reads beside the figures, formatted for reading (times in
ms to 4 digits, shares in %, reasons said once), long ones folded in `<details>` and sortable and filterable by a
few lines of script (`TABLE_SCRIPT`: plotly draws no HTML table; without the script a table reads as it is)."""

from __future__ import annotations

import base64
import gzip
import html
import math
import re

import pandas as pd

from fusedbench.analysis.advice import advise
from fusedbench.analysis.speedups import noisy_cells, with_shape
from fusedbench.catalog.model import Status
from fusedbench.errors import FusedbenchError
from fusedbench.measure.records import GroupRecord
from fusedbench.regressions.gate import MachineVerdict, Outcome, describe, where
from fusedbench.regressions.render import headline, run_pairs, suite_line
from fusedbench.results.loader import ResultSet
from fusedbench.stats import NOISY_RELATIVE_IQR

# The newest run's columns offered as a CSV download (the whole table: `fusedbench report --export`).
CSV_COLUMNS = [
    "group", "epilog", "dtype", "m", "k", "n", "provider", "status", "time_s", "ci_low_s", "ci_high_s", "samples",
    "rel_iqr", "kernels", "flags", "reason",
]  # fmt: skip
HISTORY_ROWS = 100  # the cells of a machine's history table: those that moved most (thousands would weigh the page)
FOLD_ROWS = 12  # a table longer than this is folded, its summary line saying how many rows it holds, and sortable
# A sortable table's headers become buttons (a keyboard reaches and presses them; aria-sort says the order), a click
# sorts by that column (numbers by their value, in class n columns; a cell without one last) and a second reverses
# it; a search box above it keeps the rows that contain what is typed.
TABLE_SCRIPT = """
document.querySelectorAll('table.sortable').forEach(function (table) {
  var heads = Array.prototype.slice.call(table.tHead.rows[0].cells);
  var rows = Array.prototype.slice.call(table.tBodies[0].rows);
  var filter = document.createElement('input');
  filter.type = 'search';
  filter.placeholder = 'filter rows';
  filter.setAttribute('aria-label', 'show only the rows of the table below that contain');
  filter.addEventListener('input', function () {
    var text = filter.value.toLowerCase();
    rows.forEach(function (row) { row.hidden = text !== '' && row.textContent.toLowerCase().indexOf(text) < 0; });
  });
  table.parentNode.insertBefore(filter, table);
  heads.forEach(function (head, column) {
    var button = document.createElement('button');
    button.type = 'button';
    button.textContent = head.textContent;
    head.textContent = '';
    head.appendChild(button);
    button.addEventListener('click', function () {
      var up = head.getAttribute('aria-sort') !== 'ascending';
      heads.forEach(function (other) { other.removeAttribute('aria-sort'); });
      head.setAttribute('aria-sort', up ? 'ascending' : 'descending');
      var key = function (row) {
        var text = row.cells[column].textContent.replace(/\u2212/g, '-');
        if (!head.classList.contains('n')) return text.trim() === '' ? null : text;
        var found = text.replace(/,/g, '').match(/[+-]?[0-9]+[.]?[0-9]*(e[+-]?[0-9]+)?/i);
        return found ? parseFloat(found[0]) : null;
      };
      rows.sort(function (a, b) {
        var x = key(a), y = key(b);
        if (x === null || y === null) return (x === null) - (y === null);
        var order = typeof x === 'number' ? x - y : x.localeCompare(y, undefined, {numeric: true});
        return up ? order : -order;
      });
      rows.forEach(function (row) { table.tBodies[0].appendChild(row); });
    });
  });
});
"""
SORTABLE = "dataframe sortable"  # the class of a sortable table, as pandas writes it: the page adds the script


def anchor(*parts) -> str:
    """A stable HTML id from what a section or figure shows: 'h100-80gb-hbm3-peers-heatmap'."""
    return re.sub(r"[^a-z0-9]+", "-", "-".join(str(part) for part in parts).lower()).strip("-")


NOBR_LENGTH = 24  # a hyphenated name up to this long is kept on one line (fused-autotuned); a longer label may wrap
_BREAK_AFTER = re.compile(r"([_,:;/=(]+)")  # where a kernel name or a config may wrap: they have no spaces


def _cell_html(value, breakable: bool):
    """A table cell's text escaped, with a wrap point after each run of punctuation where `breakable`; elsewhere a
    hyphenated name (fused-autotuned, cutlass-evt) kept on one line, as a browser would break it at the hyphen."""
    if not isinstance(value, str):
        return value
    text = html.escape(value, quote=False)
    if breakable:
        return _BREAK_AFTER.sub(r"\1<wbr>", text)
    short = len(text) <= NOBR_LENGTH and " " not in text and text[:1].isalpha()
    return f"<span class=nobr>{text}</span>" if "-" in text and short else text


# A number as the tables write one: a sign, a count, a ratio, a share or a time, maybe its interval after it
_NUMBER = re.compile(
    r"[+\-\u2212x]?\d[\d,.]*(?:e[+\-]?\d+)?\s?(?:x|%|ms|us|µs|s|MiB|GiB|MHz|W|TFLOP/s|TB/s)?(?:\s\[[^\]]*\])?"
)
_NOT_A_VALUE = {"", "n/a", "-", "—"}  # an empty cell, or one with nothing to tell, leaves a column numeric


def _numeric(column: pd.Series) -> bool:
    """Whether a column holds numbers (as numbers, or written as the tables write them): right-aligned, to compare."""
    if pd.api.types.is_numeric_dtype(column):
        return True
    values = [str(v).strip() for v in column if not pd.isna(v) and str(v).strip() not in _NOT_A_VALUE]
    return bool(values) and all(_NUMBER.fullmatch(v) for v in values)


def table_html(frame: pd.DataFrame, *, breakable: tuple[str, ...] = ()) -> str:
    """The frame as an HTML table; the `breakable` columns (kernel names, configs) may wrap after their punctuation,
    every other cell only at its spaces (an epilog's name is never cut: DRELU_BGRAD, not DRELU_BG / RAD); numeric
    columns are right-aligned (class n), so their digits line up. A table of more than FOLD_ROWS rows is sortable and
    filterable (`TABLE_SCRIPT`)."""
    shown = frame.copy()
    numbers = {index for index, column in enumerate(shown.columns) if _numeric(shown[column])}
    for column in [c for c in shown.columns if not pd.api.types.is_numeric_dtype(shown[c])]:
        shown[column] = [_cell_html(value, column in breakable) for value in shown[column]]
    shown.columns = [html.escape(str(column), quote=False) for column in shown.columns]
    table = shown.to_html(
        index=False,
        border=0,
        na_rep="",
        escape=False,
        float_format=lambda v: f"{v:.4g}",
        classes="sortable" if len(frame) > FOLD_ROWS else None,
    )
    return _align(table, numbers)


def _align(table: str, numbers: set[int]) -> str:
    """The cells (and headers) of the `numbers` columns in class n."""
    rows = table.split("<tr")
    for number, row in enumerate(rows[1:], start=1):
        parts = re.split(r"(<t[hd])(?=[ >])", row)  # text, '<td', text, '<td', ...: a cell opens at each odd index
        for column, at in enumerate(range(1, len(parts), 2)):
            if column in numbers:
                parts[at] += " class=n"
        rows[number] = "".join(parts)
    return "<tr".join(rows)


def folded(summary: str, body: str, rows: int, *, opened: bool | None = None) -> str:
    """`body` under a one-line summary; open where it is short (or where `opened` says)."""
    state = " open" if (rows <= FOLD_ROWS if opened is None else opened) else ""
    return f"<details{state}><summary>{summary}</summary>{body}</details>"


def plural(count: int, noun: str) -> str:
    return f"{count} {noun}" + ("" if count == 1 else "s")


def _version(number) -> str:
    """CUDA's packed versions, readable: 13020 -> '13.2', 130100 (cuBLASLt) -> '13.1.0'."""
    if not isinstance(number, int):
        return str(number)
    if number >= 100000:
        return f"{number // 10000}.{number // 100 % 100}.{number % 100}"
    return f"{number // 1000}.{number % 1000 // 10}"


def _library_version(library: str, value) -> str:
    """A recorded version as the card shows it: CUDA's and cuBLAS's integers dotted; a library the run never
    imported (its groups did not use it) recorded as None, said in words."""
    if value is None:
        return "not loaded by this run"
    return _version(value) if library.startswith(("cuda", "cublas")) else str(value)


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
        **{k: _library_version(k, v) for k, v in (env.get("versions") or {}).items()},
        "SM clock under load (MHz)": f"{telemetry['min_sm_clock_mhz']}-{telemetry['max_sm_clock_mhz']}"
        if telemetry.get("min_sm_clock_mhz") is not None and telemetry.get("max_sm_clock_mhz") is not None
        else None,
        "max temperature (C)": telemetry.get("max_temperature_c"),
        "max power (W)": telemetry.get("max_power_w"),
        "throttled": ", ".join(telemetry.get("throttled", [])) or "no",
        "groups": ", ".join(latest),
        "measurement time (s)": f"{sum(r.seconds for r in latest.values()):.0f}",
        "run started": min(r.started for r in latest.values())[:16].replace("T", " "),
    }
    rows = "".join(
        f"<tr><th>{html.escape(str(k))}</th><td>{html.escape('not recorded' if v is None else str(v))}</td></tr>"
        for k, v in facts.items()
    )
    return f"<table>{rows}</table>"


def _joined(values) -> str:
    return ", ".join(dict.fromkeys(str(v) for v in values))


def not_run_table(cells: pd.DataFrame) -> str:
    """Cells that did not run, each reason said once: the epilog's name in a reason becomes 'the epilog', and the
    epilogs and dtypes it applies to are listed beside it."""
    not_ok = cells[cells["status"] != Status.OK.value]
    if not_ok.empty:
        return "<p>None.</p>"
    reasons = [
        str(reason).replace(epilog, "the epilog")
        for reason, epilog in zip(not_ok["reason"], not_ok["epilog"], strict=True)
    ]
    grouped = (
        not_ok.assign(reason=reasons)
        .groupby(["status", "provider", "reason"], sort=False)
        .agg(cells=("epilog", "size"), dtypes=("dtype", _joined), epilogs=("epilog", _joined))
        .reset_index()
        .sort_values("cells", ascending=False, kind="stable")
    )
    return folded(f"{len(not_ok)} cells, {plural(len(grouped), 'reason')}", table_html(grouped), len(grouped))


def noisy_table(cells: pd.DataFrame) -> str:
    """Cells whose relative IQR is above the noise line, noisiest first."""
    noisy = with_shape(noisy_cells(cells)).sort_values("rel_iqr", ascending=False)
    if noisy.empty:
        return "<p>None.</p>"
    shown = pd.DataFrame(
        {
            "relative IQR": [f"{v:.1%}" for v in noisy["rel_iqr"]],
            "epilog": noisy["epilog"],
            "dtype": noisy["dtype"],
            "shape": noisy["shape"],
            "provider": noisy["provider"],
            "median (ms)": [f"{v * 1e3:.4g}" for v in noisy["time_s"]],
            "samples": noisy["samples"],
        }
    )
    return folded(
        f"{len(noisy)} cells with a relative IQR above {NOISY_RELATIVE_IQR:.0%}, noisiest first",
        table_html(shown),
        len(noisy),
    )


def _change(new: float, old: float) -> str:
    return f"{new / old - 1:+.1%}" if old == old and old > 0 else "n/a"


def history_table(rows: pd.DataFrame, commits: list[str]) -> str:
    """Every cell of a machine timed at two commits or more (`rows`: `report.trend_rows`, oldest run first), a row
    each: its runs, its newest median and its change from the run before and from the first, the HISTORY_ROWS that
    moved most from the run before, largest first, and last those whose run before measured differently (a step
    there is the method's)."""
    cells = rows.groupby(["epilog", "dtype", "shape", "provider"], sort=False)
    summary = cells.agg(
        runs=("time_s", "size"),
        first=("time_s", "first"),
        before=("time_s", lambda times: times.iloc[-2] if len(times) > 1 else float("nan")),
        newest=("time_s", "last"),
        commit=("commit", "last"),
        measured_again=("changed", "last"),
    )
    summary = summary[summary["runs"] > 1].reset_index()
    if summary.empty:
        return ""
    summary = summary.assign(_moved=-(summary["newest"] / summary["before"] - 1).abs())
    summary = summary.sort_values(["measured_again", "_moved"], kind="stable")  # a step of the method's last
    total, summary = len(summary), summary.head(HISTORY_ROWS)
    shown = pd.DataFrame(
        {
            "epilog": summary["epilog"],
            "dtype": summary["dtype"],
            "shape": summary["shape"],
            "provider": summary["provider"],
            "runs": summary["runs"],
            "newest (ms)": [f"{v * 1e3:.3f}" for v in summary["newest"]],  # one number of decimals: they align
            "from the run before": [_change(n, b) for n, b in zip(summary["newest"], summary["before"], strict=True)],
            "from the first": [_change(n, f) for n, f in zip(summary["newest"], summary["first"], strict=True)],
            "newest commit": [c[:8] for c in summary["commit"]],
            "measured differently from the run before": ["yes" if v else "" for v in summary["measured_again"]],
        }
    )
    return folded(
        f"the {len(shown)} of {plural(total, 'cell')} timed at two commits or more (of {len(commits)}) that moved most "
        "from the run before, largest first, a change of method last (sort or filter by any column; one cell's every "
        "run: fusedbench history)",
        table_html(shown),
        len(shown),
        opened=False,
    )


def multi_kernel_table(cells: pd.DataFrame) -> str:
    """Fused cells that launch more than one kernel (the fused API, run unfused), by epilog, dtype and provider:
    how many shapes, and the kernels of one of them."""
    multi = cells[cells["flags"].str.contains("multi-kernel", na=False)]
    if multi.empty:
        return "<p>None: every fused cell ran as one kernel.</p>"
    grouped = (
        multi.groupby(["epilog", "dtype", "provider", "kernels"], sort=False)
        .agg(shapes=("m", "size"), launched=("kernel_names", "first"))
        .reset_index()
        .rename(columns={"launched": "the kernels of one shape"})
    )
    summary = f"{len(multi)} cells, by epilog, dtype and provider in {plural(len(grouped), 'row')}"
    return folded(summary, table_html(grouped, breakable=("the kernels of one shape",)), len(grouped))


def advice_section(results: ResultSet, machine: str) -> str:
    """`fusedbench advise` for one machine, from its newest paired runs: the rule per dtype, epilog and shape
    class, and its evidence; or why there is none."""
    try:
        advice = advise(results, [machine])
    except FusedbenchError as exc:
        return f"<p>No advice: {html.escape(str(exc))}.</p>"
    shown = pd.DataFrame(
        {
            "dtype": advice["dtype"],
            "epilog": advice["epilog"],
            "shapes": advice["shape_class"],
            "advice": advice["advice"],
            "unfused / fused (95% interval)": [
                f"{r:.3f}x ({lo:.3f}-{hi:.3f})" if r == r else "n/a: not timed"
                for r, lo, hi in zip(advice["ratio"], advice["ci_low"], advice["ci_high"], strict=True)
            ],
            "why": advice["why"],
        }
    )
    counts = ", ".join(f"{n} {what}" for what, n in sorted(advice["advice"].value_counts().items()))
    commits = sorted({commit[:8] for joined in advice["commit"] for commit in joined.split(",")})  # a rule: one or two
    source = f"from {'commits' if len(commits) > 1 else 'commit'} {', '.join(commits)}"
    return folded(f"{len(advice)} rules ({counts}), {source}", table_html(shown), len(advice))


def verdict_section(verdict: MachineVerdict) -> str:
    """The gate's verdict on one machine, suite by suite, as `fusedbench alert --machine M --suite S` prints it: a
    table of the suites (outcome, cells compared, the runs compared), then each suite's alerts and warnings."""
    rows = pd.DataFrame(
        {
            "suite": [s.suite for s in verdict.suites],
            "verdict": [s.outcome.value for s in verdict.suites],
            "alerts": [len(s.alerts) for s in verdict.suites],
            "cells compared": [f"{s.compared} of {s.cells}" for s in verdict.suites],
            "runs compared": [run_pairs(s) or "none" for s in verdict.suites],
            "thresholds": [s.preset_line for s in verdict.suites],
        }
    )
    # the machine's verdict covers every suite shown; a plain `alert` judges only the newest run's suites
    command = f"fusedbench alert --machine {verdict.machine}" + "".join(f" --suite {s.suite}" for s in verdict.suites)
    parts = [
        f"<p id='{anchor(verdict.machine, 'verdict')}' data-verdict='{verdict.outcome.value}'>"
        f"<b>{html.escape(headline(verdict))}</b>, over every suite below (<code>{html.escape(command)}</code>; "
        f"without <code>--suite</code>, <code>alert</code> judges the suites of the newest run only).</p>",
        table_html(rows),
    ]
    for suite in verdict.suites:
        items = [f"<li>{html.escape(describe(row))}</li>" for _, row in suite.alerts.iterrows()]
        items += [f"<li>warning: {html.escape(w)}</li>" for w in suite.warnings]
        # what a reader (or a test holding the page to `fusedbench alert --format json`) reads off the page
        ident, machine = anchor(verdict.machine, suite.suite, "verdict"), html.escape(verdict.machine)
        summary = (
            f"<span id='{ident}' data-machine='{machine}' data-suite='{suite.suite}' "
            f"data-verdict='{suite.outcome.value}' "
            f"data-alerts='{len(suite.alerts)}' data-compared='{suite.compared}' data-cells='{suite.cells}'>"
            f"{html.escape(suite_line(suite))}</span>"
        )
        parts.append(folded(summary, f"<ul>{''.join(items)}</ul>", len(items)) if items else f"<p>{summary}</p>")
    return "".join(parts)


def compared_rows(rows: pd.DataFrame) -> pd.DataFrame:
    """A comparison's rows (its gates, then its cells worst first, as the comparison orders them) as a page shows
    them: the verdict, the cell or gate, the metric and cell class, the change with its 95% interval, the threshold,
    and why."""
    gate = rows["epilog"].isna() if "epilog" in rows else pd.Series(True, index=rows.index)
    klass = rows["cell_class"] if "cell_class" in rows else pd.Series(math.nan, index=rows.index)
    reason = rows["reason"] if "reason" in rows else pd.Series("", index=rows.index)
    return pd.DataFrame(
        {
            "verdict": [getattr(v, "value", v) for v in rows["verdict"]],
            "cell or gate": [where(row) for _, row in rows.iterrows()],
            "metric": rows["metric"],
            "class": [
                "gate" if g else (k if isinstance(k, str) and k else "n/a") for g, k in zip(gate, klass, strict=True)
            ],
            "change [95% interval]": [
                _change_with_interval(r, lo, hi)
                for r, lo, hi in zip(rows["ratio"], rows["ci_low"], rows["ci_high"], strict=True)
            ],
            "threshold": [f"{t:.1%}" if t == t else "n/a" for t in rows["threshold"]],
            "why": reason.fillna(""),
        }
    )


def _change_with_interval(ratio, low, high) -> str:
    """'+2.1% [+1.0%, +3.2%]'; the change alone where there is no interval; n/a where nothing was compared."""
    if pd.isna(ratio):
        return "n/a"
    interval = f" [{low - 1:+.1%}, {high - 1:+.1%}]" if pd.notna(low) and pd.notna(high) else ""
    return f"{ratio - 1:+.1%}{interval}"


def status_strip(verdicts) -> str:
    """The gate at a glance, first on the page: a box per machine and suite, its verdict in words (colour only
    repeats it), the run judged and its baseline, linking to the suite's verdict in the machine's section."""
    boxes = []
    for verdict in verdicts:
        for suite in verdict.suites:
            pairs = {
                (_run_name(g.candidate, verdict.machine), _run_name(g.baseline, verdict.machine))
                for g in suite.groups
                if g.candidate and g.baseline
            }
            runs = " against ".join(next(iter(pairs))) if len(pairs) == 1 else f"{len(pairs)} pairs of runs"
            alerts = f", {len(suite.alerts)} alert(s)" if suite.outcome is Outcome.RED else ""
            machine = html.escape(verdict.machine)
            boxes.append(
                f"<a class='status {suite.outcome.value.replace(' ', '-')}' "
                f"href='#{anchor(verdict.machine, suite.suite, 'verdict')}' data-machine='{machine}' "
                f"data-suite='{suite.suite}' data-verdict='{suite.outcome.value}' data-alerts='{len(suite.alerts)}'>"
                f"<b>{machine}</b> {suite.suite}<br><span class='word'>{suite.outcome.value}"
                f"{alerts}</span><br><span class='runs'>{html.escape(runs if pairs else 'nothing compared')}</span></a>"
            )
    if not boxes:
        return ""
    return "<nav id='status' aria-label='the gate per machine and suite'>" + "".join(boxes) + "</nav>"


def _run_name(run, machine: str) -> str:
    """A run in a box of `machine`'s: its commit, or machine@commit where it is another machine's."""
    return run.commit[:8] if run.machine == machine else run.label


def csv_link(cells: pd.DataFrame, machine: str, commit: str) -> str:
    """The run's cells as a gzipped CSV in a `data:` link, downloaded as MACHINE-COMMIT.csv.gz (no request, no
    script; gzip weighs a sixth of the plain CSV, which was a sixth of the page; pandas reads it as it is)."""
    text = cells[CSV_COLUMNS].to_csv(index=False, float_format="%.4g")
    name = re.sub(r"[^A-Za-z0-9._-]", "-", f"{machine}-{commit[:8]}.csv.gz")
    packed = base64.b64encode(gzip.compress(text.encode(), mtime=0)).decode()  # mtime 0: the same page each time
    link = f"<a download='{name}' href='data:application/gzip;base64,{packed}'>{html.escape(name)}</a>"
    return f"{link} ({len(cells)} cells)"
