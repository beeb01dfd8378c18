"""A stack: the NVIDIA libraries a measurement runs on, named and pinned, so that they become an axis of the history.

What moves a user's numbers is as often the stack (cuBLASLt, nvmath-python, cupy, torch, the CUDA runtime) as the
code. A stack is a lock file, `benchmarks/stacks/NAME.toml`:

    description = "nvmath-python 0.9.0 over the machine's own environment"
    [packages]             # installed into the stack's environment, exactly these versions
    nvmath-python = "0.9.0"
    [preload]              # shared libraries loaded by path before any GPU library, in this order
    libraries = ["/usr/local/cuda/lib64/libcublasLt.so.13"]

Its environment (`measure.stacks`) is a virtualenv over the environment fusedbench is installed in, the pinned
packages in front; the driver and the card are facts of the machine, recorded, never pinned. A run in a stack keeps
its history under a machine of its own, the GPU's name, STACK_MARK and the stack's name
(`h200-141gb-stack-nvmath-0.9`), as asv keys its results by the stack's environment; the GPU's own machine is the
environment fusedbench was installed in.
"""

from __future__ import annotations

import os
import re
import sys
from dataclasses import dataclass

from fusedbench.errors import FusedbenchError
from fusedbench.files import RefusedFile, read_regular

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover (Python 3.10)
    import tomli as tomllib

STACKS_DIR = os.path.join("benchmarks", "stacks")
STACK_MARK = "-stack-"  # between the GPU's machine name and the stack's
NAME = re.compile(r"[a-z0-9][a-z0-9.]*(?:-[a-z0-9.]+)*")
PACKAGE = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?")  # PEP 508's names
MARKS = (
    "paired",
    "tuned",
    "inject",
    "stack",
)  # a machine name's marks (catalog.deliberate): never a stack name's words
SITE_PACKAGES = "{site-packages}"  # in a preload path: each folder of the stack's environment that packages live in


@dataclass(frozen=True)
class Stack:
    """One pinned stack: its name (the lock file's), the packages pinned, the libraries preloaded by path."""

    name: str
    packages: dict[str, str]
    preload: tuple[str, ...] = ()
    description: str = ""

    def machine(self, gpu: str) -> str:
        return machine_in_stack(gpu, self.name)

    def requirements(self) -> list[str]:
        """The pins as pip takes them."""
        return [f"{package}=={version}" for package, version in self.packages.items()]


def machine_in_stack(gpu: str, stack: str) -> str:
    """The asv machine a run in stack `stack` ('' for none) records under."""
    return f"{gpu}{STACK_MARK}{stack}" if stack else gpu


def stack_path(repo: str, name: str) -> str:
    return os.path.join(repo, STACKS_DIR, f"{name}.toml")


def stack_names(repo: str) -> list[str]:
    """The stacks the checkout defines."""
    folder = os.path.join(repo, STACKS_DIR)
    names = (
        sorted(f[: -len(".toml")] for f in os.listdir(folder) if f.endswith(".toml")) if os.path.isdir(folder) else []
    )
    return [n for n in names if NAME.fullmatch(n)]


def check_name(name: str) -> None:
    """FusedbenchError where `name` cannot name a stack (its machine name must parse back)."""
    if not NAME.fullmatch(name) or set(name.split("-")) & set(MARKS):
        raise FusedbenchError(
            f"stack name {name!r}: lower-case letters, digits, dots and single hyphens, e.g. nvmath-0.9, without the "
            f"words {', '.join(MARKS)} (a machine name's marks)"
        )


def read_stack(repo: str, name: str) -> Stack:
    """The stack `name` (FusedbenchError naming the file and the field where it cannot be used)."""
    check_name(name)
    path = stack_path(repo, name)
    if not os.path.exists(path):
        have = ", ".join(stack_names(repo)) or "none"
        raise FusedbenchError(f"no stack {name!r}: {path} does not exist (the stacks defined: {have})")
    try:
        data = tomllib.loads(read_regular(path).decode("utf-8"))
    except (RefusedFile, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise FusedbenchError(f"{path} cannot be read as a stack ({exc}); fix it") from None
    return stack_from(name, data, path)


def stack_from(name: str, data: dict, path: str) -> Stack:
    """A stack from its lock file's parsed table, every field checked."""
    unknown = sorted(set(data) - {"description", "packages", "preload"})
    if unknown:
        raise FusedbenchError(f"{path}: unknown field {unknown[0]!r}; a stack has description, [packages], [preload]")
    packages = data.get("packages", {})
    if not isinstance(packages, dict) or not all(isinstance(v, str) and v for v in packages.values()):
        raise FusedbenchError(f'{path}: [packages] maps each package to an exact version, e.g. nvmath-python = "0.9.0"')
    misnamed = [p for p in packages if not PACKAGE.fullmatch(p)]
    if misnamed:
        raise FusedbenchError(
            f"{path}: {misnamed[0]!r} is not a package name pip knows (letters, digits, '.', '-', '_')"
        )
    loose = [f"{p} = {v!r}" for p, v in packages.items() if not re.fullmatch(r"[0-9][0-9A-Za-z.+!-]*", v)]
    if loose:
        raise FusedbenchError(f'{path}: {loose[0]} is not an exact version: a stack pins, e.g. "0.9.0"')
    preload = data.get("preload", {})
    libraries = preload.get("libraries", []) if isinstance(preload, dict) else None
    if not isinstance(libraries, list) or not all(isinstance(p, str) and p for p in libraries):
        raise FusedbenchError(
            f'{path}: [preload] libraries is a list of paths, e.g. ["/usr/local/cuda/lib64/libcublasLt.so.13"]'
        )
    if not packages and not libraries:
        raise FusedbenchError(f"{path}: a stack pins a package or preloads a library; this one does neither")
    return Stack(name, dict(packages), tuple(libraries), str(data.get("description", "")))
