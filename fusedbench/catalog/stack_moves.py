"""Where a pinned stack can move: the newest versions pip can install of its packages, and the chain of stacks from
one lock file to another that upgrades one package at a time (what `bisect --stacks` walks to name the package
that did it). The nightly workflow runs both (.github/workflows/nightly.yml)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

from fusedbench.catalog.stacks import Stack, check_name, stack_path
from fusedbench.errors import FusedbenchError
from fusedbench.files import write_text_atomically


def newest_versions(packages: list[str], pip_args: list[str]) -> dict[str, str]:
    """The newest version pip's index (or `pip_args`' wheels) offers of each package (`pip index versions`)."""
    found = {}
    for package in packages:
        done = subprocess.run([sys.executable, "-m", "pip", "index", "versions", package, "--disable-pip-version-check",
                               *pip_args], capture_output=True, text=True)  # fmt: skip
        named = re.match(rf"{re.escape(package)} \(([^)]+)\)", done.stdout.strip(), re.IGNORECASE)
        if named is None:
            tail = (done.stderr or done.stdout).strip().splitlines()[-1:] or [str(done.returncode)]
            raise FusedbenchError(f"pip finds no version of {package} ({tail[0]}); check the index, or --wheels")
        found[package] = named.group(1)
    return found


def newest_of(stack: Stack, name: str, pip_args: list[str]) -> Stack:
    """`stack` with every package at its newest version, as stack `name` (its preloads kept)."""
    versions = newest_versions(list(stack.packages), pip_args)
    return Stack(name, versions, stack.preload, f"the newest of stack {stack.name}'s packages pip offered")


def chain(start: Stack, end: Stack) -> list[Stack]:
    """The stacks from `start` to `end`, each upgrading one more package to `end`'s version (in `end`'s order), the
    last with `end`'s preloads: `end` itself. Named `<end>-1`, `<end>-2`, ... and `end` last."""
    differ = [p for p in end.packages if start.packages.get(p) != end.packages[p]]
    if not differ and start.preload == end.preload:
        raise FusedbenchError(f"stacks {start.name} and {end.name} pin the same: there is nothing between them")
    steps, packages = [], dict(start.packages)
    for i, package in enumerate(differ[:-1], start=1):
        packages[package] = end.packages[package]
        steps.append(Stack(f"{end.name}-{i}", dict(packages), start.preload,
                           f"{start.name} with {', '.join(differ[:i])} as in {end.name}"))  # fmt: skip
    return [*steps, end]


def write_stack(repo: str, stack: Stack) -> str:
    """The stack's lock file (benchmarks/stacks/NAME.toml), written whole; its path."""
    check_name(stack.name)
    lines = [f"description = {json.dumps(stack.description)}", "", "[packages]"]
    lines += [f"{json.dumps(package)} = {json.dumps(version)}" for package, version in stack.packages.items()]
    if stack.preload:
        lines += ["", "[preload]", f"libraries = {json.dumps(list(stack.preload))}"]
    path = stack_path(repo, stack.name)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    write_text_atomically(path, "\n".join(lines) + "\n")
    return path
