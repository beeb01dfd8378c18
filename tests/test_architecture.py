"""The house rules, checked on the source: layers that import only downward in the order the data flows, no
import circles, GPU libraries only in fusedbench/measure/gpu/, and one model of a cell (no status strings or cell
dicts anywhere but fusedbench/catalog/model.py)."""

import ast
from pathlib import Path

from fusedbench.catalog.model import Status

ROOT = Path(__file__).parent.parent
PACKAGE = ROOT / "fusedbench"
GPU_LIBRARIES = {"cupy", "cupyx", "nvmath", "torch", "triton", "numba"}
# The layers in the order the data flows (docs/architecture.md): each imports only itself and those before it.
LAYERS = ("catalog", "measure", "results", "analysis", "regressions", "paired", "report", "cli")
# The foundation every layer may use, which imports nothing of the layers: errors, atomic files, statistics, rows of
# frames as plain tuples.
FOUNDATION = {
    "fusedbench",
    "fusedbench.errors",
    "fusedbench.files",
    "fusedbench.stats",
    "fusedbench.bootstrap",
    "fusedbench.frames",
}


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def sources(*folders: Path) -> dict[str, ast.Module]:
    return {module_name(p): ast.parse(p.read_text(), str(p)) for f in folders for p in sorted(f.rglob("*.py"))}


def imported_modules(tree: ast.Module) -> set[str]:
    """Every module an import statement names, at any depth (function-local imports count)."""
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return names


def test_fusedbench_modules_import_each_other_without_a_circle():
    modules = sources(PACKAGE)
    graph = {name: {m for m in imported_modules(tree) if m in modules and m != name} for name, tree in modules.items()}
    for name in modules:  # a package's own submodules are not a circle through it
        graph[name] -= {p for p in modules if name.startswith(p + ".")}
    state: dict[str, str] = {}

    def visit(name: str, path: list[str]) -> None:
        state[name] = "open"
        for target in sorted(graph[name]):
            assert state.get(target) != "open", f"import circle: {' -> '.join([*path, name, target])}"
            if target not in state:
                visit(target, [*path, name])
        state[name] = "done"

    for name in sorted(graph):
        if name not in state:
            visit(name, [])


def layer(module: str) -> int:
    """The module's place in LAYERS; -1 for the foundation."""
    if module in FOUNDATION:
        return -1
    return LAYERS.index(module.split(".")[1])


def test_every_module_lies_in_a_layer_or_the_foundation():
    for name in sources(PACKAGE):
        if name != "fusedbench.__main__":  # `python -m fusedbench`: the entry point above the CLI
            assert name in FOUNDATION or name.split(".")[1] in LAYERS, f"{name} is in no layer of {LAYERS}"


def test_layers_import_only_downward():
    modules = sources(PACKAGE)
    for name, tree in modules.items():
        if name == "fusedbench.__main__":
            continue
        for target in sorted(m for m in imported_modules(tree) if m in modules and m != "fusedbench"):
            assert layer(target) <= layer(name), (
                f"{name} ({LAYERS[layer(name)] if layer(name) >= 0 else 'foundation'}) imports {target}, "
                f"of a layer above it ({LAYERS[layer(target)]}); the order is {' -> '.join(LAYERS)}"
            )


def test_regressions_judge_what_was_measured_and_drive_nothing():
    """The verdict's layer reads cells and records, never `measure/`: what measures two codes side by side and then
    judges them is `paired/`, the layer above both."""
    for name, tree in sources(PACKAGE / "regressions").items():
        measured = sorted(m for m in imported_modules(tree) if m.startswith("fusedbench.measure"))
        assert not measured, f"{name} imports {measured[0]}: drive the GPU from fusedbench/paired/, judge here"


def test_only_fusedbench_measure_gpu_imports_a_gpu_library():
    for name, tree in sources(PACKAGE, ROOT / "benchmarks").items():
        gpu = {m.split(".")[0] for m in imported_modules(tree)} & GPU_LIBRARIES
        if gpu:
            assert name.startswith("fusedbench.measure.gpu"), f"{name} imports {sorted(gpu)}"


def test_no_status_strings_or_cell_dicts_outside_the_model():
    statuses = {status.value for status in Status}
    for name, tree in sources(PACKAGE, ROOT / "benchmarks").items():
        if name == "fusedbench.catalog.model":
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and node.value in statuses:
                raise AssertionError(f"{name}:{node.lineno} spells the status {node.value!r}; use model.Status")
            if isinstance(node, ast.Dict) and any(
                isinstance(k, ast.Constant) and k.value == "status" for k in node.keys
            ):
                raise AssertionError(f"{name}:{node.lineno} builds a cell dict; use model.Cell and its to_json()")


def test_the_cli_starts_without_importing_numpy_or_pandas():
    """`fusedbench --help` and the argument parser stay quick: the data libraries load with the command."""
    import subprocess
    import sys

    code = "import sys, fusedbench.cli; print(sorted({'numpy', 'pandas'} & set(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT).stdout
    assert out.strip() == "[]"


# Functions that are kernel source (CUDA C in a string, Triton or numba kernels): read as one piece of code.
KERNEL_SOURCE = {
    "fusedbench.measure.gpu.kernels": {"_epilog_kernel", "_row_sum_kernel"},
    "fusedbench.measure.gpu.triton_epilog": {"_kernels", "autotuned", "matmul_epilog"},
    "fusedbench.measure.gpu.walkthrough": {"make_kernel"},
}
LONGEST_FUNCTION = 60


def test_no_function_outside_kernel_source_is_over_60_lines():
    for name, tree in sources(PACKAGE).items():
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name not in KERNEL_SOURCE.get(
                name, ()
            ):
                length = node.end_lineno - node.lineno + 1
                assert length <= LONGEST_FUNCTION, f"{name}.{node.name} is {length} lines; split it"
