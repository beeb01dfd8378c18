"""Workloads, dtypes and shape sets: the cells fusedbench knows."""

import importlib

import pytest

from fusedbench.catalog.dtypes import DTYPES, dtype_spec
from fusedbench.catalog.providers import select_providers
from fusedbench.catalog.shapes import SHAPE_SETS, shape_set
from fusedbench.catalog.workloads import build_workloads
from fusedbench.errors import FusedbenchError


def test_workload_order_is_stable_so_a_seed_reproduces_a_check():
    first = build_workloads(shapes=shape_set("small"))
    assert first == build_workloads(shapes=shape_set("small"))
    assert first[0].label == "DEFAULT/fp16/(128,64)x(64,96)"
    assert len(first) == 16 * 5 * 3


def test_selection_narrows_the_cross_product():
    workloads = build_workloads(epilogs=["BIAS", "relu"], dtypes=["bf16"], shapes=shape_set("seed"))
    assert [w.label for w in workloads] == [
        "BIAS/bf16/(65536,16384)x(16384,8192)",
        "RELU/bf16/(65536,16384)x(16384,8192)",
    ]


def test_seed_shape_is_the_blogs():
    (seed,) = SHAPE_SETS["seed"]
    assert str(seed) == "(65536,16384)x(16384,8192)"


def test_membound_shapes_have_small_k_and_large_results():
    for shape in SHAPE_SETS["membound"]:
        assert 256 <= shape.k <= 1024
        assert shape.m * shape.n >= 2**28


def test_small_set_includes_extents_that_are_not_multiples_of_8_or_16():
    extents = [shape.mkn for shape in SHAPE_SETS["small"]]
    assert any(all(e % 16 == 0 for e in mkn) for mkn in extents)
    assert any(all(e % 8 == 0 for e in mkn) and any(e % 16 for e in mkn) for mkn in extents)
    assert any(any(e % 8 for e in mkn) for mkn in extents)


def test_fp8_needs_multiples_of_16_and_a_wider_result():
    fp8 = dtype_spec("fp8")
    assert fp8.fits(128, 64, 96) and not fp8.fits(200, 72, 136)
    assert (fp8.operand, fp8.result) == ("float8_e4m3fn", "bfloat16")
    assert DTYPES["tf32"].compute_type == "COMPUTE_32F_FAST_TF32"


def test_unknown_provider_is_refused_with_the_choices():
    assert select_providers(None)[0] == "textbook"
    with pytest.raises(FusedbenchError, match="unknown provider 'x'; choose from textbook, unfused"):
        select_providers(["x"])


def test_a_provider_is_one_registered_unit_whose_builder_resolves_without_a_gpu():
    from fusedbench.catalog.providers import PROVIDERS, provider_libraries
    from fusedbench.measure.gpu.providers import builder_of

    for name, provider in PROVIDERS.items():
        assert callable(builder_of(name)) and builder_of(name).__name__ == provider.builder.split(":")[1]
        if provider.precompile:  # resolves without a GPU, too
            module, function = provider.precompile.split(":")
            assert callable(getattr(importlib.import_module(module), function))
        assert provider.color.startswith("#") and len(provider.color) == 7 and provider.description
    assert provider_libraries(PROVIDERS) == [
        "nvmath-python",
        "cupy",
        "torch",
        "numba",
        "numba_cuda",
        "triton",
        "cutlass_cppgen",
    ]
    assert provider_libraries(["fused", "gemm"]) == ["nvmath-python"]


def test_asv_versions_come_from_the_groups_and_are_byte_identical_to_the_history_they_key():
    """asv keys a benchmark's history by its class name and version: the versions are derived from each group's
    declaration, and must stay exactly the strings the committed results were recorded under (a changed string
    starts a new history; change one only with the measurement, and this file with it)."""
    import json
    from pathlib import Path

    from fusedbench.catalog.suites import ASV_VERSIONS, GROUPS, MLP_GROUPS

    pinned = json.loads((Path(__file__).parent / "fixtures" / "asv_versions.json").read_text())
    assert pinned == ASV_VERSIONS
    assert {name: g.version for name, g in {**GROUPS, **MLP_GROUPS}.items()} == {
        k: v for k, v in pinned.items() if "Ceiling" not in k
    }


def test_a_groups_kind_is_declared_not_read_from_its_name():
    from fusedbench.catalog.suites import CONTROL_GROUPS, GROUPS, PEER_ONLY_GROUPS, GroupKind

    assert {"Blog", "TwoPass"} == CONTROL_GROUPS
    assert {n for n, g in GROUPS.items() if g.kind is GroupKind.PEER_ONLY} == PEER_ONLY_GROUPS
    assert {g.kind for n, g in GROUPS.items() if n.endswith("Peers")} == {GroupKind.PEERS}
    assert GROUPS["Fp16Seed"].kind is GroupKind.LADDER and GROUPS["Quick"].kind is GroupKind.LADDER
