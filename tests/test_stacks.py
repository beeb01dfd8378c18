"""Stacks on the CPU: lock files read or refused in a line, environments made over this one with pip (the pins of two
stacks differ in a package built here), the libraries a process loaded, and `ab --stack A --stack B` end to end with
the stand-in worker started by each stack's Python."""

from __future__ import annotations

import base64
import hashlib
import json
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from conftest import git, make_checkout
from test_ab import FAKE, MACHINE, PYPROJECT, WORKER, run

from fusedbench.catalog.deliberate import baseline_machine, gpu_machine, stack_machine
from fusedbench.catalog.stacks import read_stack
from fusedbench.catalog.suites import ASV_VERSIONS
from fusedbench.cli import main
from fusedbench.errors import FusedbenchError
from fusedbench.measure import confirm as measure
from fusedbench.measure.stacks import create_environment, loaded_libraries, stack_python
from fusedbench.paired.ab import dependency_changes, stack_differences

ROOT = Path(__file__).parent.parent
PROBE = "fbstackprobe"


def wheel(folder: Path, version: str, name: str = PROBE, extra: dict[str, bytes] | None = None) -> None:
    """A pure-Python wheel of `name` (PROBE) at `version` (with `extra` files), as pip installs any."""
    dist = f"{name}-{version}.dist-info"
    files = {
        f"{name}/__init__.py": f"VERSION = {version!r}\n".encode(),
        f"{dist}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n".encode(),
        f"{dist}/WHEEL": b"Wheel-Version: 1.0\nGenerator: tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    } | (extra or {})
    record = "".join(
        f"{p},sha256={base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b'=').decode()},{len(data)}\n"
        for p, data in files.items()
    )
    files[f"{dist}/RECORD"] = (record + f"{dist}/RECORD,,\n").encode()
    with zipfile.ZipFile(folder / f"{name}-{version}-py3-none-any.whl", "w") as archive:
        for path, data in files.items():
            archive.writestr(path, data)


def lock(root: Path, name: str, text: str) -> None:
    (root / "benchmarks" / "stacks").mkdir(parents=True, exist_ok=True)
    (root / "benchmarks" / "stacks" / f"{name}.toml").write_text(text)


@pytest.fixture(scope="module")
def wheels(tmp_path_factory):
    folder = tmp_path_factory.mktemp("wheels")
    for version in ("1.0", "2.0"):
        wheel(folder, version)
        wheel(folder, version, "fbstackother")
    return folder


@pytest.mark.parametrize(
    "text, says",
    [
        ('[packages]\nnumpy = ">=1.25"\n', "numpy = '>=1.25' is not an exact version: a stack pins"),
        ("[packages]\nnumpy = 2\n", "[packages] maps each package to an exact version"),
        ('[preload]\nlibraries = "/lib/x.so"\n', "[preload] libraries is a list of paths"),
        ('description = "nothing"\n', "a stack pins a package or preloads a library; this one does neither"),
        ('[packagez]\nnumpy = "2.0"\n', "unknown field 'packagez'; a stack has description, [packages], [preload]"),
        ("[packages\n", "cannot be read as a stack"),
        ('[packages]\n"foo>=1; x" = "1.0"\n', "'foo>=1; x' is not a package name pip knows"),
        ('[packages]\n"-e" = "1.0"\n', "'-e' is not a package name pip knows"),
    ],
)
def test_a_lock_file_that_cannot_be_used_is_refused_in_a_line_naming_it(tmp_path, text, says):
    lock(tmp_path, "bad", text)
    with pytest.raises(FusedbenchError, match=re.escape(says)) as refused:
        read_stack(str(tmp_path), "bad")
    assert "bad.toml" in str(refused.value) or "cannot be read" in str(refused.value)


def test_an_unknown_stack_or_a_bad_name_is_refused_with_the_stacks_there_are(tmp_path):
    lock(tmp_path, "probe-1", '[packages]\nfbstackprobe = "1.0"\n')
    with pytest.raises(FusedbenchError, match=r"no stack 'probe-2': .* \(the stacks defined: probe-1\)"):
        read_stack(str(tmp_path), "probe-2")
    with pytest.raises(FusedbenchError, match="stack name 'Probe_1'"):
        read_stack(str(tmp_path), "Probe_1")
    with pytest.raises(FusedbenchError, match="without the words paired, tuned, inject, stack"):
        read_stack(str(tmp_path), "nightly-paired-1")


def test_each_stacks_environment_imports_its_own_pin_over_this_one_and_a_changed_lock_file_is_made_again(
    tmp_path, wheels
):
    for version in ("1.0", "2.0"):
        lock(tmp_path, f"probe-{version}", f'[packages]\nfbstackprobe = "{version}"\n')
    pythons = {}
    for version in ("1.0", "2.0"):
        stack = read_stack(str(tmp_path), f"probe-{version}")
        pythons[version] = create_environment(str(tmp_path), stack, ["--no-index", "--find-links", str(wheels)])
        assert stack_python(str(tmp_path), stack) == pythons[version]
    for version, python in pythons.items():
        said = subprocess.run(
            [python, "-c", "import fbstackprobe, fusedbench, pandas, json; from fusedbench.measure.stacks import "
             "stack_facts; print(json.dumps([fbstackprobe.VERSION, stack_facts()]))"],
            capture_output=True, text=True, check=True,
        ).stdout  # fmt: skip
        imported, facts = json.loads(said)
        assert imported == version  # the pin, in front of this environment's packages (fusedbench, pandas found too)
        assert facts["name"] == f"probe-{version}" and facts["packages"] == {PROBE: version}
    assert subprocess.run([sys.executable, "-c", "import fbstackprobe"], capture_output=True).returncode != 0
    lock(tmp_path, "probe-1.0", '[packages]\nfbstackprobe = "2.0"\n')
    with pytest.raises(
        FusedbenchError, match="made from another version of its lock file: run `fusedbench stack create"
    ):
        stack_python(str(tmp_path), read_stack(str(tmp_path), "probe-1.0"))


def unloaded_library() -> str | None:
    """A shared library of this machine that a plain Python does not load: a preload's own doing where it is mapped."""
    maps = subprocess.run([sys.executable, "-c", "print(open('/proc/self/maps').read())"], capture_output=True,
                          text=True).stdout  # fmt: skip
    for name in ("libsqlite3.so.0", "libexpat.so.1", "libuuid.so.1", "libzstd.so.1"):
        for folder in ("/usr/lib/x86_64-linux-gnu", "/usr/lib64", "/lib/x86_64-linux-gnu"):
            path = Path(folder) / name
            if path.exists() and str(path.resolve()) not in maps:
                return str(path)
    return None


def test_a_stack_preloads_its_libraries_by_path_in_every_python_it_starts(tmp_path):
    library = unloaded_library()
    if library is None:
        pytest.skip("no shared library here that a plain Python leaves unloaded, to preload")
    lock(tmp_path, "z", f'[preload]\nlibraries = ["{library}"]\n')
    python = create_environment(str(tmp_path), read_stack(str(tmp_path), "z"), [])
    maps = subprocess.run(
        [python, "-c", "print(open('/proc/self/maps').read())"], capture_output=True, text=True
    ).stdout
    assert str(Path(library).resolve()) in maps
    lock(tmp_path, "folder", f'[preload]\nlibraries = ["{Path(library).parent}"]\n')
    with pytest.raises(FusedbenchError, match="which is no file here"):
        create_environment(str(tmp_path), read_stack(str(tmp_path), "folder"), [])
    bundled = tmp_path / "bundled"  # a pinned package that brings a library: its own copy is the one preloaded
    bundled.mkdir()
    wheel(bundled, "1.0", "fbstacklib", {"fbstacklib/libbundled.so": Path(library).read_bytes()})
    lock(
        tmp_path,
        "own",
        '[packages]\nfbstacklib = "1.0"\n[preload]\nlibraries = ["{site-packages}/fbstacklib/libbundled.so"]\n',
    )
    python = create_environment(
        str(tmp_path), read_stack(str(tmp_path), "own"), ["--no-index", "--find-links", str(bundled)]
    )
    (loads,) = json.loads((tmp_path / ".stacks" / "own" / "fusedbench-stack.json").read_text())["loads"]
    assert loads.startswith(str(tmp_path / ".stacks" / "own"))
    maps = subprocess.run(
        [python, "-c", "print(open('/proc/self/maps').read())"], capture_output=True, text=True
    ).stdout
    assert loads in maps
    lock(tmp_path, "missing", '[preload]\nlibraries = ["{site-packages}/nvidia/cu13/lib/libnothing.so.13"]\n')
    with pytest.raises(
        FusedbenchError,
        match=re.escape("preloads '{site-packages}/nvidia/cu13/lib/libnothing.so.13', which is no file"),
    ):
        create_environment(str(tmp_path), read_stack(str(tmp_path), "missing"), [])


def test_the_libraries_loaded_are_read_from_the_process_map_with_the_version_their_file_names(tmp_path):
    maps = tmp_path / "maps"
    maps.write_text(
        "7f00-7f01 r-xp 00000000 08:01 1 /usr/local/cuda-13.1/targets/x86_64-linux/lib/libcublasLt.so.13.1.0.3\n"
        "7f02-7f03 r-xp 00000000 08:01 2 /site/nvidia/cu13/lib/libcudart.so.13\n"
        "7f04-7f05 r-xp 00000000 08:01 3 /usr/lib/libc.so.6\n"
        "7f06-7f07 r-xp 00000000 08:01 4 /usr/lib/x86_64-linux-gnu/libcuda.so.580.95.05\n"
    )
    assert loaded_libraries(str(maps)) == {
        "libcublasLt": {
            "path": "/usr/local/cuda-13.1/targets/x86_64-linux/lib/libcublasLt.so.13.1.0.3",
            "version": "13.1.0.3",
        },
        "libcudart": {"path": "/site/nvidia/cu13/lib/libcudart.so.13", "version": "13"},
        "libcuda": {"path": "/usr/lib/x86_64-linux-gnu/libcuda.so.580.95.05", "version": "580.95.05"},
    }
    assert loaded_libraries(str(tmp_path / "none")) == {}


def test_a_stacks_machine_is_its_own_history_and_its_gpu_is_the_gpus():
    machine = "h200-141gb-stack-nvmath-0.9"
    assert gpu_machine(machine) == "h200-141gb" and stack_machine(machine + "-tuned-fused-algorithm-7") == machine
    assert baseline_machine(machine) == machine  # a stack's runs are judged against its own earlier ones
    assert baseline_machine(machine + "-inject-3f9a02c1") == machine  # an injected run against its stack's
    paired = machine + "-paired-20261128T120000Z-ab12"
    assert (
        gpu_machine(paired) == "h200-141gb"
        and stack_machine(paired) == machine
        and stack_machine("h200-141gb") == "h200-141gb"
    )


@pytest.fixture
def stack_checkout(tmp_path, monkeypatch, wheels):
    """A clean checkout defining two stacks that pin PROBE 1.0 and 2.0, both environments made."""
    import fusedbench.cli.ab as ab_cli
    import fusedbench.measure.machine

    root = make_checkout(
        tmp_path / "checkout",
        {
            "pyproject.toml": PYPROJECT,
            "fusedbench/measure/gpu/confirm_worker.py": WORKER,
            ".gitignore": "/.stacks/\n/results/\n",
            "benchmarks/stacks/old.toml": '[packages]\nfbstackprobe = "1.0"\n',
            "benchmarks/stacks/new.toml": '[packages]\nfbstackprobe = "2.0"\n',
        },
    )
    (root / "results").mkdir()
    shutil.copy(ROOT / "results" / "benchmarks.json", root / "results")
    monkeypatch.chdir(root)
    for name in ("old", "new"):
        assert main(["stack", "create", name, "--wheels", str(wheels)]) == 0
    monkeypatch.setattr(measure.Worker, "entry", (str(FAKE),))
    monkeypatch.setattr(ab_cli, "require_gpu", lambda what, instead: None)
    monkeypatch.setattr(fusedbench.measure.machine, "gpu_machine_name", lambda: MACHINE)
    monkeypatch.setenv("FAKE_HELLO", json.dumps({"benchmark_versions": dict(ASV_VERSIONS)}))
    return root


def test_ab_measures_the_code_in_two_stacks_names_what_differs_and_keeps_each_under_its_stacks_machine(
    stack_checkout, capsys, monkeypatch
):
    target = "RELU_BIAS/fp16/(65536,16384)x(16384,8192)/fused"
    monkeypatch.setenv("FUSEDBENCH_INJECT", f"{target}=8%")
    monkeypatch.setenv("FAKE_INJECT_SIDE", "new")  # the new stack's cell 8% slower
    code, out, err = run(
        capsys, "--stack", "old", "--stack", "new", "--cells", "RELU_BIAS/fp16/.*/fused$", "--rounds", "4"
    )
    assert code == 1, out + err
    assert "stack old (base) beside stack new (candidate), both at" in out
    assert "stacks differ: fbstackprobe: 1.0 -> 2.0" in out
    machines = sorted(p.name for p in (stack_checkout / "results").iterdir() if p.is_dir())
    assert [m.split("-paired-")[0] for m in machines] == [f"{MACHINE}-stack-new", f"{MACHINE}-stack-old"]
    assert machines[0].split("-paired-")[1] == machines[1].split("-paired-")[1]  # one session
    commit = git(stack_checkout, "rev-parse", "HEAD").strip()
    again = main(["alert", "results", "--machine", machines[0], "--baseline", f"{machines[1]}@{commit[:8]}"])
    assert again == 1  # alert judges the kept pair as ab did
    records = [
        json.loads(line) for p in (stack_checkout / "results" / machines[0]).glob("*.fbenv") for line in [p.read_text()]
    ]
    assert records and all(r["environment"]["stack"]["packages"] == {PROBE: "2.0"} for r in records)
    for machine, stack in zip(machines, ("new", "old"), strict=True):  # asv keys each side by its stack's Python
        (kept,) = (stack_checkout / "results" / machine).glob(f"{commit[:8]}-existing-*.json")
        assert kept.name.endswith(f".stacks_{stack}_bin_python.json"), kept.name
    assert main(["stack", "list"]) == 0 and "old: fbstackprobe==1.0 (made)" in capsys.readouterr().out
    (stack_checkout / "benchmarks" / "stacks" / "old.toml").write_text('[packages]\nfbstackprobe = "1.1"\n')
    assert main(["stack", "list"]) == 0 and "old: fbstackprobe==1.1 (not made" in capsys.readouterr().out


def test_what_differs_between_two_stacks_names_versions_pins_and_library_files():
    base = {
        "versions": {"cublaslt": 130100, "nvmath-python": "0.9.0"},
        "stack": {"packages": {"cuda-core": "0.7.0"}, "libraries": {"libcublasLt": {"path": "/a/libcublasLt.so.13"}}},
    }
    cand = {"versions": {"cublaslt": 130100, "nvmath-python": "1.0.0"},
            "stack": {"packages": {}, "libraries": {"libcublasLt": {"path": "/b/libcublasLt.so.13"}}}}  # fmt: skip
    assert stack_differences({"baseline": base, "candidate": cand}) == [
        "cuda-core: 0.7.0 -> (not pinned)",
        "nvmath-python: 0.9.0 -> 1.0.0",
        "libcublasLt: /a/libcublasLt.so.13 -> /b/libcublasLt.so.13",
    ]


def test_an_extra_nothing_measured_imports_is_no_dependency_change_for_ab(tmp_path):
    project = '[project]\nname = "fusedbench"\ndependencies = ["numpy"]\n[project.optional-dependencies]\n'
    root = make_checkout(tmp_path / "repo", {"pyproject.toml": project + 'cu13 = ["cupy"]\n'})
    base = git(root, "rev-parse", "HEAD").strip()
    (root / "pyproject.toml").write_text(project + 'cu13 = ["cupy"]\nchanges = ["apache-otava"]\ndev = ["pytest"]\n')
    git(root, "commit", "-qam", "the change-point extra")
    assert dependency_changes(str(root), base, "HEAD") == []
    (root / "pyproject.toml").write_text(project + 'cu13 = ["cupy>=14"]\n')
    git(root, "commit", "-qam", "a measured extra")
    assert dependency_changes(str(root), base, "HEAD") == ["[cu13]: cupy -> cupy>=14"]


def test_run_in_a_stack_runs_fusedbench_again_by_the_stacks_python_with_every_flag(stack_checkout, monkeypatch):
    import fusedbench.cli.run as run_cli

    started, real = [], subprocess.run

    def run_or_record(argv, **kwargs):  # the stack's Python asked for its pins for real; the run itself recorded
        if "-c" in argv:
            return real(argv, **kwargs)
        started.append(argv)
        return subprocess.CompletedProcess(argv, 0)

    monkeypatch.setattr(run_cli.subprocess, "run", run_or_record)
    target = "RELU_BIAS/fp16/(65536,16384)x(16384,8192)/fused=5%"
    assert main(["run", "--stack", "old", "--suite", "quick", "--bench", "Quick", "--inject", target]) == 0
    (argv,) = started
    assert argv[0] == str(stack_checkout / ".stacks" / "old" / "bin" / "python")
    asked = ["--suite", "quick", "--launch-method", "forkserver", "--bench", "Quick", "--inject", target]
    assert argv[1:] == ["-m", "fusedbench", "run", *asked]
    shadow = stack_checkout.parent / "shadow"
    wheel(shadow.parent, "9.0")
    real([sys.executable, "-m", "pip", "install", "-q", "--no-index", "--find-links", str(shadow.parent), "--target",
          str(shadow), f"{PROBE}==9.0"], check=True)  # fmt: skip
    monkeypatch.setenv("PYTHONPATH", str(shadow))
    with pytest.raises(
        FusedbenchError, match=r"stack old's Python does not run its pins: fbstackprobe 1.0 \(it imports 9.0\)"
    ):
        run_cli.command_run(suite="quick", bench=None, launch_method="forkserver", stack="old")
    assert len(started) == 1


def test_ab_refuses_a_side_whose_python_imports_another_version_than_its_stack_pins(
    stack_checkout, capsys, monkeypatch, wheels, tmp_path
):
    shadow = tmp_path / "shadow"
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-index", "--find-links", str(wheels),
                    "--target", str(shadow), f"{PROBE}==2.0"], check=True)  # fmt: skip
    monkeypatch.setenv("PYTHONPATH", str(shadow))  # puts 2.0 in front of the old stack's 1.0
    code, _out, err = run(
        capsys, "--stack", "old", "--stack", "new", "--cells", "RELU_BIAS/fp16/.*/fused$", "--rounds", "2"
    )
    assert code == 2
    assert "the baseline side's Python" in err and "fbstackprobe 1.0 (it imports 2.0)" in err


