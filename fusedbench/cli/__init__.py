"""The `fusedbench` command: a thin argparse layer over keyword-only library functions.

Exit codes: 0 success; 1 a check found a failed cell; 2 usage, data or environment error
(one `error: ...` line on stderr, never a traceback). Data problems (a results file that cannot
be read, a missing record, an empty folder) are `warning: ...` lines that name the file and what
was lost; with --strict they exit 2.
"""

from __future__ import annotations

import argparse
import io
import json
import math
import os
import shutil
import sys
from collections.abc import Sequence

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from fusedbench import __version__
from fusedbench.catalog.mlp_settings import BATCH, DEFAULT_EPOCHS, DEFAULT_HIDDEN
from fusedbench.catalog.shapes import shape_label
from fusedbench.catalog.tuning import SETTINGS, TUNABLE_PROVIDERS, parse_tuning
from fusedbench.errors import FusedbenchError
from fusedbench.files import check_writable_file, write_text_atomically

TUNE_HELP = (
    f"time one provider ({', '.join(TUNABLE_PROVIDERS)}) with a cuBLASLt setting changed, recorded and kept apart "
    f"under its own asv machine: " + "; ".join(f"{name}=N: {what}" for name, what in SETTINGS.items())
)

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2


class _Parser(argparse.ArgumentParser):
    """argparse that reports a bad flag in one line and exits 2."""

    def error(self, message: str) -> None:  # type: ignore[override]
        sys.stderr.write(f"error: {message} (see '{self.prog} --help')\n")
        raise SystemExit(EXIT_USAGE)


def _names(value: str) -> list[str]:
    """Accept repeated flags and comma-separated lists alike; an empty list is a mistake, not 'all'."""
    names = [part.strip() for part in value.split(",") if part.strip()]
    if not names:
        raise argparse.ArgumentTypeError(f"expected one or more comma-separated names, got {value!r}")
    return names


def _seed(value: str) -> int:
    try:
        seed = int(value)
    except ValueError:
        seed = -1
    if not 0 <= seed < 2**32:
        raise argparse.ArgumentTypeError(f"expected a whole number from 0 to 2**32 - 1, got {value!r}")
    return seed


def _count(value: str) -> int:
    if not value.isdigit():
        raise argparse.ArgumentTypeError(f"expected a whole number of rows, 0 or more, got {value!r}")
    return int(value)


def _console(file=None) -> Console:
    # The terminal's width, or wide enough for the check table when output goes to a file or a CI log.
    width = shutil.get_terminal_size().columns if sys.stdout.isatty() else 200
    return Console(file=file, width=width, highlight=False)


def _table(title: str, columns: Sequence[str], rows) -> Table:
    """A rich table whose cells are plain text: `y[y < 0] = 0` is code, not markup."""
    table = Table(title=title)
    for column in columns:
        table.add_column(column, overflow="fold")
    for row in rows:
        table.add_row(*(escape(str(value)) for value in row))
    return table


def command_list(*, as_json: bool, asv_bench: str | None) -> int:
    """Print the catalog: epilogs, dtypes, shape sets, providers and suites (or one suite's asv --bench)."""
    from fusedbench.catalog.listing import catalog_json
    from fusedbench.catalog.suites import suite_bench_regex

    if asv_bench:
        _emit(suite_bench_regex(asv_bench) + "\n")
        return EXIT_OK
    catalog = catalog_json()
    if as_json:
        _emit(json.dumps(catalog, indent=2) + "\n")
        return EXIT_OK
    tables = [
        _table(
            "epilogs (cublasLtEpilogue_t)",
            ("name", "value", "inputs", "outputs", "computes"),
            (
                (e["name"], e["value"], ", ".join(e["inputs"]), ", ".join(e["outputs"]), e["summary"])
                for e in catalog["epilogs"]
            ),
        ),
        _table(
            "dtypes",
            ("name", "operands", "result", "compute type", "tolerance", "M, N, K multiple of"),
            (
                (
                    d["name"],
                    d["operand"],
                    d["result"],
                    d["compute_type"] or "default",
                    f"{d['tolerance']:g}",
                    d["shape_multiple"],
                )
                for d in catalog["dtype_details"]
            ),
        ),
        _table(
            "shape sets, (M,K)x(K,N)",
            ("set", "shape", "what", "source"),
            (
                (name, shape_label(*s["mkn"]), s["label"], s["source"])
                for name, members in catalog["shape_details"].items()
                for s in members
            ),
        ),
        _table(
            "providers",
            ("name", "what", "libraries"),
            ((p["name"], p["description"], ", ".join(p["libraries"])) for p in catalog["provider_details"]),
        ),
        _table(
            "suites (`fusedbench run --suite NAME`; one asv class per group)",
            ("suite", "group", "dtype", "shapes", "cells"),
            [
                row
                for suite, groups in catalog["suites"].items()
                for row in (
                    *((suite, g["group"], g["dtype"], g["shape_set"], g["cells"]) for g in groups),
                    (suite, "(all)", "", "", sum(g["cells"] for g in groups)),
                )
            ],
        ),
    ]
    _emit(_render(*tables))
    return EXIT_OK


