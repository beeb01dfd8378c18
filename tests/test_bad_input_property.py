"""Bad data, generated: a minimal results folder (four groups, each of two A/A runs on one GPU, trimmed from results/)
mutated one way per example (a type swapped, a null, a truncated file, an extreme or negative number, a list
shortened or lengthened, an unknown name, a duplicated key, a special file, an unreadable folder), then one read
command run on it in-process. Whatever the mutation: exit 0 or 2 (1 only for `alert`'s red verdict), at most one
error line and no traceback, nothing on stderr but `warning:` and `error:` lines, and no cell read as ok with a time
the unmutated folder does not give it.

CI runs FUZZ_EXAMPLES (1,000) derandomized examples; FUSEDBENCH_FUZZ_EXAMPLES=10000 runs a longer sweep (docs/run.md,
"Exit codes and bad input")."""

from __future__ import annotations

import collections
import contextlib
import functools
import io
import itertools
import json
import math
import os
import shutil
import signal
import stat
import tempfile
import traceback
from pathlib import Path

from hypothesis import HealthCheck, given, seed, settings
from hypothesis import strategies as st

from fusedbench.cli import main

ROOT = Path(__file__).parent.parent
MACHINE = "h100-80gb-hbm3"
ENVIRONMENT = "existing-py_opt_torch_.venv_bin_python3"
# Two A/A pairs (the same code twice), baseline first: the quick suite's whole group (so alert judges it), and a
# default run's groups trimmed to a few cells. What is kept of each run: each benchmark's parameter values (None:
# all), and each group's record cells (an MLP cell's dtype and version are its key's).
QUICK, DEFAULT = ("dcb8dbf7", "7dd23c51"), ("6fd4f0d4", "8fda10a1")
KEPT = {
    "ceilings.CopyCeiling.time_copy": [],
    "ceilings.GemmCeiling.time_gemm": [["'fp16'"]],
    "cells.Quick.time_cell": [None, None, None],
    "cells.Fp16Seed.time_cell": [["'DEFAULT'", "'RELU_BIAS'", "'DRELU_BGRAD'"], None, None],
    "cells.Blog.time_cell": [None, None, None],
    "mlp.MlpEpoch.time_epoch": [["'fp16'"], ["'fused'", "'unfused'"]],
    "mlp.MlpEpoch.track_test_accuracy": [["'fp16'"], ["'fused'", "'unfused'"]],
}
RECORD_KEPT = {
    "Quick": {},
    "Fp16Seed": {"epilog": {"DEFAULT", "RELU_BIAS", "DRELU_BGRAD"}},
    "Blog": {},
    "MlpEpoch": {"dtype": {"fp16"}, "provider": {"fused", "unfused"}},
}
PER_SET = ("result", "stats_ci_99_a", "stats_ci_99_b", "stats_q_25", "stats_q_75", "stats_number", "stats_repeat")
SEED_SHAPE = "(65536,16384)x(16384,8192)"
SUITES = ("--suite", "quick", "--suite", "default", "--suite", "mlp")  # quick's group is whole: judged green
FUZZ_EXAMPLES = int(os.environ.get("FUSEDBENCH_FUZZ_EXAMPLES", "1000"))
CELL = f"RELU_BIAS/fp16/{SEED_SHAPE}/fused"
QUICK_RUNS, DEFAULT_RUNS = ",".join(QUICK), ",".join(DEFAULT)
COMMANDS = {
    "table": ["table", "{results}", "--format", "json"],
    "table --mlp": ["table", "{results}", "--format", "json", "--mlp"],
    "advise": ["advise", "{results}"],
    "compare": ["compare", "{results}", "--machine", MACHINE],
    "alert": ["alert", "{results}", "--machine", MACHINE, *SUITES],
    "history": ["history", "{results}", "--machine", MACHINE, "--cell", CELL],
    "report": ["report", "{results}", "-o", "{reports}"],
    "calibrate": ["calibrate", "{results}", "--machine", MACHINE, "--runs", QUICK_RUNS, "--runs", DEFAULT_RUNS],
}
# How often each is drawn: `table` most (it shows every cell read, which the test holds against the fixture's),
# `report` and `calibrate` least (each costs four tables)
DRAWN = [
    name
    for name, weight in {"table": 6, "table --mlp": 2, "advise": 3, "compare": 3, "alert": 3, "history": 3}.items()
    for _ in range(weight)
] + ["report", "calibrate"]
# Examples run side by side, a forked process each, on as many cores as there are (CI's two)
SHARDS = min(2, len(os.sched_getaffinity(0))) if hasattr(os, "fork") and hasattr(os, "sched_getaffinity") else 1


