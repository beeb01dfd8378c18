"""The forms of every file fusedbench reads, validated in one place before any of it reaches a table.

asv's results files and machine.json, fusedbench's records (.fbenv, the legacy environments) and the cells inside
them and inside confirmation and side-by-side records are pydantic models: each field's type is checked as the file
is parsed (strictly: a string is not a number, a bool is not a count). The checks across fields follow the models:
a values list as long as its parameter sets, times finite, positive, plausible (SHORTEST_S to LONGEST_S) and within
their own statistics, as many samples as asv says, dates plausible, and every epilog, dtype, shape and provider a
name the catalog knows. What fails is a FormatError naming the field (the reader names the file): `table` and
`report` warn and skip the file, and a gate refuses to judge what it could not read.

Only regular files are read (`files.read_regular`): a FIFO, a device, a link loop or a file over the size limit is
refused before it is opened.
"""

from __future__ import annotations

import ast
import json
import math
import re
from collections.abc import Mapping
from datetime import datetime, timezone
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError, field_validator, model_validator
from typing_extensions import TypedDict

from fusedbench.catalog.dtypes import DTYPES
from fusedbench.catalog.epilogs import Epilog
from fusedbench.catalog.model import CELL_FORMAT, Cell, CellKey, FormatError, Status
from fusedbench.catalog.providers import PROVIDERS
from fusedbench.catalog.shapes import parse_shape
from fusedbench.catalog.suites import (
    BENCHMARK_MODULE,
    CEILINGS_MODULE,
    GROUPS,
    MLP_EPOCH,
    MLP_GROUPS,
    MLP_MODULE,
    MLP_STEP,
    mlp_layers,
)
from fusedbench.errors import FusedbenchError
from fusedbench.files import read_regular

SIDE_BY_SIDE_FORMAT = "fusedbench-side-by-side-aa/1"  # paired.margins measures it, regressions.margins reads it
CONFIRMATION_FORMAT = "fusedbench-confirmation/1"  # regressions.confirm writes it
ASV_API_VERSION = 2  # asv.results.Results.api_version: the results format asv 0.6 writes and reads
# Dates a run can carry: asv's (ms since the epoch) and a record's (ISO 8601). A date outside them is damage, not a run.
EARLIEST, LATEST = datetime(2000, 1, 1, tzinfo=timezone.utc), datetime(2100, 1, 1, tzinfo=timezone.utc)
EARLIEST_MS, LATEST_MS = int(EARLIEST.timestamp() * 1000), int(LATEST.timestamp() * 1000)
# What a timed call can take, in seconds: nothing fusedbench times is under a nanosecond or over a day (an MLP epoch,
# the longest, takes seconds); a time outside is damage, read as no time at all, never as a measurement.
SHORTEST_S, LONGEST_S = 1e-9, 86400.0
ORDER_TOLERANCE = 1e-4  # asv rounds each statistic to five significant figures

Positive = Annotated[float, Field(gt=0, allow_inf_nan=False)]  # a time, a rate: finite and above zero
NonNegative = Annotated[float, Field(ge=0, allow_inf_nan=False)]
Finite = Annotated[float, Field(allow_inf_nan=False)]
Count = Annotated[int, Field(ge=0)]
# A record's own numbers kept as written (73 stays 73, not 73.0: a report shows them as they were recorded)
AnyNumber = int | Finite
NonNegativeNumber = Count | NonNegative
PositiveNumber = Annotated[int, Field(gt=0)] | Positive
Size = Annotated[int, Field(ge=1)]  # a matrix dimension, a batch
DateMs = Annotated[int, Field(ge=EARLIEST_MS, le=LATEST_MS)]
Name = Annotated[str, Field(min_length=1)]
Commit = Annotated[str, Field(pattern=r"^[0-9a-f]{7,40}$")]


_STRICT = ConfigDict(strict=True)  # a TypedDict's own: strictness does not reach it from the model around it
_OPEN = ConfigDict(strict=True, extra="allow")


class _Form(BaseModel):
    """A file's or a part's form: types checked strictly, unknown fields refused (a misspelt field is damage)."""

    model_config = ConfigDict(strict=True, frozen=True, extra="forbid")


class _OpenForm(_Form):
    """A part that later versions extend: the fields fusedbench reads are checked, others kept as they are."""

    model_config = ConfigDict(extra="allow")


