"""Read asv's results (any machines, any commits) into one tidy table, a row per cell and run.

asv's own loader parses the files; fusedbench adds what asv does not keep: each cell's dtype
and shape (from its benchmark class and parameters), the status and reason of cells asv
skipped (from the `.fbenv` file `fusedbench run` writes beside asv's), and, from the ceilings
measured in the same run, each cell's TFLOP/s and floor, max(FLOPs / rate, bytes / bandwidth).
The rate is the best the run measured: the ceiling GEMM's, or the fastest cell's FLOP/s where
one ran faster (large LLM shapes beat the 8192^3 ceiling GEMM by a few per cent, an autotuned
algorithm beats the default one), so no cell's floor is above a time the GPU was seen to reach.
"""

from __future__ import annotations

import ast
import itertools
import json
import math
import os
import statistics
from collections.abc import Iterator
from dataclasses import dataclass

import pandas as pd

from fusedbench.dtypes import dtype_spec
from fusedbench.epilogs import EPILOGS, Epilog, epilog_spec
from fusedbench.errors import FusedbenchError
from fusedbench.measure import CEILING_COPY_BYTES, CEILING_GEMM_SHAPE, PAIRED_SAMPLINGS, median_interval, relative_iqr
from fusedbench.shapes import shape_label
from fusedbench.suites import GROUPS

COLUMNS = [
    "machine",
    "commit",
    "epilog",
    "dtype",
    "m",
    "k",
    "n",
    "provider",
    "status",
    "reason",
    "time_s",
    "ci_low_s",
    "ci_high_s",
    "samples",
    "rel_iqr",
    "tflops",
    "floor_s",
    "flops",  # the least work the provider does: the gemm provider's is the GEMM alone
    "bytes",  # what a fused kernel must move: operands, D, bias, aux
    "gemm_ratio",  # time over the plain GEMM of the same workload (1.03: the epilog costs 3%)
    "gemm_ratio_low",  # its 95% interval where the run paired samples by round; NaN where not
    "gemm_ratio_high",
]
CEILING_COLUMNS = ["machine", "commit", "dtype", "gemm_tflops", "gemm_at", "copy_tbps"]
ENVIRONMENT_SUFFIX = ".fbenv"  # JSON beside asv's results; not *.json, which asv would try to load
NO_REASON = "asv skipped it; no reason was recorded (runs through `fusedbench run` keep them)"


def _asv_results(results_dir: str) -> Iterator:
    """asv Results objects, with a one-line error naming any file asv cannot read."""
    from asv import util
    from asv.results import Results, iter_results_paths

    for root, filename, machine in iter_results_paths(results_dir):
        path = os.path.join(root, filename)
        try:
            yield Results.load(path, machine_name=machine)
        except (util.UserError, ValueError, KeyError, TypeError) as exc:
            raise FusedbenchError(
                f"{path} is not an asv results file fusedbench can read ({exc}); move it out of {results_dir}"
            ) from None


def load_environments(results_dir: str) -> list[dict]:
    """The `.fbenv` files `fusedbench run` wrote beside asv's results, oldest first."""
    environments = []
    for root, _, files in os.walk(results_dir):
        for name in sorted(files):
            if not name.endswith(ENVIRONMENT_SUFFIX):
                continue
            path = os.path.join(root, name)
            try:
                with open(path) as stream:
                    payload = json.load(stream)
                if not all(key in payload for key in ("machine", "commit", "cells")):
                    raise KeyError("machine, commit or cells")
            except (OSError, ValueError, KeyError, TypeError) as exc:
                raise FusedbenchError(f"{path} is not a fusedbench environment file ({exc}); move it out") from None
            environments.append(payload)
    return sorted(environments, key=lambda payload: payload.get("started", ""))


def statuses_of(environments: list[dict]) -> dict[tuple, tuple[str, str]]:
    """(machine, commit, group, epilog, shape, provider) -> (status, reason); later runs win."""
    statuses = {}
    for payload in environments:
        for cell in payload["cells"]:
            key = (
                payload["machine"],
                payload["commit"],
                cell["group"],
                cell["epilog"],
                cell["shape"],
                cell["provider"],
            )
            statuses[key] = (cell["status"], cell["reason"])
    return statuses


def _parameter_sets(result, key: str) -> list[tuple]:
    return [
        tuple(ast.literal_eval(value) for value in combo) for combo in itertools.product(*result.get_result_params(key))
    ]


def _median_times(result, key: str) -> dict[tuple, float]:
    """Median time per parameter set of one benchmark ({(): time} without parameters; NaN where none)."""
    if key not in result.get_all_result_keys():
        return {}
    params = result.get_result_params(key)
    values = result.get_result_value(key, params)
    if not params:
        return {(): _number(values[0] if isinstance(values, list) else values)}
    return {combo: _number(value) for combo, value in zip(_parameter_sets(result, key), values, strict=True)}


