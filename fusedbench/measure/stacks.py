"""A stack's environment (`catalog.stacks`), made and recognised, and the library files a process actually loaded.

The environment is a virtualenv in `.stacks/NAME` of the checkout, over the environment fusedbench runs in: a `.pth`
file adds that environment's package folders behind the stack's own (as a site folder, so its editable installs
work), the pinned packages are installed into the stack's own folder by pip (in front, so they are what is
imported), and the preloaded libraries are loaded by path, with RTLD_GLOBAL, as every Python of the environment
starts: cuda-pathfinder, through which nvmath-python finds cuBLASLt, takes a library already loaded before it
searches, so the preloaded file is the one every later load gets. `fusedbench-stack.json` at the environment's root
says which stack it is; a Python started in it (asv's benchmark processes through `-E existing:PATH`, a side of
`ab --stack`) records under the stack's machine and names the stack in its records.

What a record says of the libraries is read from the process itself (`/proc/self/maps`): the files loaded, with the
version their names carry, not the versions pip says are installed.
"""

from __future__ import annotations

import glob
import json
import os
import re
import subprocess
import sys

from fusedbench.catalog.stacks import SITE_PACKAGES, Stack
from fusedbench.errors import FusedbenchError
from fusedbench.files import write_text_atomically

ENVIRONMENTS = ".stacks"  # under the checkout, ignored by git
MARKER = "fusedbench-stack.json"
PRELOAD_PTH = "fusedbench_stack.pth"
# the libraries a timing depends on, as a process maps them (cuBLAS(Lt), the CUDA runtime and driver, NVRTC, nvJitLink)
LIBRARY = re.compile(r"/(lib(?:cublasLt|cublas|cudart|cuda|nvrtc|nvJitLink))\.so(?:\.([0-9.]+))?$")


def environment_dir(repo: str, name: str) -> str:
    return os.path.join(repo, ENVIRONMENTS, name)


def stack_python(repo: str, stack: Stack) -> str:
    """The Python of the stack's environment (FusedbenchError where it was not made, or for another lock file)."""
    root = environment_dir(repo, stack.name)
    python = os.path.join(root, "bin", "python")
    made = read_marker(root)
    if made is None or not os.path.exists(python):
        raise FusedbenchError(
            f"stack {stack.name!r} has no environment yet: run `fusedbench stack create {stack.name}`"
        )
    if not made_from(made, stack):
        raise FusedbenchError(
            f"the environment of stack {stack.name!r} ({root}) was made from another version of its lock file: run "
            f"`fusedbench stack create {stack.name}` again"
        )
    return python


def made_from(made: dict, stack: Stack) -> bool:
    """Whether an environment's marker says it was made from this version of the stack's lock file."""
    return made.get("packages") == stack.packages and made.get("preload") == list(stack.preload)


def read_marker(root: str) -> dict | None:
    try:
        with open(os.path.join(root, MARKER), encoding="utf-8") as stream:
            return json.load(stream)
    except (OSError, ValueError):
        return None


def current_stack() -> str:
    """The stack this Python runs in ('' outside one)."""
    return str((read_marker(sys.prefix) or {}).get("name", ""))


def create_environment(repo: str, stack: Stack, pip_args: list[str]) -> str:
    """Make (again) the stack's environment over this one and install its pins (`pip_args`: where pip finds them,
    e.g. --no-index --find-links DIR); its Python. Nothing but the pins is installed: the rest is this environment's.

    The pins go in first, into the bare environment (pip then installs each, even one this environment has at the same
    version, which would otherwise be taken as installed and followed wherever this environment moves), the preloads
    are resolved after them (`{site-packages}` finds the stack's own pinned copy first), and the `.pth` last."""
    root = environment_dir(repo, stack.name)
    if os.path.exists(root):  # made again from scratch: an old pin must not linger
        import shutil

        shutil.rmtree(root)
    _run([sys.executable, "-m", "venv", "--without-pip", root], f"making the environment of stack {stack.name!r}")
    python = os.path.join(root, "bin", "python")
    site = _site_packages(python)
    if stack.packages:
        _run(
            [sys.executable, "-m", "pip", "--python", python, "install", "--no-deps", "--no-compile",
             "--disable-pip-version-check", *pip_args, *stack.requirements()],
            f"installing stack {stack.name!r}'s packages ({', '.join(stack.requirements())})",
        )  # fmt: skip
    libraries = [_resolved(pattern, [site, *_own_site_folders()]) for pattern in stack.preload]
    write_text_atomically(os.path.join(site, PRELOAD_PTH), _pth_line(_own_site_folders(), libraries))
    marker = {"name": stack.name, "packages": stack.packages, "preload": list(stack.preload), "loads": libraries}
    write_text_atomically(os.path.join(root, MARKER), json.dumps(marker, indent=1) + "\n")
    return python