# ---- asv's results files (asv.results.Results, api version 2) and machine.json --------------------------------------


class AsvMachine(_OpenForm):
    """machine.json: the machine's name, which asv checks every results file of the folder against."""

    machine: Name


class AsvResults(_OpenForm):
    """One asv results file: a run of one commit in one environment on one machine, a row per benchmark."""

    version: Literal[ASV_API_VERSION]  # type: ignore[valid-type]
    commit_hash: Commit
    env_name: str
    date: DateMs
    params: dict[str, str]
    python: str
    requirements: dict[str, str | None]
    env_vars: dict[str, str] = {}
    result_columns: tuple[
        Literal[
            "result",
            "params",
            "version",
            "started_at",
            "duration",
            "stats_ci_99_a",
            "stats_ci_99_b",
            "stats_q_25",
            "stats_q_75",
            "stats_number",
            "stats_repeat",
            "samples",
            "profile",
        ],
        ...,
    ]
    results: dict[str, tuple[Any, ...]]  # each row read against result_columns by BenchmarkRow
    durations: dict[str, NonNegative | None] = {}


class BenchmarkRow(_Form):
    """One benchmark's row of an asv results file, its columns named: a value per parameter set in each list."""

    result: list[float | None] | None  # NaN or null: asv has no value for that parameter set
    params: list[list[str]]  # each parameter's values, written as Python literals
    version: str  # what makes two runs of a benchmark comparable (asv writes it for every benchmark)
    started_at: DateMs | None = None
    duration: NonNegative | None = None
    stats_ci_99_a: list[Finite | None] | None = None
    stats_ci_99_b: list[Finite | None] | None = None
    stats_q_25: list[Finite | None] | None = None
    stats_q_75: list[Finite | None] | None = None
    stats_number: list[Annotated[int, Field(ge=1)] | None] | None = None
    stats_repeat: list[Annotated[int, Field(ge=1)] | None] | None = None
    samples: list[list[Positive] | None] | None = None
    profile: str | None = None  # asv's profile, where asked for (--profile)


# ---- fusedbench's records -------------------------------------------------------------------------------------------


class _Kernel(TypedDict):
    __pydantic_config__ = _STRICT  # type: ignore[misc]
    name: str
    us: NonNegativeNumber


class _Copy(TypedDict):
    __pydantic_config__ = _STRICT  # type: ignore[misc]
    bytes: PositiveNumber
    us: PositiveNumber


class Provenance(TypedDict, total=False):
    """What a cell's measurement recorded beside its samples: the fields a table reads are typed, the rest kept."""

    __pydantic_config__ = _OPEN  # type: ignore[misc]
    kernels: list[_Kernel]
    same_size_copy: _Copy
    algorithm: str | None
    chosen_by: str | None
    compile_s: NonNegativeNumber | None
    autotune_s: NonNegativeNumber | None
    test_accuracy: Annotated[float, Field(ge=0, le=1)]


class CellForm(_Form):
    """A cell in its one JSON form (catalog.model.Cell.to_json)."""

    format: Literal[CELL_FORMAT]  # type: ignore[valid-type]
    epilog: Name
    dtype: Name
    m: Size
    k: Size
    n: Size
    provider: Name
    machine: str
    commit: str
    status: Literal[tuple(status.value for status in Status)]  # type: ignore[valid-type]
    reason: str
    samples: list[Positive] = []
    error: NonNegative | None = None
    provenance: Provenance = {}
    telemetry: dict[str, list[int]] = {}  # a series of whole numbers per reading, in sample order

    @model_validator(mode="after")
    def _known(self) -> CellForm:
        """Names the catalog knows; samples only on a verified, timed cell."""
        _require(self.epilog in _WORKLOADS, f"unknown epilog {self.epilog!r:.60}")
        _require(self.dtype in DTYPES, f"unknown dtype {self.dtype!r:.60}; expected one of {', '.join(DTYPES)}")
        _require(self.provider in PROVIDERS, f"unknown provider {self.provider!r:.60}")
        _require(
            not self.samples or self.status == Status.OK.value,
            f"the cell is {self.status} but has samples; only a verified, timed cell has samples",
        )
        return self


class _Gpu(TypedDict, total=False):
    __pydantic_config__ = _OPEN  # type: ignore[misc]
    name: str | None
    memory_total_bytes: Count | None
    max_sm_clock_mhz: Count | None
    driver: str | None