def _number(value) -> float:
    return math.nan if value is None else float(value)


def ceilings(result) -> tuple[dict[str, float], float]:
    """(dense GEMM FLOP/s per dtype, copy bytes/s) measured in the same run (NaN where missing)."""
    m, k, n = CEILING_GEMM_SHAPE
    gemm = _median_times(result, "ceilings.GemmCeiling.time_gemm")
    rates = {combo[0]: 2 * m * k * n / time for combo, time in gemm.items()}
    copy = _median_times(result, "ceilings.CopyCeiling.time_copy").get((), math.nan)
    return rates, 2 * CEILING_COPY_BYTES / copy  # read once and written once


def parse_shape(label: str) -> tuple[int, int, int]:
    """'(M,K)x(K,N)' -> (M, K, N)."""
    left, right = label.split(")x(")
    m, k = (int(v) for v in left.strip("(").split(","))
    _, n = (int(v) for v in right.strip(")").split(","))
    return m, k, n


@dataclass(frozen=True)
class ResultSet:
    """Everything under a results folder: the cells, the ceilings of each run, and its environments."""

    cells: pd.DataFrame  # COLUMNS, a row per cell and run
    ceilings: pd.DataFrame  # CEILING_COLUMNS: the best GEMM rate (and where it was reached), copy bandwidth
    environments: list[dict]  # `.fbenv` payloads


def load_results(results_dir: str) -> ResultSet:
    """Read every asv results file (and `.fbenv` file) under `results_dir`."""
    if not os.path.isdir(results_dir):
        raise FusedbenchError(f"no results folder at {results_dir!r}; pass the folder asv writes (results/)")
    environments = load_environments(results_dir)
    statuses = statuses_of(environments)
    paired_runs = {(env["machine"], env["commit"]) for env in environments if env.get("sampling") in PAIRED_SAMPLINGS}
    rows, raw_samples, ceiling_rows, files = [], [], [], 0
    for result in _asv_results(results_dir):
        files += 1
        machine, commit = result.params["machine"], result.commit_hash
        rates, bandwidth = ceilings(result)
        for dtype, rate in rates.items():
            ceiling_rows.append(
                {
                    "machine": machine,
                    "commit": commit,
                    "dtype": dtype,
                    "gemm_tflops": rate / 1e12,
                    "gemm_at": f"{shape_label(*CEILING_GEMM_SHAPE)} ceiling",
                    "copy_tbps": bandwidth / 1e12,
                }
            )
        for key in sorted(result.get_all_result_keys()):
            parts = key.split(".")
            if parts[0] != "cells" or parts[1] not in GROUPS:
                continue
            group = GROUPS[parts[1]]
            params = result.get_result_params(key)
            stats = result.get_result_stats(key, params)
            samples = result.get_result_samples(key, params) or [None] * len(stats)
            for combo, value, stat, sample in zip(
                _parameter_sets(result, key), result.get_result_value(key, params), stats, samples, strict=True
            ):
                rows.append(_row(machine, commit, group, combo, value, stat, sample, statuses))
                raw_samples.append(sample or [])
    if not rows and files:
        raise FusedbenchError(
            f"{results_dir} holds asv results, but none of fusedbench's suite; pass fusedbench's results/"
        )
    work = with_gemm_ratios(pd.DataFrame(rows, columns=COLUMNS), raw_samples, paired_runs)
    roofs = best_gemm_rates(work, pd.DataFrame(ceiling_rows, columns=CEILING_COLUMNS))
    return ResultSet(cells=with_floors(work, roofs)[COLUMNS], ceilings=roofs, environments=environments)


def with_gemm_ratios(work: pd.DataFrame, raw_samples: list[list[float]], paired_runs: set[tuple]) -> pd.DataFrame:
    """Fill `gemm_ratio`: each ok cell's time over its workload's plain GEMM.

    Where the run sampled in rounds (`paired_runs`, from its `.fbenv`), the ratio is the median
    of round-by-round ratios, with a distribution-free interval: both calls of a round saw the
    same clock, so the power cap's drift cancels. Elsewhere it is the ratio of the medians.
    """
    work = work.copy()
    ratios = [(math.nan, math.nan, math.nan)] * len(work)
    workload = ["machine", "commit", "dtype", "epilog", "m", "k", "n"]
    for key, indices in work[work["status"] == "ok"].groupby(workload).groups.items():
        gemm = [i for i in indices if work.at[i, "provider"] == "gemm"]
        if not gemm:
            continue
        base = raw_samples[gemm[0]]
        for i in indices:
            mine = raw_samples[i]
            if (key[0], key[1]) in paired_runs and len(mine) == len(base):
                per_round = [a / b for a, b in zip(mine, base, strict=True)]
                ratios[i] = (statistics.median(per_round), *median_interval(per_round))
            else:
                ratios[i] = (work.at[i, "time_s"] / work.at[gemm[0], "time_s"], math.nan, math.nan)
    columns = ["gemm_ratio", "gemm_ratio_low", "gemm_ratio_high"]
    work[columns] = pd.DataFrame(ratios, index=work.index, columns=columns)
    return work