@pytest.mark.parametrize(
    "argv, says",
    [
        ([], "name BASE (a commit) or two stacks (--stack A --stack B), one of the two"),
        (["HEAD~1", "--stack", "old", "--stack", "new"], "name BASE (a commit) or two stacks"),
        (["--stack", "old"], "--stack names two stacks, the base's, then the candidate's (got old)"),
        (["--stack", "old", "--stack", "old"], "--stack names two stacks"),
        (["--stack", "old", "--stack", "newest"], "no stack 'newest'"),
    ],
)
def test_ab_stack_refusals_are_one_line_before_anything_is_measured(stack_checkout, capsys, argv, says):
    code, _out, err = run(capsys, *argv)
    assert code == 2 and says in err and len(err.strip().splitlines()) == 1


# The committed stack comparisons (docs/findings/2026-11-28-stacks-side-by-side.md): (base machine, candidate machine,
# the commit both sides ran at on the device)
STACK_PAIRS = {
    "nvmath": ("h200-141gb-stack-nvmath-0.9-paired-20261128T112604Z-434d",
               "h200-141gb-stack-nvmath-1.0-paired-20261128T112604Z-434d", "0004dfb3"),
    "cublaslt": ("h200-141gb-stack-cublaslt-toolkit-paired-20261128T110707Z-a328",
                 "h200-141gb-stack-cublaslt-pip-paired-20261128T110707Z-a328", "016f2256"),
}  # fmt: skip


