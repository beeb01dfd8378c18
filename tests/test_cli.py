"""The command line: catalog listing, usage errors and the no-GPU path, all without a GPU."""

import json
import subprocess
import sys

import pytest

from fusedbench.cli import main


def run_cli(capsys, *argv):
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_list_json_is_one_object_with_the_catalog(capsys):
    code, out, _ = run_cli(capsys, "list", "--json")
    assert code == 0
    catalog = json.loads(out)
    assert {"epilogs", "dtypes", "shapes", "providers"} <= catalog.keys()
    assert len(catalog["epilogs"]) == 16
    assert {"name": "RELU_BIAS", "value": 6}.items() <= catalog["epilogs"][4].items()
    assert catalog["dtypes"] == ["fp16", "bf16", "fp32", "tf32", "fp8"]
    assert catalog["shapes"]["seed"] == [[65536, 16384, 8192]]
    assert all(len(mkn) == 3 for shapes in catalog["shapes"].values() for mkn in shapes)
    assert catalog["providers"] == ["textbook", "unfused", "fused", "fused-autotuned", "torch", "gemm"]


def test_llm_shapes_name_their_source_model(capsys):
    _, out, _ = run_cli(capsys, "list", "--json")
    llm = json.loads(out)["shape_details"]["llm"]
    assert llm and all("config.json" in shape["source"] for shape in llm)


def test_list_prints_readable_tables(capsys):
    code, out, _ = run_cli(capsys, "list")
    assert code == 0
    for expected in ("DGELU_BGRAD", "208", "fp8", "membound", "fused-autotuned", "Llama-3-70B"):
        assert expected in out


def test_check_without_a_gpu_stack_exits_2_with_one_line(capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "cupy", None)  # as on a machine without fusedbench[cu12]/[cu13]
    code, out, err = run_cli(capsys, "check", "--epilog", "BIAS", "--dtype", "fp16")
    assert code == 2
    assert err.startswith("error: fusedbench check needs cupy")
    assert "fusedbench[cu12]" in err
    assert err.count("\n") == 1
    assert "Traceback" not in err + out


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["check", "--epilog", "SWISH"], "error: unknown epilog 'SWISH'; choose from DEFAULT"),
        (["check", "--dtype", "fp64"], "error: unknown dtype 'fp64'; choose from fp16, bf16"),
        (["check", "--shapes", "huge"], "error: unknown shape set 'huge'; choose from seed, llm"),
        (["check", "--provider", "cutlass"], "error: unknown provider 'cutlass'; choose from textbook"),
    ],
)
def test_bad_selection_names_the_value_and_the_choices(capsys, argv, message):
    code, _, err = run_cli(capsys, *argv)
    assert code == 2
    assert err.startswith(message)
    assert err.count("\n") == 1


def test_unknown_flag_is_one_line_and_exit_2():
    result = subprocess.run(
        [sys.executable, "-m", "fusedbench", "check", "--frobnicate"], capture_output=True, text=True, check=False
    )
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        "error: unrecognized arguments: --frobnicate (see 'fusedbench --help')"
    ]


def test_run_without_a_gpu_stack_points_to_the_table(capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "cupy", None)
    code, out, err = run_cli(capsys, "run", "--suite", "quick")
    assert code == 2
    assert out == ""
    assert err.startswith("error: fusedbench run needs cupy")
    assert "fusedbench table results/" in err
    assert err.count("\n") == 1


def test_run_refuses_an_unknown_suite_before_looking_for_a_gpu(capsys):
    code, _, err = run_cli(capsys, "run", "--suite", "huge")
    assert code == 2
    assert err.startswith("error: unknown suite 'huge'; choose from quick, default, full")