class _RunTelemetry(TypedDict, total=False):
    __pydantic_config__ = _OPEN  # type: ignore[misc]
    min_sm_clock_mhz: Count | None
    max_sm_clock_mhz: Count | None
    max_temperature_c: AnyNumber | None
    max_power_w: AnyNumber | None
    throttled: list[str]


class _Tuning(TypedDict):
    __pydantic_config__ = _STRICT  # type: ignore[misc]
    provider: Name
    setting: Name
    value: int


class _Target(TypedDict):
    __pydantic_config__ = _STRICT  # type: ignore[misc]
    target: Name
    fraction: PositiveNumber


class _Library(TypedDict):
    __pydantic_config__ = _STRICT  # type: ignore[misc]
    path: str
    version: str


class _Stack(TypedDict):
    """The stack a record's process ran in (measure.stacks.stack_facts): '' for none, and the libraries it loaded."""

    __pydantic_config__ = _STRICT  # type: ignore[misc]
    name: str
    python: str
    packages: dict[str, str]
    libraries: dict[str, _Library]


class Environment(TypedDict, total=False):
    """What a record says the group ran on and what was changed on purpose (catalog.deliberate)."""

    __pydantic_config__ = _OPEN  # type: ignore[misc]
    gpu: _Gpu | None
    versions: dict[str, str | int | None] | None
    stack: _Stack | None
    telemetry: _RunTelemetry | None
    tuning: _Tuning | None
    injection: list[_Target] | None


class RecordForm(_OpenForm):
    """A group's record, fusedbench-record/1 and /2 (measure.records.GroupRecord)."""

    format: Literal["fusedbench-record/1", "fusedbench-record/2"]
    machine: Name
    commit: Commit
    group: Name
    started: str
    seconds: NonNegative
    sampling: str | None
    dirty: bool | None
    environment: Environment
    cells: tuple[CellForm, ...]

    @field_validator("started")
    @classmethod
    def _plausible(cls, started: str) -> str:
        return _plausible_start(started)


class _LegacyCell(_OpenForm):
    group: Name
    epilog: Name
    shape: Name
    provider: Name
    status: Literal[tuple(status.value for status in Status)]  # type: ignore[valid-type]
    reason: str = ""

    @model_validator(mode="after")
    def _known(self) -> _LegacyCell:
        _require(self.group in GROUPS, f"cell of unknown group {self.group!r:.60}")
        _require(self.epilog in _EPILOGS, f"unknown epilog {self.epilog!r:.60}")
        _require(_shape(self.shape), f"shape {self.shape!r:.60} is not (M,K)x(K,N)")
        _require(self.provider in PROVIDERS, f"unknown provider {self.provider!r:.60}")
        return self


class LegacyRecordForm(_OpenForm):
    """A whole run's environment, fusedbench-environment/1 and /2, written before group records."""

    format: Literal["fusedbench-environment/1", "fusedbench-environment/2"]
    machine: Name
    commit: Commit
    started: str = ""
    sampling: str | None = None
    gpu: _Gpu | None = None
    versions: dict[str, str | int | None] | None = None
    telemetry: _RunTelemetry | None = None
    measure_seconds: dict[str, NonNegative] = {}
    cells: tuple[_LegacyCell, ...]

    @field_validator("started")
    @classmethod
    def _plausible(cls, started: str) -> str:
        return started and _plausible_start(started)  # a legacy record may leave it out


class _Sides(_OpenForm):
    """One group of a side-by-side record: its benchmark version and each side's cells."""

    version: str
    cells: dict[Literal["baseline", "candidate"], list[CellForm]]


class SideBySideForm(_OpenForm):
    """A side-by-side A/A record (paired.margins, .fbaa): this code on both sides of a confirmation."""

    format: Literal[SIDE_BY_SIDE_FORMAT]  # type: ignore[valid-type]
    machine: Name
    commit: Commit
    pinned: dict[str, str] = {}  # fused-autotuned's algorithm per cell where pinned (worker protocol 2)
    protocol: int = 0  # the worker's, from 3 on (before: 2 where `pinned` is there, else 1)
    picks: list[dict] = []  # where the sides' autotuning picked different algorithms (protocol 3): catalog.model.Pick
    groups: dict[str, _Sides]


class _Run(_OpenForm):
    machine: Name
    commit: Commit