def stack_table(capsys, base: str, cand: str, commit: str) -> str:
    """Per group and epilog, as `compare` judges the pair: fused's and fused-autotuned's time, candidate over base
    with its 95% interval, and fused over unfused on each side (does fusion still pay)."""
    from fusedbench.results.loader import load_results

    assert main(["compare", str(ROOT / "results"), "--candidate", f"{cand}@{commit}", "--baseline",
                 f"{base}@{commit}", "--format", "json"]) == 0  # fmt: skip
    verdict = json.loads(capsys.readouterr().out)
    cells = load_results(str(ROOT / "results"), machines=[base, cand]).cells
    times = {(r.machine, r.group, r.epilog, r.provider): r.time_s for r in cells.itertuples()}
    lines = ["| group | epilog | fused, new / old [95%] | fused-autotuned [95%] | fused over unfused, old -> new |",
             "|---|---|---|---|---|"]  # fmt: skip
    for group in verdict["suites"][0]["groups"]:
        rows = {(r["epilog"], r["provider"], r["metric"]): r for r in group["rows"]}
        for epilog in dict.fromkeys(r["epilog"] for r in group["rows"]):
            change = [rows.get((epilog, p, "time")) for p in ("fused", "fused-autotuned")]
            said = [f"{r['ratio']:.3f} [{r['ci_low']:.3f}, {r['ci_high']:.3f}]" if r else "-" for r in change]
            speedups = [times[(m, group["group"], epilog, "unfused")] / times[(m, group["group"], epilog, "fused")]
                        for m in (base, cand)]  # fmt: skip
            lines.append(f"| {group['group']} | {epilog} | {said[0]} | {said[1]} | "
                         f"{speedups[0]:.2f}x -> {speedups[1]:.2f}x |")  # fmt: skip
    return "\n".join(lines)