def _trimmed_row(columns: list[str], row: list, kept: list) -> list:
    """One benchmark's asv row with only the kept parameter values (each list of per-set values cut alike)."""
    named = dict(zip(columns, row, strict=False))
    params = named["params"]
    chosen = [values if keep is None else keep for values, keep in zip(params, kept, strict=True)]
    sets = list(itertools.product(*params))
    indices = [sets.index(combo) for combo in itertools.product(*chosen)] if params else [0]
    named["params"] = chosen
    for column in (*PER_SET, "samples"):
        if named.get(column) is not None:
            named[column] = [named[column][i] for i in indices]
    return [named.get(column) for column in columns[: len(row)]]


def build_fixture(target: Path) -> Path:
    """The minimal results folder: the kept benchmarks of both runs, the kept groups' records, machine.json."""
    source, folder = ROOT / "results" / MACHINE, target / MACHINE
    folder.mkdir(parents=True)
    shutil.copy(source / "machine.json", folder)
    for commit in (*QUICK, *DEFAULT):
        (path,) = source.glob(f"{commit}-{ENVIRONMENT}.json")
        document = json.loads(path.read_text())
        document["results"] = {
            name: _trimmed_row(document["result_columns"], row, KEPT[name])
            for name, row in document["results"].items()
            if name in KEPT
        }
        document["durations"] = {}
        (folder / path.name).write_text(json.dumps(document))
        for record in source.glob(f"{commit}-*.fbenv"):
            group = record.name.split("-")[1]
            if group not in RECORD_KEPT:
                continue
            kept = RECORD_KEPT[group]
            payload = json.loads(record.read_text())
            payload["cells"] = [c for c in payload["cells"] if all(c[f] in values for f, values in kept.items())]
            (folder / record.name).write_text(json.dumps(payload))
    return target


@functools.cache
def fixture() -> tuple[Path, dict]:
    """The fixture's folder, built once a session, and each of its files' JSON (what mutations draw from)."""
    folder = build_fixture(Path(tempfile.mkdtemp(prefix="fusedbench-fuzz-fixture-")) / "results")
    trees = {path.name: json.loads(path.read_text()) for path in sorted((folder / MACHINE).iterdir())}
    PLACES.update({name: places(tree) for name, tree in trees.items()})
    return folder, trees


READ = ("time_s", "samples", "ci_low_s", "ci_high_s")  # what is read of an ok cell


@functools.cache
def original() -> dict:
    """Each cell the unmutated fixture reads as ok, with READ: what a mutation may never add or change."""
    folder = str(fixture()[0])
    return ok_rows(run_command(["table", folder, "--format", "json"])[1]) | ok_rows(
        run_command(["table", folder, "--format", "json", "--mlp"])[1]
    )


def ok_rows(table_json: str) -> dict:
    """The cells `table --format json` (or `--mlp`) read as ok: {the row's other columns: its READ}."""
    rows = json.loads(table_json) if table_json else []
    return {
        tuple(value for name, value in row.items() if name in KEYS): tuple(row[name] for name in READ)
        for row in rows
        if row["status"] == "ok"
    }


KEYS = ("machine", "commit", "group", "epilog", "dtype", "m", "k", "n", "provider", "layers", "batch", "version")


def test_the_fixture_reads_whole_and_its_gate_is_green():
    fixture_folder = fixture()[0]
    assert len(original()) == 2 * (28 + 17 + 4 + 2)  # four groups, two runs; torch computes no DRELU_BGRAD
    assert all(read[0] > 0 and read[1] > 0 for read in original().values())
    code, out, err = run_command(["alert", str(fixture_folder), "--machine", MACHINE, *SUITES])
    assert code == 0 and out.startswith(f"fusedbench alert: green ({MACHINE}: no alert)")
    assert err.startswith("warning: 1 known fusion inversion(s)") and "DRELU_BGRAD/fp16" in err  # as on results/


