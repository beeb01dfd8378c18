"""The entry point a side-by-side measurement runs, one process per side (`python -m
fusedbench.measure.gpu.confirm_worker`).

`fusedbench ab` and `fusedbench alert --confirm` measure two codes side by side: two of these processes, each
importing fusedbench from its own source tree (the base's a `git archive` of its commit), driven call by call in
lock-step by `measure.confirm`. Its protocol is versioned (`PROTOCOL`): a base whose worker speaks another, or has
none, cannot be measured that way. It names no library: a worker in an environment of its own (another cuBLAS, nvmath
or cupy) speaks it the same.

JSON lines, one request and one reply at a time, on stdin and the stdout the process started with (library
output goes to stderr):
- on start it says `{"hello": {...}}`: the protocol, where its fusedbench comes from, the GPU, the library
  versions and every group's benchmark version; or `{"error": "..."}` and exits;
- `{"check": {"epilogs", "dtypes", "providers"}}`: those cells verified against float64 at the small shapes, as a
  plain run checks before it times; its `failures` are each failed (epilog, dtype, provider) with its reason;
- `{"prepare": {"group", "epilog", "dtype", "m", "k", "n", "providers"}}`: the workload's operands drawn as the
  group's measurement draws them, its providers prepared with this side's code (fused-autotuned autotuned by it)
  and warmed up, the previous workload's released. The reply names the providers ready, why each other is not,
  and the algorithm each cuBLASLt provider will time (`{"rank", "algorithm"}`);
- `{"pin": {"name", "provider", "rank"}}`: the provider prepared once more, held to the algorithm of that rank in
  cuBLASLt's heuristic list, and timed as `name` (the other side's autotuned pick, or its own first pick where the
  workload is prepared again and autotuning chose otherwise); the reply is its algorithm;
- `{"time": NAME}`: one timed call after the protocol's lead-in (the GPU taken as idle from the request on,
  since the other side's call has just ended), the L2 flush and the telemetry probe, stretched where
  FUSEDBENCH_INJECT names the cell; the reply is `{"seconds": s}` or `{"error": "..."}`;
- `{"finish": true}`: each timed name's telemetry (the GPU's state around every call) and kernels (CUPTI, after
  the timing, as a plain run records them): `{"cells": {name: {"telemetry", "provenance"}}}`;
- `{"ceilings": [dtype, ...]}`: the GEMM ceiling per dtype and the copy ceiling, timed as a plain run times them:
  `{"gemm": {dtype: cell}, "copy": samples or error}`;
- `{"quit": true}`.
"""

from __future__ import annotations

import json
import os
import sys

PROTOCOL = 3  # 3: each side autotunes; `pin` adds the other's pick; `check`, `finish` and `ceilings` as a plain run


class _Workload:
    """One prepared workload: its providers ready to call (and the other side's autotuned pick, once pinned), and
    the rounds that time them."""

    def __init__(self, stack, timing, request: dict, injection):
        from fusedbench.catalog.suites import GROUPS
        from fusedbench.measure.gpu.bench import prepare_all, workload_operands

        group = GROUPS[request["group"]]
        wanted = (request["epilog"], request["dtype"], request["m"], request["k"], request["n"])
        index, workload = next(
            (i, w) for i, w in enumerate(group.workloads()) if (w.epilog.name, w.dtype.name, w.m, w.k, w.n) == wanted
        )
        keys = [key for key in workload.cell_keys(group.providers) if key.provider in request["providers"]]
        self.stack, self.timing = stack, timing
        self.operands = workload_operands(stack, workload, index)  # the seed the group's own measurement draws with
        self.prepared, refused = prepare_all(stack, self.operands, keys, None)
        self.slower = {key.provider: injection.fraction(key, group.name) for key in keys} if injection else {}
        self.not_ready = {p: f"{c.status.value}: {c.reason}" for p, c in refused.items()}
        self._start_rounds()

    @property
    def algorithms(self) -> dict:
        prepared = self.prepared.items()
        return {name: _algorithm(ready) for name, ready in prepared if "heuristic_rank" in ready.provenance}

    def _start_rounds(self) -> None:
        """The rounds over every prepared run, each warmed up (a run that fails there is not ready)."""
        from fusedbench.measure.gpu.timing import WARMUP_ROUNDS, WARMUP_SECONDS
        from fusedbench.measure.sampling import Rounds

        timing = self.timing
        runs = {name: ready.run for name, ready in self.prepared.items()}
        slower = {name: self.slower.get(name.split("@")[0], 0.0) for name in runs}
        self.rounds = Rounds(
            runs,
            timing.clock,
            timing.flush,
            timing.lead_in,
            timing.probe,
            {name: f for name, f in slower.items() if f},
            timing.stretcher,
        )
        self.rounds.warm_up(WARMUP_ROUNDS, WARMUP_SECONDS)
        for name, result in list(self.rounds.results.items()):
            if isinstance(result, Exception):
                self.not_ready[name] = f"failed: {result}"

    def pin(self, name: str, provider: str, rank: int) -> dict:
        """`provider` prepared again at cuBLASLt's algorithm of `rank`, timed as `name`."""
        from fusedbench.catalog.tuning import Tuning
        from fusedbench.measure.gpu.bench import prepare_all

        (key,) = [k for k in self.operands.workload.cell_keys([provider])]
        prepared, refused = prepare_all(self.stack, self.operands, [key], Tuning(provider, "algorithm", int(rank)))
        if refused:
            return {"error": f"{refused[provider].status.value}: {refused[provider].reason}"}
        if name in self.prepared:  # its own pick held to the first preparation's: the one autotuned now goes
            self.prepared[name].release()
        self.prepared[name] = prepared[provider]
        self._start_rounds()
        if name in self.not_ready:
            return {"error": self.not_ready[name]}
        return {"algorithm": _algorithm(self.prepared[name])}

    def time(self, name: str) -> dict:
        self.timing.lead_in.ended()  # the other side's call ended as this request came: the GPU is idle from here
        self.rounds.one_round([name], sampling=True)
        result = self.rounds.results[name]
        if isinstance(result, Exception):
            return {"error": f"{type(result).__name__}: {result}"}
        return {"seconds": result[-1]}

    def finish(self) -> dict:
        """Each timed run's telemetry, then its kernels (CUPTI on only now, after the timing)."""
        from fusedbench.measure.gpu.provenance import kernel_provenance

        probe = self.timing.probe
        cells = {}
        for name, result in self.rounds.results.items():
            if isinstance(result, Exception) or not result:
                continue
            telemetry = probe.take(name) if probe is not None else {}
            provenance = dict(self.prepared[name].provenance)
            provenance |= kernel_provenance(self.prepared[name].run, self.timing.flush)
            cells[name] = {"telemetry": telemetry, "provenance": provenance}
        return {"cells": cells}

    def release(self) -> None:
        for ready in self.prepared.values():
            ready.release()