@pytest.mark.parametrize("pair", sorted(STACK_PAIRS))
def test_the_stacks_findings_quote_the_committed_comparisons(capsys, pair):
    from conftest import finding

    table = stack_table(capsys, *STACK_PAIRS[pair])
    assert table in finding("stacks-side-by-side", folded=False), table


def test_bisect_over_stacks_finds_the_first_stack_past_the_margin(stack_checkout, capsys, monkeypatch, wheels):
    import fusedbench.cli.bisect as bisect_cli

    (stack_checkout / "benchmarks" / "stacks" / "newer.toml").write_text('[packages]\nfbstackprobe = "2.0"\n')
    git(stack_checkout, "add", "benchmarks/stacks/newer.toml")
    git(stack_checkout, "commit", "-qm", "a third stack")
    assert main(["stack", "create", "newer", "--wheels", str(wheels)]) == 0
    monkeypatch.setattr(bisect_cli, "require_gpu", lambda what, instead: None)
    monkeypatch.setenv("FUSEDBENCH_INJECT", "RELU_BIAS/fp16/(65536,16384)x(16384,8192)/fused=8%")
    monkeypatch.setenv("FAKE_INJECT_SIDE", "new,newer")  # both stacks with probe 2.0 slower
    capsys.readouterr()
    assert main(["bisect", "--stacks", "old,new,newer", "--cells", "RELU_BIAS/fp16/", "--rounds", "4"]) == 0
    out = capsys.readouterr().out
    assert "step 1: stack newer (2 of 2) beside stack old: red" in out and "step 2: stack new (1 of 2)" in out
    assert "first past the margin: stack new (2 paired step(s)" in out