# ---- mutations -------------------------------------------------------------------------------------------------------

EXTREME = [-1, 0, -0.0, math.nan, math.inf, -math.inf, 1e300, 1e-300, 10**30, -(10**30), 2**63]
OTHER_TYPES = [None, "x", True, 1.5, 7, [], {}, [1], {"a": 1}]
NAMES = ["bogus", "'bogus'", "", "RELU_BIASX", "'(0,0)x(0,0)'", "fp64", "Fp16Sed", "../../etc"]
JSON_KINDS = ("null", "type", "number", "name", "shorten", "lengthen", "duplicate")
FILE_KINDS = ("truncate", "fifo", "devzero", "dangling", "loop", "folder", "huge", "extra-fifo", "extra-loop")


PLACES: dict[str, list[tuple]] = {}  # each fixture file's places (filled with the fixture)


def places(tree, at=()) -> list[tuple]:
    """Every node of a JSON tree worth changing: each container and each leaf, but only the first two items of a
    list (a record's 600 readings of a clock are one place, not 600)."""
    found = [at]
    if isinstance(tree, dict):
        for key, value in tree.items():
            found += places(value, (*at, key))
    elif isinstance(tree, list):
        for index, value in enumerate(tree[:2]):
            found += places(value, (*at, index))
    return found


def json_type(value) -> str:
    """What JSON calls a value's type: a swap from 0.02 to 7 changes a number, not its type."""
    if isinstance(value, bool) or value is None:
        return repr(value)[:4]
    return "number" if isinstance(value, int | float) else type(value).__name__


def replace_at(tree, path, value):
    if not path:
        return value
    parent = tree
    for key in path[:-1]:
        parent = parent[key]
    parent[path[-1]] = value
    return tree


def node_at(tree, path):
    for key in path:
        tree = tree[key]
    return tree


def dumps_with_duplicate(tree, path) -> str:
    """JSON text of `tree` where the object at `path` lists its first key twice, a bogus value first: JSON's last
    value wins, so a reader that takes the first reads the bogus one."""

    def write(node, at):
        if isinstance(node, dict):
            items = [f"{json.dumps(k)}: {write(v, (*at, k))}" for k, v in node.items()]
            if at == path and node:
                items.insert(0, f'{json.dumps(next(iter(node)))}: "bogus"')
            return "{" + ", ".join(items) + "}"
        if isinstance(node, list):
            return "[" + ", ".join(write(v, (*at, i)) for i, v in enumerate(node)) + "]"
        return json.dumps(node)

    return write(tree, ())


@st.composite
def mutations(draw, trees: dict):
    """(file, kind, detail): one change to one file of the fixture (or beside it). asv's results files are drawn
    three times as often as a record (they hold the times), a change of the JSON three times as often as a special
    file, and each change among the places it applies to (a number among numbers, a name among strings)."""
    files = [name for name in sorted(trees) for _ in range(3 if name.endswith(f"-{ENVIRONMENT}.json") else 1)]
    name = draw(st.sampled_from(files))
    unreadable = ("unreadable",) if can_make_unreadable() else ()
    kind = draw(st.sampled_from(JSON_KINDS * 3 + FILE_KINDS + unreadable))
    if kind in JSON_KINDS:
        where = {"number": (int, float), "name": (str,), "duplicate": (dict,), "shorten": (list, dict)}
        where["lengthen"] = where["shorten"]
        kinds = where.get(kind)
        fitting = [p for p in PLACES[name] if kinds is None or type(node_at(trees[name], p)) in kinds]
        path = draw(st.sampled_from(fitting or PLACES[name]))
        node = node_at(trees[name], path)
        if kind == "duplicate":
            return name, kind, path
        if kind in ("shorten", "lengthen"):
            return name, kind, (path, draw(st.integers(0, 10**6)))
        choices = {"null": [None], "type": OTHER_TYPES, "number": EXTREME, "name": NAMES}[kind]
        value = draw(st.sampled_from([v for v in choices if kind != "type" or json_type(v) != json_type(node)]))
        return name, kind, (path, value)
    if kind == "truncate":
        return name, kind, draw(st.floats(0, 1))
    if kind == "unreadable":
        return draw(st.sampled_from([name, MACHINE, "."])), kind, None
    return name, kind, None


