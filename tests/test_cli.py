"""The command line: catalog listing, usage errors and the no-GPU path, all without a GPU."""

import json
import re
import subprocess
import sys
from pathlib import Path

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
    ladder = ["textbook", "unfused", "fused", "fused-autotuned", "torch", "gemm"]
    peers = ["einsum", "numba-naive", "numba-tiled", "triton", "torch-compile", "cutlass-evt"]
    assert catalog["providers"] == [*ladder, *peers, "two-pass", "blog"]
    controls = [p["name"] for p in catalog["provider_details"] if p["control"]]
    assert controls == ["two-pass", "blog"]
    assert [p["name"] for p in catalog["provider_details"] if p["peer"]] == peers


def test_llm_shapes_name_their_source_model(capsys):
    _, out, _ = run_cli(capsys, "list", "--json")
    llm = json.loads(out)["shape_details"]["llm"]
    assert llm and all("config.json" in shape["source"] for shape in llm)


def test_list_prints_readable_tables_with_code_as_text_and_the_suites(capsys):
    code, out, _ = run_cli(capsys, "list")
    assert code == 0
    for expected in ("DGELU_BGRAD", "208", "fp8", "membound", "fused-autotuned", "Llama-3-70B"):
        assert expected in out
    assert "y[y < 0] = 0" in out  # not rich markup
    assert re.search(r"default\s+│\s+Fp16Llm\s+│\s+fp16\s+│\s+llm\s+│\s+864", out)
    assert re.search(r"quick\s+│\s+Quick\s+│\s+fp16\s+│\s+seed\s+│\s+30", out)


def test_list_json_gives_each_suites_groups_and_cell_counts(capsys):
    _, out, _ = run_cli(capsys, "list", "--json")
    suites = json.loads(out)["suites"]
    assert suites["quick"] == [{"group": "Quick", "dtype": "fp16", "shape_set": "seed", "cells": 30}]
    assert sum(g["cells"] for g in suites["default"]) == 2880 + 4  # the ladder's cells and the Blog control's
    assert {"group": "Blog", "dtype": "fp16", "shape_set": "seed", "cells": 4} in suites["default"]


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
    assert "without a GPU, `fusedbench report` and `fusedbench table` read the committed results/" in err
    assert err.count("\n") == 1


def test_run_refuses_an_unknown_suite_before_looking_for_a_gpu(capsys):
    code, _, err = run_cli(capsys, "run", "--suite", "huge")
    assert code == 2
    assert err.startswith("error: unknown suite 'huge'; choose from quick, default, full")


FIXTURE = str(Path(__file__).parent / "fixtures" / "results-h200")


def test_run_refuses_a_bad_bench_regex_before_looking_for_a_gpu(capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "cupy", None)
    code, out, err = run_cli(capsys, "run", "--bench", "[")
    assert code == 2 and out == ""
    assert err.startswith("error: --bench '[' is not a regular expression (unterminated character set")
    assert err.count("\n") == 1


@pytest.mark.parametrize(
    ("make", "argv", "message"),
    [
        (
            lambda tmp: (tmp / "file").write_text("x"),
            ["-o", "{tmp}/file"],
            "error: -o '{tmp}/file' is a file, not a folder",
        ),
        (lambda tmp: None, ["-o", "/sys/fusedbench"], "error: -o '/sys/fusedbench': '/sys' takes no new files"),
        (
            lambda tmp: None,
            ["-o", "{tmp}/out", "--export", "{tmp}/missing/cells.csv"],
            "error: --export '{tmp}/missing/cells.csv': the folder '{tmp}/missing' does not exist",
        ),
        (
            lambda tmp: (tmp / "d.csv").mkdir(),
            ["-o", "{tmp}/out", "--export", "{tmp}/d.csv"],
            "error: --export '{tmp}/d.csv' is a folder",
        ),
    ],
)
def test_report_refuses_an_output_it_could_not_write_before_any_work(capsys, tmp_path, make, argv, message):
    make(tmp_path)
    code, out, err = run_cli(capsys, "report", FIXTURE, *(a.format(tmp=tmp_path) for a in argv))
    assert code == 2 and out == ""
    assert err.startswith(message.format(tmp=tmp_path)) and err.count("\n") == 1
    assert not (tmp_path / "out").exists()  # no partial output


@pytest.mark.parametrize(
    ("missing", "argv", "message"),
    [
        ("kaleido", ["--png"], "error: --png needs kaleido"),
        ("pyarrow", ["--export", "{tmp}/cells.parquet"], "error: --export '{tmp}/cells.parquet' needs pyarrow"),
    ],
)
def test_report_checks_optional_dependencies_before_any_work(capsys, tmp_path, monkeypatch, missing, argv, message):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name in (missing, "fastparquet") else real(name, *a)
    )
    code, _, err = run_cli(
        capsys, "report", FIXTURE, "-o", str(tmp_path / "out"), *(a.format(tmp=tmp_path) for a in argv)
    )
    assert code == 2 and err.startswith(message.format(tmp=tmp_path)) and err.count("\n") == 1
    assert not (tmp_path / "out").exists()