class _Confirmed(_OpenForm):
    """One group of a confirmation record: what was flagged, how it was measured again, and its cells."""

    group: Name
    how: str
    decided_by: str | None = None
    rounds: Count
    workloads: list[list[str | int]]
    seconds: NonNegative
    calls: Count
    not_measured: list[str]
    baseline: _Run
    candidate: _Run
    cells: dict[Literal["baseline", "candidate"], list[CellForm]]
    picks: list[dict] = []  # fused-autotuned's two picks, each timed on both sides (catalog.model.Pick)


class ConfirmationForm(_OpenForm):
    """A confirmation record (regressions.confirm, .fbconfirm): the verdict after measuring the flagged again."""

    format: Literal[CONFIRMATION_FORMAT]  # type: ignore[valid-type]
    machine: Name
    suites: list[Name]
    groups: list[_Confirmed] = Field(min_length=1)


# Whichever record a .fbenv holds, told apart by its format.
_RECORD = TypeAdapter(Annotated[RecordForm | LegacyRecordForm, Field(discriminator="format")])


# ---- reading ---------------------------------------------------------------------------------------------------------


def read_machine(path: str) -> str:
    """The machine a machine.json names (FormatError naming the field, or OSError)."""
    return _validated(read_regular(path), AsvMachine).machine


def read_asv_results(path: str) -> AsvResults:
    """An asv results file, every benchmark's row checked against its columns and the catalog (FormatError naming
    the field, or OSError)."""
    results = _validated(read_regular(path), AsvResults)
    for benchmark, values in results.results.items():
        where = f"results[{benchmark!r}]"
        if len(values) > len(results.result_columns):
            raise FormatError(f"{where} has {len(values)} values for {len(results.result_columns)} columns")
        try:
            row = BenchmarkRow.model_validate(
                dict(zip(results.result_columns, values, strict=False))
            )  # asv drops trailing nulls
        except ValidationError as exc:
            raise FormatError(_field(exc, where)) from None
        problem = _row_problem(benchmark, row)
        if problem:
            raise FormatError(f"{where}: {problem}")
    return results


def read_record_form(path: str) -> RecordForm | LegacyRecordForm:
    """A .fbenv's record, either form, its cells checked against the catalog (FormatError naming the field, or
    OSError)."""
    try:
        return _RECORD.validate_json(read_regular(path))
    except ValidationError as exc:
        raise FormatError(_field(exc, "")) from None


def read_record(path: str, form: type[SideBySideForm | ConfirmationForm], what: str) -> dict:
    """A side-by-side or confirmation record as the JSON it is, with its `path`, once it passes its form; one error
    line naming the file and the field otherwise (`what` names the kind of record)."""
    try:
        data = read_regular(path)
        _validated(data, form)
    except (OSError, FormatError) as exc:
        raise FusedbenchError(f"{what} {path} cannot be read ({exc})") from None
    return json.loads(data) | {"path": path}


def cell_from_json(data: Mapping[str, Any], where: str = "cell") -> Cell:
    """A cell from its JSON form, checked (FormatError naming `where` and the field)."""
    try:
        return cell_of_form(CellForm.model_validate(data))
    except ValidationError as exc:
        raise FormatError(_field(exc, where)) from None


def cell_of_form(form: CellForm) -> Cell:
    """The model's Cell of a checked form."""
    key = CellKey(form.epilog, form.dtype, form.m, form.k, form.n, form.provider, form.machine, form.commit)
    error = form.error
    if error is None and "error" in form.model_fields_set:
        error = math.inf  # written as null: an output was missing or non-finite
    telemetry = {name: tuple(series) for name, series in form.telemetry.items()}
    return Cell(key, Status(form.status), form.reason, tuple(form.samples), error, dict(form.provenance), telemetry)


# ---- the checks across fields ----------------------------------------------------------------------------------------

_TIMES_OF = ("stats_ci_99_a", "stats_ci_99_b", "stats_q_25", "stats_q_75")  # a time benchmark's statistics: times
_PER_VALUE = (*_TIMES_OF, "stats_number", "stats_repeat")
_EPILOGS = frozenset(Epilog.__members__)
_WORKLOADS = _EPILOGS | {MLP_STEP, MLP_EPOCH}  # an MLP cell's key carries its workload in place of an epilog