def _render(*tables) -> str:
    """Rich tables as text, so that writing them out fails the way every other output does."""
    console = _console(io.StringIO())
    for table in tables:
        console.print(table)
    return console.file.getvalue()


def command_check(
    *,
    shapes: str,
    suite: str | None,
    epilogs: Sequence[str],
    dtypes: Sequence[str],
    providers: Sequence[str],
    seed: int | None,
    json_path: str | None,
) -> int:
    """Verify cells on the GPU; exit 1 if any failed."""
    from fusedbench.catalog.providers import select_providers
    from fusedbench.catalog.suites import suite_groups
    from fusedbench.measure.check import cell_table, format_totals, reason_table, run_check, summary_table

    if json_path:
        check_writable_file(json_path, "--json")
    if suite:
        groups = suite_groups(suite)
        if not any(g.epilogs for g in groups):
            raise FusedbenchError(
                f"suite {suite!r} times the MLP's training step, verified as it is measured (`fusedbench run --suite "
                f"{suite}`); check verifies epilog cells: pass --suite quick, default, full or peers"
            )
        epilogs = epilogs or sorted({e for g in groups for e in g.epilogs})
        dtypes = dtypes or sorted({g.dtype for g in groups})
        providers = providers or sorted({p for g in groups for p in g.providers})
    select_providers(providers)
    console = _console()
    with console.status("checking cells...") as status:
        done = [0]

        def progress(cell):
            done[0] += 1
            status.update(f"checked {done[0]} cells; now {cell.key.epilog}/{cell.key.dtype}/{cell.key.shape}")

        report = run_check(
            shapes=shapes, epilogs=epilogs, dtypes=dtypes, providers=providers, seed=seed, on_cell=progress
        )
    console.print(f"device: {report.device}; cuBLASLt {report.cublaslt_version}; seed {report.seed}")
    console.print(cell_table(report.cells))
    reasons = reason_table(report.cells)
    if reasons is not None:
        console.print(reasons)
    console.print(summary_table(report.cells))
    console.print(format_totals(report.cells))
    if json_path:
        write_text_atomically(json_path, json.dumps(report.to_json(), indent=2) + "\n")
    return EXIT_FAILED if report.failed else EXIT_OK


def command_run(*, suite: str, bench: str | None, launch_method: str, tune: str | None = None) -> int:
    """Check and time a suite on this machine's GPU with asv (one provider tuned, with --tune)."""
    from fusedbench.cli.run import run_suite
    from fusedbench.errors import GpuUnavailable

    tuning = parse_tuning(tune) if tune is not None else None
    console = _console()
    try:
        return run_suite(
            suite=suite, bench=bench, launch_method=launch_method, repo=os.getcwd(), echo=console.print, tuning=tuning
        )
    except GpuUnavailable as exc:
        raise FusedbenchError(
            f"{exc}; without a GPU, `fusedbench report` and `fusedbench table` read the committed results/"
        ) from None


def command_machine(tune: str | None = None) -> int:
    """Name asv's machine after this GPU (or a tuned run's) and print the name (for `asv run --machine`)."""
    from fusedbench.errors import GpuUnavailable
    from fusedbench.measure.machine import gpu_machine_name, register_asv_machine

    tuning = parse_tuning(tune) if tune is not None else None
    try:
        name = gpu_machine_name()
    except GpuUnavailable as exc:
        raise FusedbenchError(
            f"{exc}; fusedbench machine names asv's machine after its GPU: run it on the GPU runner"
        ) from None
    if tuning is not None:
        name = tuning.machine(name)
    register_asv_machine(name, cwd=os.getcwd())
    _emit(name + "\n")
    return EXIT_OK


def _load(results_dir: str, *, strict: bool):
    """The results, each data problem a warning line (an error with --strict)."""
    from fusedbench.results.loader import load_results

    results = load_results(results_dir)
    for problem in results.problems:
        sys.stderr.write(f"warning: {problem}\n")
    if strict and results.problems:
        raise FusedbenchError(f"{len(results.problems)} data problem(s) in {results_dir} (--strict)")
    return results


