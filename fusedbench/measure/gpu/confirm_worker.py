"""The entry point a confirmation runs, one process per side (`python -m fusedbench.measure.gpu.confirm_worker`).

`fusedbench alert --confirm` measures flagged cells again with the baseline's code and the candidate's side by
side: two of these processes, each importing fusedbench from its own source tree (the baseline's a `git archive`
of its commit), driven call by call in lock-step by `measure.confirm`. Its protocol is versioned
(`PROTOCOL`): a baseline whose worker speaks another, or has none, cannot be rebuilt that way.

JSON lines, one request and one reply at a time, on stdin and the stdout the process started with (library
output goes to stderr):
- on start it says `{"hello": {...}}`: the protocol, where its fusedbench comes from, the GPU, the library
  versions and every group's benchmark version; or `{"error": "..."}` and exits;
- `{"prepare": {"group", "epilog", "dtype", "m", "k", "n", "providers"[, "algorithms"]}}`: the workload's operands
  drawn as the group's measurement draws them, its providers prepared and warmed up (the previous workload's
  released); `algorithms` (provider -> rank in cuBLASLt's heuristic list) pins an autotuned provider to that
  algorithm instead of autotuning it. The reply names the providers ready, why each other is not, and the algorithm
  each cuBLASLt provider will time (`{"rank", "algorithm"}`);
- `{"time": PROVIDER}`: one timed call after the protocol's lead-in (the GPU taken as idle from the request on,
  since the other side's call has just ended) and the L2 flush, stretched where FUSEDBENCH_INJECT names the cell;
  the reply is `{"seconds": s}` or `{"error": "..."}`;
- `{"quit": true}`.
"""

from __future__ import annotations

import json
import os
import sys

PROTOCOL = 2  # 2: `prepare` pins fused-autotuned's algorithm and names each cuBLASLt provider's


class _Workload:
    """One prepared workload: its providers ready to call, and the rounds that time them."""

    def __init__(self, stack, timing, request: dict, injection):
        from fusedbench.catalog.providers import AUTOTUNED
        from fusedbench.catalog.suites import GROUPS
        from fusedbench.catalog.tuning import Tuning
        from fusedbench.measure.gpu.bench import prepare_all, workload_operands
        from fusedbench.measure.gpu.timing import WARMUP_ROUNDS, WARMUP_SECONDS
        from fusedbench.measure.sampling import Rounds

        group = GROUPS[request["group"]]
        wanted = (request["epilog"], request["dtype"], request["m"], request["k"], request["n"])
        index, workload = next(
            (i, w) for i, w in enumerate(group.workloads()) if (w.epilog.name, w.dtype.name, w.m, w.k, w.n) == wanted
        )
        keys = [key for key in workload.cell_keys(group.providers) if key.provider in request["providers"]]
        operands = workload_operands(stack, workload, index)  # the seed the group's own measurement draws with
        pinned = request.get("algorithms", {})
        tuning = Tuning(AUTOTUNED, "algorithm", int(pinned[AUTOTUNED])) if AUTOTUNED in pinned else None
        self.prepared, refused = prepare_all(stack, operands, keys, tuning)
        self.algorithms = {
            provider: {"rank": ready.provenance["heuristic_rank"], "algorithm": ready.provenance["algorithm"]}
            for provider, ready in self.prepared.items()
            if "heuristic_rank" in ready.provenance
        }
        slower = {key.provider: injection.fraction(key, group.name) for key in keys} if injection else {}
        runs = {provider: ready.run for provider, ready in self.prepared.items()}
        self.rounds = Rounds(
            runs,
            timing.clock,
            timing.flush,
            timing.lead_in,
            None,
            {p: f for p, f in slower.items() if f},
            timing.stretcher,
        )
        self.rounds.warm_up(WARMUP_ROUNDS, WARMUP_SECONDS)
        self.not_ready = {p: f"{c.status.value}: {c.reason}" for p, c in refused.items()}
        self.not_ready |= {p: f"failed: {r}" for p, r in self.rounds.results.items() if isinstance(r, Exception)}
        self.lead_in = timing.lead_in

    def time(self, provider: str) -> dict:
        self.lead_in.ended()  # the other side's call ended as this request came: the GPU is idle from here
        self.rounds.one_round([provider], sampling=True)
        result = self.rounds.results[provider]
        if isinstance(result, Exception):
            return {"error": f"{type(result).__name__}: {result}"}
        return {"seconds": result[-1]}

    def release(self) -> None:
        for ready in self.prepared.values():
            ready.release()


def _hello(stack) -> dict:
    import fusedbench
    from fusedbench.catalog.suites import ASV_VERSIONS

    return {
        "protocol": PROTOCOL,
        "fusedbench": os.path.dirname(os.path.dirname(os.path.abspath(fusedbench.__file__))),
        "device": stack.device_name,
        "versions": stack.versions(),
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
        stack = load_gpu_stack("fusedbench alert --confirm")
    except (GpuUnavailable, FusedbenchError) as exc:
        reply({"error": str(exc)})
        return
    timing = Timing.open(stack, telemetry=False, stretch=injection is not None)
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
            elif "time" in request:
                reply(current.time(request["time"]))
            else:
                return
    finally:
        if current is not None:
            current.release()
        timing.close()


def main() -> None:
    sys.stdout.flush()
    protocol_out = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)  # nothing but replies on the protocol's stream: what libraries print goes to stderr

    def reply(message: dict) -> None:
        protocol_out.write(json.dumps(message) + "\n")

    serve((json.loads(line) for line in sys.stdin if line.strip()), reply)


if __name__ == "__main__":
    main()
