"""The cutlass-evt peer without a GPU: the epilogue functions it traces, computed with numpy against the float64
reference; its refusals; the visitor trees CUTLASS's Python interface traces from them for sm_90; its compile
cache's place; and its groups in the peers suite."""

from __future__ import annotations

import importlib.util
import os
import sqlite3
import subprocess
import sys
from types import SimpleNamespace

import numpy as np
import pytest

from fusedbench.catalog.dtypes import dtype_spec
from fusedbench.catalog.epilogs import EPILOGS, Summed, epilog_spec
from fusedbench.catalog.providers import CUTLASS_EVT, FUSED, PROVIDERS, UNFUSED
from fusedbench.catalog.suites import GROUPS, PEER_ONLY_GROUPS, SUITES
from fusedbench.catalog.workloads import Workload
from fusedbench.errors import Skipped, Unsupported
from fusedbench.measure.gpu import cutlass_evt
from fusedbench.measure.reference import ReferenceInputs, reference_outputs
from fusedbench.measure.verify import verify_outputs

CUTLASS_EVT_EPILOGS, CUTLASS_EVT_DTYPES = PROVIDERS[CUTLASS_EVT].epilog_names, PROVIDERS[CUTLASS_EVT].dtypes

M, K, N = 24, 16, 40
REFUSED = [spec.name for spec in EPILOGS.values() if spec.name not in CUTLASS_EVT_EPILOGS]
# the dev extra installs nvidia-cutlass, so CI traces the trees; a bare install skips those tests, saying why
needs_cutlass = pytest.mark.skipif(
    importlib.util.find_spec("cutlass_cppgen") is None, reason="the visitor-tree tests need nvidia-cutlass"
)


def run_source(name: str, seed: int = 0):
    """The epilog's traced function run by numpy in float64 in C's frame, (batch, N, M) as the tracer sees it, with
    the interface's relu, tanh, multiply_add and sum; returns its outputs under the cell's names, in D's frame, and
    the reference's inputs."""
    spec, rng = epilog_spec(name), np.random.default_rng(seed)
    a, b = rng.standard_normal((M, K)), rng.standard_normal((K, N))
    inputs = ReferenceInputs(a=a, b=b, bias=rng.standard_normal(M) * 2, gelu_pre=rng.standard_normal((M, N)) * 2)
    function = cutlass_evt.evt_source(spec)
    arguments = {"accum": (a @ b).T[None], "bias": inputs.bias[None, None, :], "gelu_aux": inputs.gelu_pre.T[None]}
    scope = {
        "relu": lambda x: np.maximum(x, 0.0),
        "tanh": np.tanh,
        "multiply_add": lambda x, y, z: x * y + z,
        "sum": lambda x, dim: x.sum(axis=tuple(dim)),
    }
    exec(function.source, scope)  # our own generated source: the string CUTLASS parses
    returned = scope["epilog"](**{name: arguments[name] for name in function.inputs})
    returned = returned if isinstance(returned, tuple) else (returned,)
    outputs = {}
    for output, value in zip(function.outputs, returned, strict=True):
        outputs["result" if output == "D" else output] = value[0].T if value.ndim == 3 else value
    return outputs, inputs


@pytest.mark.parametrize("name", CUTLASS_EVT_EPILOGS)
def test_each_traced_function_computes_its_epilog(name):
    outputs, inputs = run_source(name)
    reference = reference_outputs(epilog_spec(name), inputs)
    assert sorted(outputs) == sorted(reference.outputs)
    checks = verify_outputs(outputs, reference, 1e-12)  # float64 arithmetic: a wrong constant is far off this
    assert all(check.ok for check in checks), [(check.name, check.detail) for check in checks if not check.ok]


@pytest.mark.parametrize("name", REFUSED)
def test_what_no_visitor_tree_computes_is_refused_by_name(name):
    spec = epilog_spec(name)
    reason = cutlass_evt.refusal(Workload(spec, dtype_spec("fp16"), M, K, N))
    expected = "sums an operand" if spec.summed in (Summed.A, Summed.B) else "ReLU bit-mask"
    assert reason.startswith(f"cutlass-evt: {name}") and expected in reason
    with pytest.raises(Unsupported, match=expected):
        cutlass_evt.evt_source(spec)


def test_dtypes_and_unaligned_rows_are_refused_with_the_fix():
    def refusal(dtype, m=M, k=K):
        return cutlass_evt.refusal(Workload(epilog_spec("BIAS"), dtype_spec(dtype), m, k, N))

    assert [refusal(dtype) for dtype in CUTLASS_EVT_DTYPES] == [None, None]
    assert refusal("fp32") == "cutlass-evt builds fp16 and bf16 kernels (fp32 accumulation), not fp32"
    assert "M and K must be multiples of 8 at fp16; (24,33)x(33,40) has M = 24, K = 33" in refusal("fp16", k=33)
    assert "multiples of 8 at bf16" in refusal("bf16", m=20)
    assert refusal("fp16", m=8, k=8) is None  # N may end anywhere: TMA clips the last tile


def test_a_machine_without_nvcc_skips_with_where_to_point(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.delenv("CUDA_INSTALL_PATH", raising=False)
    operands = SimpleNamespace(workload=Workload(epilog_spec("BIAS"), dtype_spec("fp16"), M, K, N))
    with pytest.raises(Skipped, match="compiles with nvcc, and none is on PATH; install the CUDA toolkit or set"):
        cutlass_evt.build_cutlass_evt(None, operands)
    monkeypatch.setenv("CUDA_INSTALL_PATH", str(tmp_path / "cuda"))
    with pytest.raises(Skipped, match="none is on PATH"):
        cutlass_evt.build_cutlass_evt(None, operands)
    (tmp_path / "cuda" / "bin").mkdir(parents=True)
    (tmp_path / "cuda" / "bin" / "nvcc").write_text("")
    assert cutlass_evt._nvcc() == str(tmp_path / "cuda" / "bin" / "nvcc")


def test_a_refused_cell_is_refused_before_anything_is_compiled(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))  # no nvcc: the refusal comes first all the same
    operands = SimpleNamespace(workload=Workload(epilog_spec("DRELU"), dtype_spec("fp16"), M, K, N))
    with pytest.raises(Unsupported, match="ReLU bit-mask"):
        cutlass_evt.build_cutlass_evt(None, operands)


