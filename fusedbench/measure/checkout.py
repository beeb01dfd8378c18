"""The fusedbench checkout a run measures: where it is, its commit, and whether it has changes.

Results must name the code that produced them. With asv's `existing` environment the code
measured is the working tree, so a run needs the tree to be its commit: no changed tracked
files and no untracked ones under the code asv runs (`benchmarks/`, `fusedbench/`). What a
run writes (`results/`, `reports/`) does not count, so the same commit can be run again.
"""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass

from fusedbench.catalog.model import FormatError
from fusedbench.errors import FusedbenchError

CODE_FOLDERS = ("benchmarks", "fusedbench")  # untracked files here would be measured under HEAD
OUTPUT_FOLDERS = ("results", "reports")  # what runs write; changes here are data, not code


@dataclass(frozen=True)
class Checkout:
    root: str
    commit: str
    changes: tuple[str, ...]  # paths with changes that would make results lie about their commit

    @property
    def dirty(self) -> bool:
        return bool(self.changes)


def _git(root: str, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=root, capture_output=True, text=True, check=True).stdout


def _asv_config(folder: str):
    """asv's configuration at `folder` (FusedbenchError where asv cannot read it)."""
    from asv.config import Config
    from asv.util import UserError

    try:
        return Config.load(os.path.join(folder, "asv.conf.json"))
    except UserError as exc:
        raise FusedbenchError(f"asv cannot read {folder}/asv.conf.json ({exc})") from None


def is_fusedbench_root(folder: str) -> bool:
    """Whether `folder` holds fusedbench's asv configuration and suite."""
    if not os.path.isfile(os.path.join(folder, "benchmarks", "cells.py")):
        return False
    try:
        return _asv_config(folder).project == "fusedbench"
    except FusedbenchError:
        return False


def read_checkout(folder: str) -> Checkout:
    """The git checkout of fusedbench at `folder`; FusedbenchError when `folder` is not one."""
    if not is_fusedbench_root(folder):
        raise FusedbenchError(
            f"{folder} is not the root of a fusedbench checkout (no asv.conf.json for project fusedbench "
            "and benchmarks/cells.py); cd to the checkout's root first"
        )
    try:
        top = _git(folder, "rev-parse", "--show-toplevel").strip()
        if os.path.realpath(top) != os.path.realpath(folder):
            raise FusedbenchError(
                f"{folder} lies inside the git repository {top}, not at the root of its own fusedbench checkout; "
                "clone fusedbench and run from its root"
            )
        commit = _git(folder, "rev-parse", "HEAD").strip()
        status = _git(folder, "status", "--porcelain", "--untracked-files=all", "--", ".")
    except (OSError, subprocess.CalledProcessError) as exc:
        detail = (getattr(exc, "stderr", "") or str(exc)).strip().splitlines()
        raise FusedbenchError(
            f"{folder} needs to be a git checkout of fusedbench with a commit ({detail[0] if detail else exc})"
        ) from None
    return Checkout(folder, commit, _changes(status))


def _changes(porcelain: str) -> tuple[str, ...]:
    changes = []
    for line in porcelain.splitlines():
        state, path = line[:2], line[3:].split(" -> ")[-1].strip('"')
        top = path.split("/", 1)[0]
        if top in OUTPUT_FOLDERS:
            continue
        if state == "??" and top not in CODE_FOLDERS:
            continue  # an untracked notes file at the root is not code asv runs
        changes.append(path)
    return tuple(changes)


def require_clean_checkout(folder: str) -> Checkout:
    """The checkout, refused when it has changes a result could not name."""
    checkout = read_checkout(folder)
    if checkout.dirty:
        shown = ", ".join(checkout.changes[:3]) + (
            f" and {len(checkout.changes) - 3} more" if len(checkout.changes) > 3 else ""
        )
        raise FusedbenchError(
            f"the checkout has uncommitted changes ({shown}); commit or remove them, "
            "so results name the code they measured"
        )
    return checkout


def asv_results_dir(root: str) -> str:
    """asv's results folder, as asv.conf.json names it, relative to the checkout root."""
    return os.path.join(root, _asv_config(root).results_dir)


def asv_machine_in_use(results_dir: str) -> str | None:
    """The machine the running `asv run` records under: asv rewrites that machine's machine.json
    as the run starts, so it is the newest one (None where there is none)."""
    newest, machine = -1.0, None
    try:
        folders = os.listdir(results_dir)
    except OSError:
        return None
    from fusedbench.catalog.formats import read_machine

    for folder in folders:
        path = os.path.join(results_dir, folder, "machine.json")
        try:
            modified = os.path.getmtime(path)
            if modified > newest:
                newest, machine = modified, read_machine(path)  # a regular file of its form, or none
        except (OSError, FormatError):
            continue
    return machine