def command_table(*, results_dir: str, output_format: str, machines, commits, strict: bool, mlp: bool = False) -> int:
    """Print the tidy table of asv results: a row per cell and run (the epilog cells, or with `mlp` the mlp suite's)."""
    from fusedbench.results.loader import format_markdown, select_cells

    results = _load(results_dir, strict=strict)
    chosen = {kind: select_cells(frame, machines=machines, commits=commits, known=results.runs())
              for kind, frame in (("cells", results.cells), ("mlp", results.mlp))}  # fmt: skip
    table = chosen["mlp" if mlp else "cells"]
    if table.empty and not mlp and not chosen["mlp"].empty:
        sys.stderr.write("note: the runs chosen are the mlp suite's: add --mlp for their table\n")
    if output_format == "csv":
        _emit(table.to_csv(index=False))
    elif output_format == "json":
        _emit(table.to_json(orient="records", indent=1) + "\n")
    else:
        _emit(format_markdown(table))
    return EXIT_OK


def command_advise(*, results_dir: str, machines, output_format: str, strict: bool) -> int:
    """Print the dispatch policy per machine, dtype, epilog and shape class, with its evidence."""
    import pandas

    from fusedbench.analysis.advice import SHAPE_CLASSES, advise
    from fusedbench.results.loader import format_markdown

    policy = advise(_load(results_dir, strict=strict), machines)
    if output_format == "json":
        _emit(policy.to_json(orient="records", indent=1) + "\n")
        return EXIT_OK
    shown = policy.assign(
        ratio=[_interval_text(r.ratio, r.ci_low, r.ci_high) for r in policy.itertuples()],
        regret=[_interval_text(r.regret, r.regret_low, r.regret_high) for r in policy.itertuples()],
        kernels=["" if pandas.isna(k) else str(k) for k in policy["kernels"]],
    )[["machine", "commit", "dtype", "epilog", "shape_class", "advice", "ratio", "kernels", "regret", "why"]]
    classes = "; ".join(f"{name}: {label}" for name, label in SHAPE_CLASSES.items())
    legend = f"ratio: unfused / fused, 95% interval (above 1: fusion pays); regret: fused / fused-autotuned; {classes}"
    if output_format == "md":
        _emit(format_markdown(shown) + "\n" + legend + "\n")
        return EXIT_OK
    _emit(_render(_table("fusedbench advise", list(shown.columns), shown.itertuples(index=False))) + legend + "\n")
    return EXIT_OK


def _interval_text(value: float, low: float, high: float) -> str:
    if math.isnan(value):
        return ""
    return f"{value:.2f}" if math.isnan(low) else f"{value:.2f} [{low:.2f}, {high:.2f}]"


def command_report(
    *, results_dir: str, out_dir: str, machines, commits, export: str | None, png: bool, strict: bool
) -> int:
    """Write the HTML report of asv results."""
    import time

    from fusedbench.report import check_report_outputs, write_report

    started = time.perf_counter()
    check_report_outputs(out_dir=out_dir, export=export, png=png)
    results = _load(results_dir, strict=strict)
    path = write_report(results, out_dir=out_dir, machines=machines, commits=commits, export=export, png=png)
    size = os.path.getsize(path)
    also = f"; the table in {export}" if export else ""
    _emit(f"wrote {path} ({size / 2**20:.1f} MiB) in {time.perf_counter() - started:.1f} s{also}\n")
    return EXIT_OK


def _compared(results_dirs: list[str], machine, baseline, candidate, preset_name, strict: bool, gate: bool = False):
    """Load the folders, choose the two runs, pick the preset, compare: (verdicts, preset line, chosen)."""
    from fusedbench.regressions.alerts import choose_runs, judge_runs

    if len(results_dirs) > 2:
        raise FusedbenchError(f"give one results folder, or two (baseline's, candidate's), not {len(results_dirs)}")
    loaded = [(folder, _load(folder, strict=strict)) for folder in results_dirs or ["results"]]
    chosen = choose_runs(loaded, machine, baseline, candidate, os.getcwd())
    if gate:  # a CI gate judges nothing it could not read in full on the machines it compares
        machines = {chosen.baseline.machine, chosen.candidate.machine}
        for _, results in loaded:
            lost = [p for p in results.problems if any(f"{os.sep}{m}{os.sep}" in p for m in machines)]
            if lost:
                raise FusedbenchError(f"alert judges only results it can read in full: {lost[0]}")
    verdicts, preset_line = judge_runs(chosen.baseline, chosen.candidate, preset_name)
    return verdicts, preset_line, chosen