@needs_cutlass
@pytest.mark.parametrize("dtype", CUTLASS_EVT_DTYPES)
@pytest.mark.parametrize("name", CUTLASS_EVT_EPILOGS)
def test_cutlass_traces_each_function_into_an_sm90_visitor_tree(name, dtype):
    """Tracing runs the interface's checks of the tree for sm_90 (a D that feeds another node is refused there, for
    one)."""
    cutlass = cutlass_evt._cutlass()
    visitor = cutlass_evt.traced_epilogue(cutlass, epilog_spec(name), dtype, N, M)
    outputs = cutlass_evt.evt_source(epilog_spec(name)).outputs
    assert set(outputs) <= set(visitor.example_inputs)


@needs_cutlass
def test_cutlass_s_compile_cache_opens_in_the_cache_directory_not_where_it_is_imported(tmp_path, monkeypatch):
    cache, elsewhere = tmp_path / "cache", tmp_path / "elsewhere"
    elsewhere.mkdir()
    code = (
        "from fusedbench.measure.gpu import cutlass_evt; cutlass_evt._cutlass(); import cutlass_library, sys; "
        "print(sys.modules['cutlass_cppgen.backend.compiler'].CACHE_FILE, hasattr(cutlass_library, 'generator'))"
    )
    environment = {**os.environ, "FUSEDBENCH_CUTLASS_CACHE": str(cache)}
    # "-m" among the arguments, as under `pytest -m gpu`: cutlass_library would leave out its generator
    command = [sys.executable, "-c", code, "-m", "gpu"]
    done = subprocess.run(command, cwd=elsewhere, env=environment, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == [str(cache / "compiled_cache.db"), "True"]
    assert os.listdir(elsewhere) == [] and (cache / "compiled_cache.db").exists()
    # a compiling process's cache merged into it: its kernels kept, the ones already there left alone
    other = tmp_path / "other.db"
    with sqlite3.connect(cache / "compiled_cache.db") as connection:
        schema = connection.execute("SELECT sql FROM sqlite_master WHERE name = 'compiled_operations'").fetchone()[0]
        connection.execute("INSERT INTO compiled_operations VALUES ('kept', x'01', x'02', 'a', '{}')")
    with sqlite3.connect(other) as connection:
        connection.execute(schema)
        connection.executemany(
            "INSERT INTO compiled_operations VALUES (?, x'03', x'04', ?, '{}')", [("kept", "b"), ("new", "c")]
        )
    cutlass_evt._merge_cache(str(other), str(cache / "compiled_cache.db"))
    with sqlite3.connect(cache / "compiled_cache.db") as connection:
        rows = connection.execute("SELECT op_key, op_name FROM compiled_operations ORDER BY op_key").fetchall()
    assert rows == [("kept", "a"), ("new", "c")]
    # a compiling process starts from a copy of the cache, so it finds what the machine compiled before
    monkeypatch.setattr(cutlass_evt, "CACHE_DIR", str(cache))
    (tmp_path / "work").mkdir()
    with sqlite3.connect(cutlass_evt._cache_copy(str(tmp_path / "work"), "0") + "/compiled_cache.db") as connection:
        assert connection.execute("SELECT op_key FROM compiled_operations ORDER BY op_key").fetchall() == [
            ("kept",),
            ("new",),
        ]
    assert cutlass_evt._cached_kernels() == 2  # a compiling process tells nvcc's work from a load by this count
    monkeypatch.setattr(cutlass_evt, "CACHE_DIR", str(tmp_path / "none yet"))
    assert os.listdir(cutlass_evt._cache_copy(str(tmp_path / "work"), "1")) == []
    assert cutlass_evt._cached_kernels() == 0


def test_nvcc_s_seconds_are_read_back_and_a_broken_record_is_no_record(monkeypatch, tmp_path):
    monkeypatch.setattr(cutlass_evt, "CACHE_DIR", str(tmp_path))
    record = tmp_path / cutlass_evt.NVCC_SECONDS_FILE
    assert cutlass_evt._recorded_nvcc_seconds() == {}
    record.write_text('{"BIAS/fp16/128x256x64 tiles, 1x2x1 clusters, TmaWarpSpecializedCooperative": 61.5}')
    assert cutlass_evt._recorded_nvcc_seconds() == {cutlass_evt._kernel_name("BIAS", "fp16"): 61.5}
    for broken in ("{", "[1, 2]", '{"BIAS/fp16": "slow"}'):
        record.write_text(broken)
        assert cutlass_evt._recorded_nvcc_seconds() == {}, broken


def test_the_cutlass_groups_time_the_trees_beside_fused_and_unfused_in_the_peers_suite():
    names = [name for name in GROUPS if name.endswith("Cutlass")]
    assert names == ["Fp16SeedCutlass", "Fp16MemboundCutlass", "Bf16SeedCutlass", "Bf16MemboundCutlass"]
    for name in names:
        group = GROUPS[name]
        assert group.providers == (UNFUSED, FUSED, CUTLASS_EVT) and group.epilogs == CUTLASS_EVT_EPILOGS
        assert name in PEER_ONLY_GROUPS and name in SUITES["peers"] and name not in SUITES["default"]
