"""`fusedbench mlp`: train the seed notebook's MLP on scikit-learn's digits, fused against the other versions."""

from __future__ import annotations

import json

from fusedbench.catalog.mlp_settings import BATCH, DEFAULT_EPOCHS, DEFAULT_HIDDEN
from fusedbench.cli.common import EXIT_OK, command_parser, emit, names, render, table
from fusedbench.errors import FusedbenchError


def add_parser(commands) -> None:
    parser = command_parser(
        commands, "mlp", "train the seed notebook's MLP on sklearn's digits: fused against the rest", page="mlp.md"
    )
    parser.add_argument("--device", choices=("cpu", "gpu"), default="gpu", help="where to train (default: gpu)")
    parser.add_argument("--epochs", type=int, default=DEFAULT_EPOCHS, help=f"(default: {DEFAULT_EPOCHS})")
    parser.add_argument(
        "--hidden", type=int, default=DEFAULT_HIDDEN, help=f"(default: the notebook's {DEFAULT_HIDDEN})"
    )
    parser.add_argument("--batch", type=int, default=BATCH, help=f"(default: the notebook's {BATCH})")
    parser.add_argument("--dtype", choices=("fp32", "fp16", "bf16"), default="fp32", help="(default: fp32)")
    parser.add_argument(
        "--version", dest="versions", action="extend", type=names, default=[], help="only these versions"
    )
    parser.add_argument("--format", dest="output_format", choices=("text", "json"), default="text")
    options = ("device", "epochs", "hidden", "batch", "dtype", "versions", "output_format")
    parser.set_defaults(handler=lambda a: command_mlp(**{name: getattr(a, name) for name in options}))


def command_mlp(*, device: str, epochs: int, hidden: int, batch: int, dtype: str, versions, output_format: str) -> int:
    """Train the seed notebook's MLP on scikit-learn's digits in every version the device runs: test accuracy,
    the loss curve in brief, time per step."""
    from fusedbench.errors import GpuUnavailable
    from fusedbench.measure.gpu.mlp import build_versions
    from fusedbench.measure.mlp import init_params, load_digits_dataset, train

    for flag, value in (("--epochs", epochs), ("--hidden", hidden), ("--batch", batch)):
        if value < 1:
            raise FusedbenchError(f"{flag} {value}: give a positive number")
    data = load_digits_dataset()
    try:
        params = init_params(data.inputs, hidden)
        built = build_versions(params, dtype, device, versions)
        results = [train(v, data, epochs=epochs, batch=batch).to_json() for v in built]
    except GpuUnavailable as exc:
        raise FusedbenchError(f"{exc}; or train on the CPU: fusedbench mlp --device cpu") from None
    except MemoryError:
        weights = (data.inputs + 10) * hidden * 8 / 2**30
        raise FusedbenchError(
            f"--hidden {hidden}: the network's float64 weights alone take {weights:.1f} GiB, more than this machine "
            "could allocate; give a smaller --hidden"
        ) from None
    if output_format == "json":
        run = {"device": device, "dtype": dtype, "hidden": hidden, "batch": batch, "epochs": epochs}
        emit(json.dumps(run | {"data": "sklearn digits", "versions": results}, indent=2, allow_nan=False) + "\n")
        return EXIT_OK
    emit(render(result_table(results, data.inputs, hidden, dtype, batch, epochs, device)))
    return EXIT_OK


def result_table(results: list[dict], inputs: int, hidden: int, dtype: str, batch: int, epochs: int, device: str):
    rows = [
        (
            r["name"],
            f"{r['test_accuracy']:.3f}",
            f"{r['loss_first']:.3f} -> {r['loss_last']:.4f} (min {r['loss_min']:.4f})",
            f"{r['step_seconds'] * 1e3:.3f}",
            f"{r['gpu_step_seconds'] * 1e3:.3f} ({r['kernels_per_step']} kernels)" if "gpu_step_seconds" in r else "",
            r["steps"],
        )
        for r in results
    ]
    weights = " with fp32 master weights" if dtype != "fp32" else ""
    title = f"MLP {inputs}-{hidden}-10 on sklearn digits, {dtype}{weights}, batch {batch}, {epochs} epochs, {device}"
    columns = ("version", "test accuracy", "loss", "ms per step", "GPU ms per step (kernels)", "steps")
    return table(title, columns, rows)