def _print_comparison(verdicts, preset_line: str, output_format: str, *, rows: int, only_alerts: bool) -> None:
    import pandas

    from fusedbench.regressions.alerts import (
        comparison_markdown,
        dump,
        summary_markdown,
        to_json,
        verdict_counts,
        where,
    )
    from fusedbench.regressions.compare import Verdict

    if output_format == "json":
        _emit(dump(to_json(verdicts, preset_line)))
        return
    if output_format == "md":
        _emit(summary_markdown(verdicts, preset_line) if only_alerts else comparison_markdown(verdicts, preset_line))
        return
    comparison = verdicts.comparison
    console = _console()
    console.print(f"{comparison.candidate.label} against {comparison.baseline.label}; {preset_line}", markup=False)
    console.print(verdict_counts(comparison), markup=False)
    shown = verdicts.alerts if only_alerts else comparison.cells[comparison.cells["verdict"] != Verdict.SAME]
    columns = (
        "alert" if only_alerts else "verdict",
        "cell",
        "metric",
        "class",
        "change",
        "95% interval",
        "threshold",
        "reason",
    )
    table_rows = [
        (
            row.get("kind") if only_alerts else row["verdict"].value,
            where(row),
            row["metric"],
            "" if pandas.isna(row.get("cell_class")) else row["cell_class"],
            "" if pandas.isna(row["ratio"]) else f"x{row['ratio']:.3f}",
            "" if pandas.isna(row["ci_low"]) else f"[{row['ci_low']:.3f}, {row['ci_high']:.3f}]",
            "" if pandas.isna(row["threshold"]) else f"{row['threshold']:.1%}",
            row.get("reason") or "",
        )
        for _, row in shown.head(rows).iterrows()
    ]
    title = "alerts, worst first" if only_alerts else "every change that is not 'same', worst first"
    if table_rows:
        console.print(_table(title, columns, table_rows))
    if len(shown) > rows:
        console.print(f"... {len(shown) - rows} more rows (--rows N, or --format md / json for all)", markup=False)
    for warning in verdicts.warnings:
        sys.stderr.write(f"warning: {warning}\n")
    moved = comparison.groups[comparison.groups["verdict"] != Verdict.SAME]
    if not only_alerts and not moved.empty:
        gate_rows = [
            (
                g["verdict"].value,
                f"{g['group']} ({g['provider']}, {g['cells']} cells)",
                g["metric"],
                f"x{g['ratio']:.3f}",
                f"[{g['ci_low']:.3f}, {g['ci_high']:.3f}]",
                f"{g['threshold']:.1%}",
            )
            for _, g in moved.iterrows()
        ]
        columns = ("verdict", "group gate", "metric", "median change", "95% interval", "threshold")
        console.print(_table("group gates that moved", columns, gate_rows))


def command_compare(*, results_dirs, machine, baseline, candidate, preset, output_format, rows, strict) -> int:
    """Compare two runs cell by cell (exit 0 whatever changed; `alert` is the one that fails)."""
    verdicts, preset_line, _ = _compared(results_dirs, machine, baseline, candidate, preset, strict)
    _print_comparison(verdicts, preset_line, output_format, rows=rows, only_alerts=False)
    return EXIT_OK


def command_alert(*, results_dirs, machine, baseline, candidate, preset, output_format, rows, strict, dump) -> int:
    """The CI gate: compare, print what fails and what warns, write the step summary; exit 1 on an alert."""
    from fusedbench.regressions.alerts import (
        NoBaseline,
        first_run_json,
        first_run_summary,
        summary_markdown,
        write_step_summary,
    )
    from fusedbench.regressions.alerts import dump as dump_json
    from fusedbench.regressions.thresholds import preset_for

    if dump:
        found, line = preset_for(machine or _newest_machine(results_dirs), preset)
        _emit(dump_json(found.to_json() | {"in_force_because": line}))
        return EXIT_OK
    try:
        verdicts, preset_line, chosen = _compared(results_dirs, machine, baseline, candidate, preset, strict, gate=True)
    except NoBaseline as exc:  # the first run of a new measurement version: nothing can have regressed
        written = write_step_summary(first_run_summary(str(exc)))
        sys.stderr.write(f"warning: {exc}\n" + (f"step summary appended to {written}\n" if written else ""))
        if output_format == "json":
            _emit(dump_json(first_run_json(exc, "no comparison: no preset applied")))
        elif output_format == "md":
            _emit(first_run_summary(str(exc)))
        else:
            _emit("no alert: nothing to compare (the first run of these benchmark versions on this machine)\n")
        return EXIT_OK
    _name_regression_starts(verdicts, chosen)
    code = EXIT_FAILED if verdicts.failed else EXIT_OK
    written = write_step_summary(summary_markdown(verdicts, preset_line))  # before any output a reader may cut
    if written:
        sys.stderr.write(f"step summary appended to {written}\n")
    try:
        _print_comparison(verdicts, preset_line, output_format, rows=rows, only_alerts=True)
        if output_format == "text":
            outcome = (
                f"{len(verdicts.alerts)} alert(s): the build fails" if verdicts.failed else "no alert: nothing failed"
            )
            _emit(outcome + "\n")
    except BrokenPipeError:  # `alert | head`: the verdict still decides the exit code
        _silence_stdout()
    return code