def test_stack_newest_writes_the_newest_versions_pip_offers_and_chain_upgrades_one_package_at_a_time(
    tmp_path, monkeypatch, capsys, wheels
):
    lock(
        tmp_path, "pinned", '[packages]\nfbstackprobe = "1.0"\nfbstackother = "1.0"\n[preload]\nlibraries = ["/x.so"]\n'
    )
    monkeypatch.chdir(tmp_path)
    assert main(["stack", "newest", "pinned", "newest", "--wheels", str(wheels)]) == 0
    newest = read_stack(str(tmp_path), "newest")
    assert newest.packages == {PROBE: "2.0", "fbstackother": "2.0"} and newest.preload == ("/x.so",)
    capsys.readouterr()
    assert main(["stack", "chain", "pinned", "newest"]) == 0
    assert capsys.readouterr().out == "pinned,newest-1,newest\n"
    assert read_stack(str(tmp_path), "newest-1").packages == {PROBE: "2.0", "fbstackother": "1.0"}


@pytest.mark.parametrize(
    "argv, says",
    [
        (["newest", "pinned"], "`fusedbench stack newest NAME TO` takes 2 stack name(s), got 1"),
        (["create"], "`fusedbench stack create NAME` takes 1 stack name(s), got 0"),
        (["list", "pinned"], "`fusedbench stack list` takes 0 stack name(s), got 1"),
        (["chain", "pinned", "pinned"], "stacks pinned and pinned pin the same: there is nothing between them"),
        (["newest", "nosuch", "newest"], "pip finds no version of nosuchpackage"),
    ],
)
def test_stack_refusals_are_one_line(tmp_path, monkeypatch, capsys, wheels, argv, says):
    lock(tmp_path, "pinned", '[packages]\nfbstackprobe = "1.0"\n')
    lock(tmp_path, "nosuch", '[packages]\nnosuchpackage = "1.0"\n')
    monkeypatch.chdir(tmp_path)
    code = main(["stack", *argv, "--wheels", str(wheels)])
    err = capsys.readouterr().err
    assert code == 2 and says in err and len(err.strip().splitlines()) == 1, err


@pytest.mark.parametrize(
    "stacks, says",
    [("old,old", "names a stack twice"), ("old,new,newest", "no stack 'newest'")],
)
def test_bisect_checks_every_stack_before_the_first_step(stack_checkout, capsys, stacks, says):
    code = main(["bisect", "--stacks", stacks])
    err = capsys.readouterr().err
    assert code == 2 and says in err and len(err.strip().splitlines()) == 1, err