def _shape(value: Any) -> bool:
    try:
        return min(parse_shape(value)) >= 1
    except (ValueError, TypeError, AttributeError):
        return False


def _layers(value: Any) -> bool:
    try:
        return min(mlp_layers(value)) >= 1
    except (ValueError, TypeError, AttributeError):
        return False


# What each parameter of fusedbench's benchmarks may be, by its name (catalog.suites: the groups' param names).
_KNOWN: dict[str, tuple[str, Any]] = {
    "epilog": ("one of cuBLASLt's epilog names", lambda value: value in _EPILOGS),
    "shape": ("a shape (M,K)x(K,N)", _shape),
    "provider": ("a provider of the catalog", lambda value: value in PROVIDERS),
    "version": ("a provider of the catalog", lambda value: value in PROVIDERS),
    "dtype": (f"one of {', '.join(DTYPES)}", lambda value: value in DTYPES),
    "layers": ("layer widths written INPUTS-HIDDEN-OUTPUTS", _layers),
    "batch": ("a batch of 1 or more", lambda value: type(value) is int and value >= 1),
}


def _parameter_names(benchmark: str) -> tuple[str, ...] | None:
    """The names of a benchmark's parameters, where fusedbench's suite defines it (None: not ours, not checked)."""
    module, _, rest = benchmark.partition(".")
    group = rest.partition(".")[0]
    if module == BENCHMARK_MODULE and group in GROUPS:
        return ("epilog", "shape", "provider")
    if module == MLP_MODULE and group in MLP_GROUPS:
        return MLP_GROUPS[group].param_names
    if module == CEILINGS_MODULE and group == "GemmCeiling":
        return ("dtype",)
    if module == CEILINGS_MODULE:
        return ()
    return None


def _row_problem(benchmark: str, row: BenchmarkRow) -> str | None:
    """What is wrong across a row's fields (lengths, times, statistics, samples, parameter values); None: nothing."""
    values = row.result or []
    timed = [value is not None and not math.isnan(value) for value in values]
    for check in (_length_problem, _time_problem, _order_problem, _sample_problem):
        problem = check(benchmark, row, values, timed)
        if problem:
            return problem
    return _parameter_problem(benchmark, row.params)


def _length_problem(benchmark: str, row: BenchmarkRow, values: list, timed: list[bool]) -> str | None:
    """A value per parameter set, and a statistic and a list of samples per value."""
    sets = math.prod(len(listed) for listed in row.params)
    if row.result is not None and len(values) != sets:
        return f"result has {len(values)} values for {sets} parameter sets"
    for column in (*_PER_VALUE, "samples"):
        listed = getattr(row, column)
        if listed is not None and len(listed) != len(values):
            return f"{column} has {len(listed)} entries for {len(values)} results"
    return None


def _is_time(benchmark: str) -> bool:
    return benchmark.rpartition(".")[2].startswith("time_")


def _time_problem(benchmark: str, row: BenchmarkRow, values: list, timed: list[bool]) -> str | None:
    """A time (a value, a sample or a statistic of a time_ benchmark) from SHORTEST_S to LONGEST_S; a tracked value
    finite."""
    if not _is_time(benchmark):
        infinite = any(has and math.isinf(value) for value, has in zip(values, timed, strict=True))
        return "result holds an infinite value" if infinite else None
    times = [value for value, has in zip(values, timed, strict=True) if has]
    times += [sample for samples in row.samples or () for sample in samples or ()]
    times += [stat for column in _TIMES_OF for stat in getattr(row, column) or () if stat is not None]
    bad = [time for time in times if not SHORTEST_S <= time <= LONGEST_S]
    return f"holds the time {bad[0]!r} s: a timed call takes {SHORTEST_S:g} s to {LONGEST_S:g} s" if bad else None


def _order_problem(benchmark: str, row: BenchmarkRow, values: list, timed: list[bool]) -> str | None:
    """Each value within what asv says of its samples: its 99% interval, its quartiles and the samples themselves
    (asv writes the statistics to five figures: ORDER_TOLERANCE)."""
    bounds = {"99% interval": (row.stats_ci_99_a, row.stats_ci_99_b), "quartiles": (row.stats_q_25, row.stats_q_75)}
    for index, (value, has) in enumerate(zip(values, timed, strict=True)):
        if not has:
            continue
        for name, (lows, highs) in bounds.items():
            low, high = (lows or [None] * len(values))[index], (highs or [None] * len(values))[index]
            if (low is not None and low > value * (1 + ORDER_TOLERANCE)) or (
                high is not None and high < value * (1 - ORDER_TOLERANCE)
            ):
                return f"result[{index}] = {value!r} lies outside its {name} ({low!r}, {high!r})"
        samples = (row.samples or [None] * len(values))[index]
        if samples and not min(samples) <= value <= max(samples):
            return f"result[{index}] = {value!r} lies outside its samples ({min(samples)!r} to {max(samples)!r})"
    return None