def command_mlp(*, device: str, epochs: int, hidden: int, batch: int, dtype: str, versions, output_format: str) -> int:
    """Train the seed notebook's MLP on scikit-learn's digits in every version the device runs: test accuracy,
    the loss curve in brief, time per step."""
    from fusedbench.errors import GpuUnavailable
    from fusedbench.measure.gpu.mlp import build_versions
    from fusedbench.measure.mlp import init_params, load_digits_dataset, train

    for flag, value in (("--epochs", epochs), ("--hidden", hidden), ("--batch", batch)):
        if value < 1:
            raise FusedbenchError(f"{flag} {value}: give a positive number")
    data = load_digits_dataset()
    params = init_params(data.inputs, hidden)
    try:
        built = build_versions(params, dtype, device, versions)
    except GpuUnavailable as exc:
        raise FusedbenchError(f"{exc}; or train on the CPU: fusedbench mlp --device cpu") from None
    results = [train(v, data, epochs=epochs, batch=batch).to_json() for v in built]
    if output_format == "json":
        run = {"device": device, "dtype": dtype, "hidden": hidden, "batch": batch, "epochs": epochs}
        _emit(json.dumps(run | {"data": "sklearn digits", "versions": results}, indent=2, allow_nan=False) + "\n")
        return EXIT_OK
    rows = [
        (
            r["name"],
            f"{r['test_accuracy']:.3f}",
            f"{r['loss_first']:.3f} -> {r['loss_last']:.4f} (min {r['loss_min']:.4f})",
            f"{r['step_seconds'] * 1e3:.3f}",
            f"{r['gpu_step_seconds'] * 1e3:.3f} ({r['kernels_per_step']} kernels)" if "gpu_step_seconds" in r else "",
            r["steps"],
        )
        for r in results
    ]
    weights = " with fp32 master weights" if dtype != "fp32" else ""
    title = (
        f"MLP {data.inputs}-{hidden}-10 on sklearn digits, {dtype}{weights}, batch {batch}, {epochs} epochs, {device}"
    )
    columns = ("version", "test accuracy", "loss", "ms per step", "GPU ms per step (kernels)", "steps")
    _console().print(_table(title, columns, rows))
    return EXIT_OK


def command_history(*, results_dir: str, machine: str, cell: str, strict: bool) -> int:
    """One cell's median time at every commit with results on the machine (git order), and where asv's
    step detection puts the start of its last regression."""
    from fusedbench.regressions.alerts import git_ancestors
    from fusedbench.regressions.history import cell_series, parse_cell, regression_start

    key = parse_cell(cell)
    results = _load(results_dir, strict=strict)
    if machine not in set(results.cells["machine"]):
        have = ", ".join(sorted(set(results.cells["machine"]))) or "none"
        raise FusedbenchError(f"machine {machine!r} has no results in {results_dir}; machines with results: {have}")
    newest = results.cells[results.cells["machine"] == machine]["commit"]
    heads = [c for c in dict.fromkeys(newest) if git_ancestors(c, os.getcwd()) is not None]
    if not heads:
        raise FusedbenchError(f"no results on machine {machine!r} whose commits git here knows; run from the checkout")
    order: list[str] = []
    for head in heads:  # the longest first-parent line through the machine's commits
        line = [*reversed(git_ancestors(head, os.getcwd()) or []), head]
        order = line if len(line) > len(order) else order
    series = cell_series(results, machine, key, order)
    if series.empty:
        raise FusedbenchError(f"cell {cell} has no timed results on {machine}")
    version = series["version"].iloc[-1]  # asv compares within a version: the newest run's
    older = series[series["version"] != version]
    series = series[series["version"] == version]
    for commit, seconds in zip(series["commit"], series["time_s"], strict=True):
        _emit(f"{commit[:8]}  {seconds * 1e3:9.3f} ms\n")
    if len(older):
        _emit(f"({len(older)} earlier run(s) at other benchmark versions left out: another measurement)\n")
    start = regression_start(series)
    _emit(f"step up (asv.step_detect): {'began at ' + start[:8] if start else 'none'}\n")
    return EXIT_OK