def _own_site_folders() -> list[str]:
    """The package folders of the environment fusedbench runs in, which a stack's sits over (a virtualenv hides the
    user's site folder: so does a stack's)."""
    import site

    return [p for p in site.getsitepackages() if os.path.isdir(p)]


def _site_packages(python: str) -> str:
    done = subprocess.run([python, "-I", "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                          capture_output=True, text=True)  # fmt: skip
    if done.returncode != 0:
        raise FusedbenchError(f"the new environment's Python {python} does not start: {done.stderr.strip()}")
    return done.stdout.strip()


def _resolved(pattern: str, sites: list[str]) -> str:
    """A preload path, as the file it names here: `{site-packages}` stands for each package folder the stack sees,
    the stack's own first; `$VARIABLES` and globs are expanded (the first match in sorted order). FusedbenchError
    where no file matches."""
    candidates = [pattern.replace(SITE_PACKAGES, site) for site in sites] if SITE_PACKAGES in pattern else [pattern]
    for candidate in candidates:
        for path in sorted(glob.glob(os.path.expandvars(os.path.expanduser(candidate)))):
            if os.path.isfile(path):
                return os.path.realpath(path)
    raise FusedbenchError(f"the stack preloads {pattern!r}, which is no file here; fix its path in the lock file")


def _pth_line(sites: list[str], libraries: list[str]) -> str:
    """One line a `.pth` runs as Python starts: this environment's package folders behind the stack's, then the
    preloads, by path, in order."""
    return (
        f"import ctypes, functools, site; list(map(site.addsitedir, {sites!r})); "
        f"list(map(functools.partial(ctypes.CDLL, mode=ctypes.RTLD_GLOBAL), {libraries!r}))\n"
    )


def _run(command: list[str], what: str) -> None:
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        tail = " | ".join((done.stderr or done.stdout).strip().splitlines()[-3:])
        raise FusedbenchError(f"{what} failed: {tail}")


def loaded_libraries(maps: str = "/proc/self/maps") -> dict[str, dict[str, str]]:
    """The GPU libraries this process has loaded: {library: {"path", "version"}}, the version as the file's name
    gives it ('' where it gives none); {} where the process map cannot be read."""
    try:
        with open(maps, encoding="utf-8") as stream:
            paths = {line.split(None, 5)[-1].strip() for line in stream if "/lib" in line}
    except OSError:
        return {}
    found = {}
    for path in sorted(paths):
        named = LIBRARY.search(path)
        if named:
            found[named.group(1)] = {"path": path, "version": named.group(2) or ""}
    return found


def stack_facts() -> dict:
    """What a record and a side's hello say of the stack: its name, this Python, the version of each pinned package
    it imports (where a PYTHONPATH puts another first, that one's), and the libraries loaded."""
    from importlib.metadata import PackageNotFoundError, version

    made = read_marker(sys.prefix) or {}
    packages = {}
    for package in made.get("packages", {}):
        try:
            packages[package] = version(package)
        except PackageNotFoundError:
            packages[package] = ""
    return {"name": str(made.get("name", "")), "python": sys.executable, "packages": packages,
            "libraries": loaded_libraries()}  # fmt: skip