def apply(results: Path, trees: dict, mutation) -> None:
    name, kind, detail = mutation
    path = results / MACHINE / name if name != MACHINE and name != "." else results / name
    if kind in ("null", "type", "number", "name"):
        where, value = detail
        tree = replace_at(json.loads(json.dumps(trees[name])), where, value)
        path.write_text(json.dumps(tree))  # NaN and Infinity as Python's json writes them, as asv does
    elif kind in ("shorten", "lengthen"):
        where, pick = detail
        tree = json.loads(json.dumps(trees[name]))
        node = node_at(tree, where)
        if isinstance(node, list) and node:
            node.pop(pick % len(node)) if kind == "shorten" else node.append(node[pick % len(node)])
        elif isinstance(node, dict) and node:
            key = sorted(node)[pick % len(node)]
            node.pop(key) if kind == "shorten" else node.setdefault(f"{key}-bogus", node[key])
        path.write_text(json.dumps(tree))
    elif kind == "duplicate":
        path.write_text(dumps_with_duplicate(trees[name], detail))
    elif kind == "truncate":
        data = path.read_bytes()
        path.write_bytes(data[: int(len(data) * detail)])
    elif kind in ("fifo", "devzero", "dangling", "loop", "folder", "huge"):
        path.unlink()
        if kind == "fifo":
            os.mkfifo(path)
        elif kind == "devzero":
            path.symlink_to("/dev/zero")
        elif kind == "dangling":
            path.symlink_to(path.with_name("nothing-here.json"))
        elif kind == "loop":
            path.symlink_to(path)
        elif kind == "folder":
            path.mkdir()
        else:
            with open(path, "wb") as stream:  # a sparse 65 MiB file: nothing is written, only its size
                stream.truncate(65 * 2**20)
    elif kind == "extra-fifo":
        os.mkfifo(path.with_name(f"zz-{path.stem}{path.suffix}"))
    elif kind == "extra-loop":
        path.with_name(f"zz-{path.stem}{path.suffix}").symlink_to(path.with_name(f"zz-{path.stem}{path.suffix}"))
    elif kind == "unreadable":
        path.chmod(0)


# ---- running a command -----------------------------------------------------------------------------------------------

NOBODY = 65534


def can_make_unreadable() -> bool:
    """A folder made unreadable stops this process only where it is not root, or where it can fork and run the
    command as another user."""
    return os.geteuid() != 0 or hasattr(os, "fork")


def run_command(argv: list[str], *, as_other_user: bool = False) -> tuple[int, str, str]:
    """The command run in this process (in a forked child as user nobody where asked: root reads any file)."""
    if not as_other_user or os.geteuid() != 0:
        return _captured(argv)
    read, write = os.pipe()
    child = os.fork()
    if child == 0:  # pragma: no cover (the child's coverage is not collected)
        try:
            os.close(read)
            os.setgroups([])
            os.setgid(NOBODY)
            os.setuid(NOBODY)
            outcome = _captured(argv)
            with os.fdopen(write, "w") as stream:
                json.dump(outcome, stream)
        finally:
            os._exit(0)
    os.close(write)
    with os.fdopen(read) as stream:
        text = stream.read()
    os.waitpid(child, 0)
    return tuple(json.loads(text))