def command_calibrate(*, results_dir: str, machine: str, runs: list[list[str]], write: bool, strict: bool) -> int:
    """Derive a threshold preset from A/A runs, print its thresholds, noise and rates (and keep it, with --write)."""
    from fusedbench.regressions.calibration import GOALS, calibrate
    from fusedbench.regressions.thresholds import CLASS_LABELS, save_preset

    for commits in runs:
        if len(commits) < 2:
            raise FusedbenchError(f"--runs {','.join(commits)}: a set needs at least two A/A runs of the same code")
    preset = calibrate(_load(results_dir, strict=strict), machine, runs)
    console = _console()
    rows = [
        (
            key,
            CLASS_LABELS.get(key.split("/")[-1], "groups"),
            f"{value:.1%}",
            preset.noise.get(key, ""),
            _effect(preset.rates["minimum_detectable"].get(key)),
        )
        for key, value in (("/".join(k), v) for k, v in preset.thresholds.items())
    ]
    console.print(
        _table(
            f"preset {preset.name}: {preset.pairs} A/A pair(s) of {sum(map(len, preset.runs))} runs on {machine}",
            ("metric/class", "times", "threshold", "noise", "detected at 95%"),
            rows,
        )
    )
    by_suite = ", ".join(
        f"{name}: {rate:.1%} of builds from {preset.rates['pairs_by_suite'][name]} pair(s)"
        for name, rate in preset.rates["false_alarm_by_suite"].items()
    )
    console.print(
        f"false alarms: {preset.rates['false_alarm_per_build']:.1%} of A/A builds red ({by_suite}; goal: at most 5%)",
        markup=False,
    )
    for goal in GOALS:
        rate = preset.rates["detection"][goal]
        console.print(f"detection of {goal}: {_effect(rate, 'rate')} (goal: at least 95%)", markup=False)
    if write:
        console.print(save_preset(preset), markup=False)
    return EXIT_OK


def _effect(value, kind: str = "effect") -> str:
    if value is None or value != value:
        return "not reached" if kind == "effect" else "no such cells"
    return f"{value:.1%}"


def _newest_machine(results_dirs: list[str]) -> str:
    """The machine of the newest run in the (candidate's) results folder; '' where there is none."""
    from fusedbench.regressions.alerts import only_machine

    folder = (results_dirs or ["results"])[-1]
    try:
        return only_machine(_load(folder, strict=False), folder)
    except FusedbenchError:
        return ""


def _name_regression_starts(verdicts, chosen) -> None:
    """Where the history on the machine allows, say in each cell alert's reason which commit its step began at."""
    from fusedbench.regressions.alerts import git_ancestors
    from fusedbench.regressions.history import KEY, cell_series, regression_start

    ancestors = git_ancestors(chosen.candidate.commit, os.getcwd())
    if not ancestors or verdicts.alerts.empty:
        return
    order = [*reversed(ancestors), chosen.candidate.commit]
    for index, row in verdicts.alerts.iterrows():
        if not row.get("epilog") or row["metric"] != "time":
            continue
        version = chosen.candidate.groups.get(row["group"])
        series = cell_series(
            chosen.results, chosen.candidate.machine, {k: row[k] for k in (*KEY, "group")}, order, version
        )
        start = regression_start(series)
        if start is not None and start != chosen.candidate.commit:
            verdicts.alerts.at[index, "reason"] = f"{row['reason']}; the step began at commit {start[:8]}".lstrip("; ")


def _emit(text: str) -> None:
    """Write to standard output, a full disk or a closed pipe becoming a FusedbenchError, not a traceback."""
    try:
        sys.stdout.write(text)
        sys.stdout.flush()
    except BrokenPipeError:
        _silence_stdout()
        raise
    except OSError as exc:
        _silence_stdout()
        raise FusedbenchError(f"could not write to standard output ({exc.strerror or exc})") from None