def _sample_problem(benchmark: str, row: BenchmarkRow, values: list, timed: list[bool]) -> str | None:
    """Samples for every time of fusedbench's (paired and judged by them), as many as asv's stats_repeat says."""
    samples = row.samples or [None] * len(values)
    if _is_time(benchmark) and _parameter_names(benchmark) is not None:
        unsampled = sum(has and not listed for has, listed in zip(timed, samples, strict=True))
        if unsampled:
            return (
                f"no samples for {unsampled} of its {sum(timed)} timed parameter sets (asv run keeps them with "
                "--record-samples, as fusedbench run does)"
            )
    repeats = row.stats_repeat or [None] * len(values)
    for index, (listed, repeat) in enumerate(zip(samples, repeats, strict=True)):
        if listed and repeat is not None and len(listed) != repeat:
            return f"samples[{index}] holds {len(listed)} samples where stats_repeat says {repeat}"
    return None


def _parameter_problem(benchmark: str, params: tuple[tuple[str, ...], ...]) -> str | None:
    names = _parameter_names(benchmark)
    if names is None:
        return None
    if len(params) != len(names):
        return f"params has {len(params)} lists; {benchmark} takes {len(names)} ({', '.join(names) or 'none'})"
    for name, values in zip(names, params, strict=True):
        what, known = _KNOWN[name]
        if len(set(values)) < len(values):
            return f"params: a {name} is listed twice in {values!r:.80}"
        for written in values:
            try:
                value = ast.literal_eval(written)
            except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
                return f"params: the {name} {written[:60]!r} is not a Python literal"
            if not known(value):
                return f"params: unknown {name} {value!r:.60}; expected {what}"
    return None


def _require(holds: bool, problem: str) -> None:
    """A check across fields inside a form: pydantic reports the ValueError at the part it checks."""
    if not holds:
        raise ValueError(problem)


def _plausible_start(started: str) -> str:
    """A record's start: an ISO 8601 date from EARLIEST to LATEST."""
    try:
        when = datetime.fromisoformat(started)
    except ValueError:
        raise ValueError(f"{started[:40]!r} is not an ISO 8601 date") from None
    when = when if when.tzinfo else when.replace(tzinfo=timezone.utc)
    _require(EARLIEST <= when < LATEST, f"{started[:40]!r} is outside {EARLIEST.year}-{LATEST.year}")
    return started


def _validated(data: bytes, form: type[_Form]):
    try:
        return form.model_validate_json(data)
    except ValidationError as exc:
        raise FormatError(_field(exc, "")) from None


_BRANCH = re.compile(r"(constrained-)?(int|float|str|bool|none)$|function-|tagged-union|fusedbench-|tuple\[|list\[")


def _field(exc: ValidationError, where: str) -> str:
    """The first error of a validation, as 'results['x'].samples[3][0]: Input should be a finite number (got -1.0)';
    of a union's branches (int or float) the last one's words."""
    errors = exc.errors(include_url=False)
    if errors[0]["type"] == "json_invalid":
        return f"not JSON ({errors[0]['ctx']['error']})"
    path = _path(errors[0]["loc"], where)
    error = [e for e in errors if _path(e["loc"], where) == path][-1]
    if error["type"] == "value_error":  # a check across fields (_require): its own words
        return f"{path or 'the file'}: {error['ctx']['error']}"
    got = "" if error["type"] == "missing" else f" (got {error.get('input')!r:.60})"
    return f"{path or 'the file'}: {error['msg']}{got}"


def _path(loc: tuple, where: str) -> str:
    """A field's place as written: where['name'].list[3].field (pydantic's names for branches left out)."""
    path = where
    for part in loc:
        if isinstance(part, int):
            path += f"[{part}]"
        elif not _BRANCH.match(str(part)):
            path += f".{part}" if path else str(part)
    return path