def best_gemm_rates(work: pd.DataFrame, ceiling_rows: pd.DataFrame) -> pd.DataFrame:
    """Each run's ceilings, the GEMM rate raised to the fastest cell's FLOP/s where one beat the ceiling GEMM."""
    roofs = ceiling_rows.copy()
    timed = work[work["status"] == "ok"]
    for index, roof in roofs.iterrows():
        run = ["machine", "commit", "dtype"]
        mine = timed[(timed[run] == roof[run]).all(axis=1)]
        if mine.empty:
            continue
        rates = mine["flops"] / mine["time_s"] / 1e12
        best = rates.idxmax()
        if rates[best] > roof["gemm_tflops"]:
            cell = mine.loc[best]
            at = f"{shape_label(cell['m'], cell['k'], cell['n'])} {cell['epilog']} {cell['provider']}"
            roofs.loc[index, ["gemm_tflops", "gemm_at"]] = rates[best], at
    return roofs


def with_floors(work: pd.DataFrame, roofs: pd.DataFrame) -> pd.DataFrame:
    """`floor_s` = max(flops / GEMM rate, bytes / copy bandwidth) of the cell's run; NaN without its ceilings."""
    keyed = work.drop(columns="floor_s").merge(
        roofs[["machine", "commit", "dtype", "gemm_tflops", "copy_tbps"]], how="left", on=["machine", "commit", "dtype"]
    )
    floors = pd.concat(
        [keyed["flops"] / (keyed["gemm_tflops"] * 1e12), keyed["bytes"] / (keyed["copy_tbps"] * 1e12)], axis=1
    ).max(axis=1, skipna=False)
    return keyed.assign(floor_s=floors.to_numpy())


def load_table(results_dir: str) -> pd.DataFrame:
    """The tidy table of every cell in every asv results file under `results_dir`."""
    return load_results(results_dir).cells


def _row(machine, commit, group, combo, value, stat, sample, statuses) -> dict:
    """One cell of one run (its floor comes later, from the run's ceilings)."""
    epilog, shape, provider = combo
    dtype = group.dtype
    spec = EPILOGS[Epilog.DEFAULT] if provider == "gemm" else epilog_spec(epilog)
    m, k, n = parse_shape(shape)
    time = _number(value)
    if math.isnan(time):
        status, reason = statuses.get((machine, commit, group.name, epilog, shape, provider), ("skipped", NO_REASON))
    else:
        status, reason = "ok", ""
    flops = spec.flops(m, k, n)
    itemsizes = dtype_spec(dtype).operand_itemsize, dtype_spec(dtype).result_itemsize
    return {
        "machine": machine,
        "commit": commit,
        "epilog": epilog,
        "dtype": dtype,
        "m": m,
        "k": k,
        "n": n,
        "provider": provider,
        "status": status,
        "reason": reason,
        "time_s": time,
        "ci_low_s": _number(stat.get("ci_99_a")) if stat else math.nan,
        "ci_high_s": _number(stat.get("ci_99_b")) if stat else math.nan,
        "samples": len(sample) if sample else 0,
        "rel_iqr": relative_iqr(sample) if sample else math.nan,
        "tflops": flops / time / 1e12 if time > 0 else math.nan,
        "floor_s": math.nan,  # with_floors() fills it from the run's ceilings
        "flops": flops,
        "bytes": spec.fused_bytes(m, k, n, *itemsizes),
        "gemm_ratio": math.nan,  # with_gemm_ratios() fills it from the workload's gemm cell
        "gemm_ratio_low": math.nan,
        "gemm_ratio_high": math.nan,
    }


def format_markdown(table: pd.DataFrame) -> str:
    """A Markdown table (no extra dependency): one header row, one row per cell."""
    header = "| " + " | ".join(table.columns) + " |"
    rule = "|" + "|".join("---" for _ in table.columns) + "|"

    def cell(value) -> str:
        if isinstance(value, float):
            return "" if math.isnan(value) else f"{value:.4g}"
        return str(value).replace("|", "\\|")

    body = ["| " + " | ".join(cell(v) for v in row) + " |" for row in table.itertuples(index=False)]
    return "\n".join([header, rule, *body]) + "\n"