def _silence_stdout() -> None:
    """Point stdout at /dev/null, so Python's own flush at exit does not fail a second time."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)


def _folder_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("results_dir", nargs="?", default="results", help="asv's results folder (default: results)")
    parser.add_argument("--strict", action="store_true", help="exit 2 on any data problem instead of warning")


def _results_arguments(parser: argparse.ArgumentParser) -> None:
    _folder_arguments(parser)
    parser.add_argument("--machine", action="extend", type=_names, default=[], help="only these machines")
    parser.add_argument("--commit", action="extend", type=_names, default=[], help="only these commits (prefixes)")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="fusedbench", description="What fusing work into a matmul buys on your GPU.")
    parser.add_argument("--version", action="version", version=f"fusedbench {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

    listing = commands.add_parser("list", help="print the catalog: epilogs, dtypes, shapes, providers and suites")
    listing_output = listing.add_mutually_exclusive_group()
    listing_output.add_argument("--json", action="store_true", help="print it as one JSON object")
    listing_output.add_argument(
        "--asv-bench", metavar="SUITE", help="print only the asv --bench expression that selects SUITE and the ceilings"
    )
    listing.set_defaults(handler=lambda a: command_list(as_json=a.json, asv_bench=a.asv_bench))

    check = commands.add_parser("check", help="verify every provider against float64 references on the GPU")
    check.add_argument("--shapes", default="small", help="shape set to check on (default: small)")
    check.add_argument(
        "--suite", help="check the epilogs, dtypes and providers that suite times (quick, default, full, peers)"
    )
    check.add_argument(
        "--epilog", action="extend", type=_names, default=[], help="epilog(s), repeatable or comma-separated"
    )
    check.add_argument(
        "--dtype", action="extend", type=_names, default=[], help="dtype(s): fp16, bf16, fp32, tf32, fp8"
    )
    check.add_argument(
        "--provider", action="extend", type=_names, default=[], help="provider(s) to check (default: all)"
    )
    check.add_argument(
        "--seed", type=_seed, default=None, help="seed for the random operands (default: fresh each run)"
    )
    check.add_argument("--json", dest="json_path", metavar="FILE", help="also write every cell as JSON to FILE")
    check.set_defaults(
        handler=lambda a: command_check(
            shapes=a.shapes,
            suite=a.suite,
            epilogs=a.epilog,
            dtypes=a.dtype,
            providers=a.provider,
            seed=a.seed,
            json_path=a.json_path,
        )
    )

    run = commands.add_parser(
        "run", help="the main job: check, time a suite with asv, write the report (run from the checkout's root)"
    )
    run.add_argument("--suite", default="default", help="quick, default, full, peers or mlp (default: default)")
    run.add_argument(
        "--bench",
        default=None,
        metavar="REGEX",
        help="only the groups whose class name matches REGEX (e.g. Bf16, Seed)",
    )
    run.add_argument(
        "--launch-method",
        default="forkserver",
        choices=("forkserver", "spawn"),
        help="how asv starts a benchmark process (default: forkserver; see docs/architecture.md)",
    )
    run.add_argument("--tune", default=None, metavar="PROVIDER:SETTING=N", help=TUNE_HELP)
    run.set_defaults(
        handler=lambda a: command_run(suite=a.suite, bench=a.bench, launch_method=a.launch_method, tune=a.tune)
    )

    machine = commands.add_parser(
        "machine", help="name asv's machine after this GPU (h100-80gb-hbm3) and print the name, for asv run --machine"
    )
    machine.add_argument(
        "--tune", default=None, metavar="PROVIDER:SETTING=N", help="the tuned run's machine name (see run --tune)"
    )
    machine.set_defaults(handler=lambda a: command_machine(a.tune))

    table = commands.add_parser("table", help="the tidy table of asv results: a row per cell and run")
    _results_arguments(table)
    table.add_argument("--format", dest="output_format", choices=("csv", "json", "md"), default="csv")
    table.set_defaults(
        handler=lambda a: command_table(
            results_dir=a.results_dir,
            output_format=a.output_format,
            machines=a.machine,
            commits=a.commit,
            strict=a.strict,
            mlp=a.mlp,
        )
    )
    table.add_argument("--mlp", action="store_true", help="the mlp suite's cells (the MLP's training step) instead")

    advise = commands.add_parser(
        "advise",
        help="the dispatch policy per machine, dtype, epilog and shape class: fuse, fuse-autotuned, unfused or a peer",
    )
    _folder_arguments(advise)
    advise.add_argument(
        "--machine",
        action="extend",
        type=_names,
        default=[],
        help="only these machines (default: every GPU's; a tuned run's machine only when named)",
    )
    advise.add_argument("--format", dest="output_format", choices=("text", "md", "json"), default="text")
    advise.set_defaults(
        handler=lambda a: command_advise(
            results_dir=a.results_dir, machines=a.machine, output_format=a.output_format, strict=a.strict
        )
    )

    report = commands.add_parser("report", help="one self-contained HTML speedup report from asv results")
    _results_arguments(report)
    report.add_argument("-o", "--output", dest="out_dir", default="reports", help="folder for index.html (reports)")
    report.add_argument("--export", metavar="FILE", help="also write the tidy table to FILE (.csv or .parquet)")
    report.add_argument("--png", action="store_true", help="also write PNGs of the key figures (needs kaleido)")
    report.set_defaults(
        handler=lambda a: command_report(
            results_dir=a.results_dir,
            out_dir=a.out_dir,
            machines=a.machine,
            commits=a.commit,
            export=a.export,
            png=a.png,
            strict=a.strict,
        )
    )
    for name, helptext in (
        ("compare", "compare two runs cell by cell: each metric's change, its interval and a verdict"),
        ("alert", "the CI gate: exit 1 when a run regresses against its baseline, 0 when nothing changed"),
    ):
        sub = commands.add_parser(name, help=helptext)
        sub.add_argument(
            "results_dirs",
            nargs="*",
            default=[],
            metavar="RESULTS",
            help="asv's results folder (default: results), or two: the baseline's, then the candidate's",
        )
        sub.add_argument("--machine", default=None, help="the machine (default: the one with the newest run)")
        sub.add_argument("--baseline", default=None, metavar="REF", help=REF_HELP + BASELINE_DEFAULT[name])
        sub.add_argument("--candidate", default=None, metavar="REF", help=REF_HELP + " (default: the newest run)")
        sub.add_argument("--preset", default=None, help="threshold preset (default: the machine's; --dump-thresholds)")
        formats = ("text", "md", "json")
        sub.add_argument("--format", dest="output_format", choices=formats, default="text")
        sub.add_argument("--rows", type=_count, default=40, help="rows of the terminal table (default: 40)")
        sub.add_argument("--strict", action="store_true", help="exit 2 on any data problem instead of warning")
        if name == "alert":
            sub.add_argument("--dump-thresholds", action="store_true", help="print the preset in force and exit")
    history = commands.add_parser("history", help="one cell's time over commits on a machine, and where a step began")
    _folder_arguments(history)
    history.add_argument("--machine", required=True, help="the machine (asv's name, e.g. h100-80gb-hbm3)")
    history.add_argument(
        "--cell",
        required=True,
        metavar="EPILOG/DTYPE/SHAPE/PROVIDER",
        help="e.g. RELU_BIAS/fp16/(65536,16384)x(16384,8192)/fused",
    )
    history.set_defaults(
        handler=lambda a: command_history(results_dir=a.results_dir, machine=a.machine, cell=a.cell, strict=a.strict)
    )
    mlp = commands.add_parser("mlp", help="train the seed notebook's MLP on sklearn's digits: fused against the rest")
    mlp.add_argument("--device", choices=("cpu", "gpu"), default="gpu", help="where to train (default: gpu)")
    mlp.add_argument("--epochs", type=int, default=DEFAULT_EPOCHS, help=f"(default: {DEFAULT_EPOCHS})")
    mlp.add_argument("--hidden", type=int, default=DEFAULT_HIDDEN, help=f"(default: the notebook's {DEFAULT_HIDDEN})")
    mlp.add_argument("--batch", type=int, default=BATCH, help=f"(default: the notebook's {BATCH})")
    mlp.add_argument("--dtype", choices=("fp32", "fp16", "bf16"), default="fp32", help="(default: fp32)")
    mlp.add_argument("--version", dest="versions", action="extend", type=_names, default=[], help="only these versions")
    mlp.add_argument("--format", dest="output_format", choices=("text", "json"), default="text")
    options = ("device", "epochs", "hidden", "batch", "dtype", "versions", "output_format")
    mlp.set_defaults(handler=lambda a: command_mlp(**{name: getattr(a, name) for name in options}))
    calibrate = commands.add_parser("calibrate", help="earn a threshold preset from A/A runs (the same code run again)")
    _folder_arguments(calibrate)
    calibrate.add_argument("--machine", required=True, help="the machine the A/A runs were made on")
    calibrate.add_argument(
        "--runs",
        required=True,
        action="append",
        type=_names,
        metavar="C1,C2,...",
        help="a set of A/A runs' commits, all of one measurement code (repeat for another set)",
    )
    calibrate.add_argument("--write", action="store_true", help="keep the preset in fusedbench/presets.json")
    calibrate.set_defaults(
        handler=lambda a: command_calibrate(
            results_dir=a.results_dir, machine=a.machine, runs=a.runs, write=a.write, strict=a.strict
        )
    )
    commands.choices["compare"].set_defaults(handler=lambda a: command_compare(**_comparison_args(a)))
    commands.choices["alert"].set_defaults(
        handler=lambda a: command_alert(**_comparison_args(a), dump=a.dump_thresholds)
    )
    return parser


REF_HELP = "COMMIT (a prefix, on --machine), MACHINE@COMMIT, or MACHINE@ (its newest run)"
BASELINE_DEFAULT = {
    "compare": " (default: the nearest earlier commit with comparable results; with two folders, the first's newest)",
    "alert": " (default: the nearest earlier commit, in git order, with results for the same benchmarks at the same "
    "version; none after a version bump: passes with nothing to compare; with two folders, the first's newest)",
}


def _comparison_args(args) -> dict:
    return {
        "results_dirs": args.results_dirs,
        "machine": args.machine,
        "baseline": args.baseline,
        "candidate": args.candidate,
        "preset": args.preset,
        "output_format": args.output_format,
        "rows": args.rows,
        "strict": args.strict,
    }


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.handler(args)
    except FusedbenchError as exc:
        sys.stderr.write(f"error: {exc}\n")
        return EXIT_USAGE
    except BrokenPipeError:  # `fusedbench table | head`: the reader has what it wanted
        return EXIT_OK
    except KeyboardInterrupt:
        sys.stderr.write("interrupted\n")
        return 130