def _algorithm(ready) -> dict:
    return {"rank": ready.provenance["heuristic_rank"], "algorithm": ready.provenance["algorithm"]}


def _check(request: dict) -> dict:
    """The plain run's check of these epilogs, dtypes and providers; the cells it failed."""
    from fusedbench.catalog.model import Status
    from fusedbench.measure.check import run_check

    report = run_check(shapes="small", epilogs=request["epilogs"], dtypes=request["dtypes"],
                       providers=request["providers"])  # fmt: skip
    failed = [c for c in report.cells if c.status is Status.FAILED]
    return {
        "checked": len(report.cells),
        "failures": [
            {"epilog": c.key.epilog, "dtype": c.key.dtype, "provider": c.key.provider, "reason": c.reason or ""}
            for c in failed
        ],
    }


def _ceilings(stack, dtypes: list[str]) -> dict:
    from fusedbench.measure.gpu.bench import measure_copy_ceiling, measure_gemm_ceilings

    gemm = {dtype: cell.to_json() for dtype, cell in measure_gemm_ceilings(stack, dtypes).items()}
    copy = measure_copy_ceiling(stack)
    return {"gemm": gemm, "copy": {"error": f"{type(copy).__name__}: {copy}"} if isinstance(copy, Exception) else copy}


def _hello(stack) -> dict:
    import fusedbench
    from fusedbench.catalog.suites import ASV_VERSIONS
    from fusedbench.measure.stacks import stack_facts

    return {
        "protocol": PROTOCOL,
        "fusedbench": os.path.dirname(os.path.dirname(os.path.abspath(fusedbench.__file__))),
        "device": stack.device_name,
        "versions": stack.versions(),
        "stack": stack_facts(),  # the GPU stack is loaded: cuBLASLt's file among the libraries
        "benchmark_versions": dict(ASV_VERSIONS),
    }


def serve(requests, reply) -> None:
    """Answer `requests` (parsed JSON objects) through `reply` until one says quit."""
    from fusedbench.catalog.deliberate import deliberate_from_environment
    from fusedbench.errors import FusedbenchError, GpuUnavailable
    from fusedbench.measure.gpu import load_gpu_stack
    from fusedbench.measure.gpu.timing import Timing

    try:
        injection = deliberate_from_environment().injection
        stack = load_gpu_stack("a side-by-side measurement (fusedbench ab, alert --confirm)")
    except (GpuUnavailable, FusedbenchError) as exc:
        reply({"error": str(exc)})
        return
    timing = Timing.open(stack, stretch=injection is not None)
    reply({"hello": _hello(stack)})
    current = None
    try:
        for request in requests:
            if "prepare" in request:
                if current is not None:
                    current.release()
                    current = None
                try:
                    current = _Workload(stack, timing, request["prepare"], injection)
                except Exception as exc:  # the side cannot time this workload: said, never hidden
                    reply({"error": f"{type(exc).__name__}: {exc}"})
                    continue
                ready = {"ready": sorted(current.rounds.expected), "not_ready": current.not_ready}
                reply(ready | {"algorithms": current.algorithms})
            elif "pin" in request:
                reply(_answer(current.pin, **request["pin"]))
            elif "time" in request:
                reply(current.time(request["time"]))
            elif "finish" in request:
                reply(_answer(current.finish))
            elif "check" in request:
                reply(_answer(_check, request["check"]))
            elif "ceilings" in request:
                reply(_answer(_ceilings, stack, request["ceilings"]))
            else:
                return
    finally:
        if current is not None:
            current.release()
        timing.close()


def _answer(work, *args, **kwargs) -> dict:
    """`work`'s reply, or the error it raised: the side says what it cannot do, and goes on serving."""
    try:
        return work(*args, **kwargs)
    except Exception as exc:
        return {"error": f"{type(exc).__name__}: {exc}"}


def main() -> None:
    sys.stdout.flush()
    protocol_out = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)  # nothing but replies on the protocol's stream: what libraries print goes to stderr

    def reply(message: dict) -> None:
        protocol_out.write(json.dumps(message) + "\n")

    serve((json.loads(line) for line in sys.stdin if line.strip()), reply)


if __name__ == "__main__":
    main()