def _captured(argv: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(argv)
        except SystemExit as exited:  # argparse's usage errors
            code = exited.code
    return code, out.getvalue(), err.getvalue()


def test_no_bad_input_gives_a_traceback_a_false_verdict_or_a_bad_cell_read_as_good():
    """FUZZ_EXAMPLES examples, in SHARDS processes side by side, each shard seeded by its number (derandomized: the
    same examples every run); a shard's failure is its falsifying example and traceback."""
    fixture(), original()  # built once, before the shards fork
    per_shard = -(-FUZZ_EXAMPLES // SHARDS)
    children = [_in_child(_search, shard, per_shard) for shard in range(1, SHARDS)]
    try:
        outcomes = [_search(0, per_shard)]
    finally:
        outcomes += [child() for child in children]
    failures = [outcome for outcome in outcomes if isinstance(outcome, str)]
    assert not failures, "\n\n".join(failures)
    print(
        f"{FUZZ_EXAMPLES} examples in {SHARDS} shard(s):",
        dict(sum(map(collections.Counter, outcomes), start=collections.Counter())),
    )


def _search(shard: int, examples: int) -> dict:
    """One shard's examples; how each kind of mutation ended ({'kind: exit': count})."""
    ended: collections.Counter = collections.Counter()
    workspace = Path(tempfile.mkdtemp(prefix=f"fusedbench-fuzz-{shard}-"))
    workspace.chmod(0o755)  # the commands run as nobody must enter it

    @seed(shard)
    @settings(
        max_examples=examples,
        deadline=None,
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )
    @given(mutation=mutations(fixture()[1]), command=st.sampled_from(DRAWN))
    def example(mutation, command):
        ended[f"{mutation[1]}: exit {check_one(mutation, command, workspace)}"] += 1

    try:
        example()
    finally:
        _reset(workspace)
        workspace.rmdir()
    return dict(ended)


def _in_child(function, *args):
    """function(*args) in a forked process; the returned callable waits for its value (the traceback's text where
    it raised)."""
    read, write = os.pipe()
    child = os.fork()
    if child == 0:  # pragma: no cover (the child's coverage is not collected)
        try:
            os.close(read)
            try:
                outcome = function(*args)
            except BaseException:
                outcome = traceback.format_exc()
            with os.fdopen(write, "w") as stream:
                json.dump(outcome, stream)
        finally:
            os._exit(0)
    os.close(write)

    def outcome():
        with os.fdopen(read) as stream:
            text = stream.read()
        os.waitpid(child, 0)
        return json.loads(text) if text else "a shard ended without a word"

    return outcome


BLOCKED_AFTER_S = 30


def _blocked(*_) -> None:
    raise TimeoutError(f"the command ran {BLOCKED_AFTER_S} s: it blocked (a special file opened?)")


def check_one(mutation, command: str, workspace: Path) -> int:
    """The fixture, mutated, read by the command: what must hold of what it says and reads. Its exit code."""
    fixture_folder, trees = fixture()
    results, reports = workspace / "results", workspace / "reports"
    _reset(workspace)
    shutil.copytree(fixture_folder, results)
    _open_to_everyone(workspace)
    apply(results, trees, mutation)
    argv = [part.format(results=results, reports=reports) for part in COMMANDS[command]]
    signal.signal(signal.SIGALRM, _blocked)
    signal.alarm(BLOCKED_AFTER_S)  # a command that opens a FIFO would wait for a writer forever
    try:
        code, out, err = run_command(argv, as_other_user=mutation[1] == "unreadable")
    finally:
        signal.alarm(0)

    assert "Traceback" not in out + err
    assert all(line.startswith(("warning: ", "error: ")) for line in err.splitlines()), err
    assert sum(line.startswith("error: ") for line in err.splitlines()) <= 1, err
    if code == 1:  # a verdict, never a crash: only alert says red, after its verdict
        assert command == "alert" and out.startswith("fusedbench alert: RED"), (out, err)
    else:
        assert code in (0, 2), (code, err)
    if command.startswith("table") and code == 0:
        for key, read in ok_rows(out).items():
            before = original().get(key)
            same = before is not None and all(a == b or b != b for a, b in zip(before, read, strict=True))  # or NaN
            assert same and read[0] == before[0], f"{key} read as ok with {read}, the fixture says {before}"
    return code


def _reset(workspace: Path) -> None:
    for root, folders, _ in os.walk(workspace):
        for folder in folders:
            os.chmod(os.path.join(root, folder), 0o755)
    for child in workspace.iterdir():
        if child.is_dir() and not child.is_symlink():
            shutil.rmtree(child)
        else:
            child.unlink()


def _open_to_everyone(folder: Path) -> None:
    for root, folders, files in os.walk(folder):
        for name in folders:
            os.chmod(os.path.join(root, name), 0o755)
        for name in files:
            os.chmod(os.path.join(root, name), stat.S_IRUSR | stat.S_IWUSR | stat.S_IRGRP | stat.S_IROTH)