def test_a_full_disk_on_stdout_is_one_line_and_exit_2():
    with open("/dev/full", "w") as full:
        result = subprocess.run(
            [sys.executable, "-m", "fusedbench", "table", FIXTURE], stdout=full, stderr=subprocess.PIPE, text=True
        )
    assert result.returncode == 2
    assert result.stderr == "error: could not write to standard output (No space left on device)\n"


def test_a_reader_that_stops_early_ends_the_table_quietly():
    command = f"{sys.executable} -m fusedbench table {FIXTURE} | head -1"
    result = subprocess.run(["bash", "-o", "pipefail", "-c", command], capture_output=True, text=True)
    assert result.stdout.startswith("machine,commit,group,epilog") and result.stdout.count("\n") == 1
    assert result.stderr == "" and result.returncode == 0


def test_machine_names_asvs_machine_after_the_gpu_and_prints_it(capsys, monkeypatch):
    import fusedbench.measure.machine
    import fusedbench.measure.telemetry

    registered = []
    monkeypatch.setattr(fusedbench.measure.telemetry, "nvml_device", lambda: ("NVIDIA H100 80GB HBM3", 85_520_809_984))
    monkeypatch.setattr(fusedbench.measure.machine, "register_asv_machine", lambda name, cwd: registered.append(name))
    assert run_cli(capsys, "machine") == (0, "h100-80gb-hbm3\n", "")
    assert registered == ["h100-80gb-hbm3"]


def test_machine_without_a_gpu_is_one_line(capsys, monkeypatch):
    import fusedbench.measure.telemetry
    from fusedbench.errors import GpuUnavailable

    def no_gpu():
        raise GpuUnavailable("NVML found no NVIDIA driver or GPU (NVML Shared Library Not Found)")

    monkeypatch.setattr(fusedbench.measure.telemetry, "nvml_device", no_gpu)
    code, out, err = run_cli(capsys, "machine")
    assert (code, out) == (2, "")
    assert err == (
        "error: NVML found no NVIDIA driver or GPU (NVML Shared Library Not Found); "
        "fusedbench machine names asv's machine after its GPU: run it on the GPU runner\n"
    )


def test_list_gives_the_asv_bench_expression_of_a_suite(capsys):
    from fusedbench.catalog.suites import suite_bench_regex

    assert run_cli(capsys, "list", "--asv-bench", "quick") == (0, r"^(ceilings\.|cells\.Quick\.)" + "\n", "")
    mlp = r"^(mlp\.MlpStep\.|mlp\.MlpEpoch\.)" + "\n"  # no ceilings: the MLP's steps have no floors
    assert run_cli(capsys, "list", "--asv-bench", "mlp")[1] == mlp
    assert run_cli(capsys, "list", "--asv-bench", "default")[1] == suite_bench_regex("default") + "\n"
    code, _, err = run_cli(capsys, "list", "--asv-bench", "huge")
    assert code == 2 and err.startswith("error: unknown suite 'huge'")


def test_nvml_without_a_driver_is_gpu_unavailable_in_one_line(monkeypatch):
    import pynvml

    from fusedbench.errors import GpuUnavailable
    from fusedbench.measure.telemetry import nvml_device

    def no_driver():
        raise pynvml.NVMLError(pynvml.NVML_ERROR_LIBRARY_NOT_FOUND)

    monkeypatch.setattr(pynvml, "nvmlInit", no_driver)
    with pytest.raises(GpuUnavailable, match=r"^NVML found no NVIDIA driver or GPU \(.+\)$"):
        nvml_device()


def test_list_output_that_cannot_be_written_is_one_line_and_a_closed_pipe_is_quiet():
    with open("/dev/full", "w") as full:
        result = subprocess.run(
            [sys.executable, "-m", "fusedbench", "list"], stdout=full, stderr=subprocess.PIPE, text=True
        )
    assert (result.returncode, result.stderr) == (
        2,
        "error: could not write to standard output (No space left on device)\n",
    )
    command = f"{sys.executable} -m fusedbench list | head -1"
    piped = subprocess.run(["bash", "-o", "pipefail", "-c", command], capture_output=True, text=True)
    assert (piped.returncode, piped.stderr) == (0, "") and piped.stdout.count("\n") == 1


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["table", "--machine", ""], "argument --machine: expected one or more comma-separated names, got ''"),
        (["check", "--epilog", ","], "argument --epilog: expected one or more comma-separated names, got ','"),
        (["check", "--seed", "-1"], "argument --seed: expected a whole number from 0 to 2**32 - 1, got '-1'"),
        (["list", "--json", "--asv-bench", "quick"], "argument --asv-bench: not allowed with argument --json"),
    ],
)
def test_an_empty_name_list_a_bad_seed_and_clashing_flags_are_usage_errors(capsys, argv, message):
    with pytest.raises(SystemExit) as stop:
        main(argv)
    assert stop.value.code == 2
    assert capsys.readouterr().err.startswith(f"error: {message}")


def test_one_machines_folder_is_refused_with_the_folder_to_pass_instead(capsys):
    code, _, err = run_cli(capsys, "table", f"{FIXTURE}/h200-141gb")
    assert (
        code == 2
        and err
        == f"error: {FIXTURE}/h200-141gb is one machine's folder; pass the results folder above it ({FIXTURE})\n"
    )
