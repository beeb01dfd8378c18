"""The sampling loop in carryover-balanced rounds, driven by a fake clock (no GPU)."""

from collections import Counter

import pytest

from fusedbench.measure.sampling import (
    BACK_TO_BACK,
    BURST,
    PAIRED_SAMPLINGS,
    PROTOCOL,
    PROTOCOLS,
    SUSTAINED,
    LeadIn,
    carryover_balanced_orders,
    sample_interleaved,
)


class FakeClock:
    """Each timed region lasts the next value of `durations`; records the order of events."""

    def __init__(self, durations, log):
        self._durations = iter(durations)
        self._log = log

    def start(self):
        self._log.append("start")

    def stop(self):
        self._log.append("stop")
        return next(self._durations)


def test_providers_are_timed_in_rounds_after_untimed_warmup_rounds():
    log = []
    samples = sample_interleaved(
        {"a": lambda: log.append("a"), "b": lambda: log.append("b")},
        clock=FakeClock([9.0, 9.0, 0.5, 1.5, 0.25, 1.25], log),
        samples=2,
        warmup=1,
        between_samples=lambda: log.append("flush"),
    )
    warmup = ["start", "a", "stop", "start", "b", "stop"]
    first, second = log[8], log[12]  # each round: flush, start, run, stop twice
    assert {first, second} == {"a", "b"}
    one_round = ["flush", "start", first, "stop", "flush", "start", second, "stop"]
    other_round = ["flush", "start", second, "stop", "flush", "start", first, "stop"]
    assert log == warmup + one_round + other_round  # with two runs, each goes first once
    assert samples == {first: [0.5, 1.25], second: [1.5, 0.25]}  # sample i comes from round i


def test_each_sampling_round_runs_every_provider_once_in_its_own_order():
    log = []
    names = ["textbook", "unfused", "fused", "fused-autotuned", "torch", "gemm"]
    runs = {name: (lambda name=name: log.append(name)) for name in names}
    durations = {name: float(index) for index, name in enumerate(names)}  # each provider's own time
    clock = FakeClock(iter(lambda: durations[log[-1]], None), [])
    samples = sample_interleaved(runs, clock=clock, samples=12, warmup=1)
    assert samples == {name: [durations[name]] * 12 for name in names}  # every sample is its own run's
    warmup, rounds = log[:6], [log[6 + 6 * r : 12 + 6 * r] for r in range(12)]
    assert warmup == names
    assert all(sorted(one) == sorted(names) for one in rounds)
    assert {one[0] for one in rounds} == set(names)  # every provider goes first in some round
    predecessors = Counter((one[i], one[i + 1]) for one in rounds for i in range(5))
    assert set(predecessors.values()) == {2} and len(predecessors) == 6 * 5  # balanced over 12 rounds
    again = []
    runs_again = {name: (lambda name=name: again.append(name)) for name in names}
    sample_interleaved(runs_again, clock=FakeClock(iter(lambda: 1.0, None), []), samples=12, warmup=1)
    assert again == log  # the same order seed gives the same orders: runs are repeatable
    other = []
    runs_other = {name: (lambda name=name: other.append(name)) for name in names}
    sample_interleaved(runs_other, clock=FakeClock(iter(lambda: 1.0, None), []), samples=12, warmup=1, order_seed=1)
    assert other != log  # another workload's seed gives the providers other places in the design


@pytest.mark.parametrize("count", range(1, 9))
def test_carryover_balanced_orders_let_every_item_follow_every_other_equally_often(count):
    orders = carryover_balanced_orders(count)
    assert len(orders) == (2 * count if count % 2 else count)
    assert all(sorted(order) == list(range(count)) for order in orders)
    follows = Counter((order[i], order[i + 1]) for order in orders for i in range(count - 1))
    assert len(follows) == count * (count - 1)  # every ordered pair of distinct items
    assert len(set(follows.values())) <= 1  # ... equally often


def test_the_loop_refuses_zero_samples():
    with pytest.raises(ValueError, match="samples=0"):
        sample_interleaved({"a": lambda: None}, clock=FakeClock([], []), samples=0, warmup=0)


def test_a_run_that_raises_is_dropped_and_the_others_keep_their_samples():
    calls = {"good": 0, "bad": 0}

    def good():
        calls["good"] += 1

    def bad():
        calls["bad"] += 1
        if calls["bad"] == 2:  # fails in its first sampling round
            raise RuntimeError("illegal memory access")

    samples = sample_interleaved(
        {"good": good, "bad": bad}, clock=FakeClock([1.0] * 10, []), samples=3, warmup=1, warmup_seconds=0.0
    )
    assert samples["good"] == [1.0, 1.0, 1.0]
    assert isinstance(samples["bad"], RuntimeError) and calls["bad"] == 2


def test_warmup_stops_when_every_run_has_failed():
    def bad():
        raise RuntimeError("no")

    samples = sample_interleaved({"bad": bad}, clock=FakeClock([1.0] * 3, []), samples=2, warmup=1, warmup_seconds=5.0)
    assert isinstance(samples["bad"], RuntimeError)
    assert sample_interleaved({}, clock=FakeClock([], []), samples=2, warmup=1, warmup_seconds=5.0) == {}


def test_warmup_lasts_at_least_the_given_measured_time():
    calls = []
    samples = sample_interleaved(
        {"a": lambda: calls.append(1)},
        clock=FakeClock([0.1, 0.1, 0.1, 0.1, 7.0], []),
        samples=1,
        warmup=1,
        warmup_seconds=0.35,
    )
    assert len(calls) == 4 + 1  # warm-up until 0.4 s of GPU time, then the one timed call
    assert samples == {"a": [7.0]}


class FakeHost:
    """A host clock that only sleep() moves, and a log of what the lead-in and the probe did."""

    def __init__(self, log):
        self.time, self.log = 100.0, log

    def now(self):
        return self.time

    def sleep(self, seconds):
        self.log.append(("sleep", round(seconds, 6)))
        self.time += seconds

    def heat(self, seconds):
        self.log.append(("heat", round(seconds, 6)))


class FakeProbe:
    """Logs its readings; each reading after a call takes the host `seconds`."""

    def __init__(self, log, host, seconds):
        self.log, self.host, self.seconds = log, host, seconds

    def before(self, name):
        self.log.append(("before", name))

    def after(self, name):
        self.log.append(("after", name))
        self.host.time += self.seconds


def lead_in_log(protocol, duration, reading_seconds=0.0):
    """What happens around the second timed call of a single run lasting `duration` (its warm-up the same), the
    probe taking `reading_seconds` after each timed call."""
    log = []
    host = FakeHost(log)

    class Clock:
        def start(self):
            log.append("start")

        def stop(self):
            log.append("stop")
            return duration

    lead_in = LeadIn(protocol, sleep=host.sleep, heat=host.heat if protocol.heat_s(1.0) else None, now=host.now)
    samples = sample_interleaved(
        {"call": lambda: log.append("call")},
        clock=Clock(),
        samples=2,
        warmup=1,
        between_samples=lambda: log.append("flush"),
        lead_in=lead_in,
        probe=FakeProbe(log, host, reading_seconds),
    )
    assert samples == {"call": [duration, duration]}
    return log[log.index(("after", "call")) + 1 :]  # after the first timed call


def test_burst_idles_as_long_as_the_call_counting_the_time_already_idle_then_times_it():
    assert lead_in_log(BURST, 0.020) == [
        ("sleep", 0.02),
        "flush",
        ("before", "call"),
        "start",
        "call",
        "stop",
        ("after", "call"),
    ]
    assert lead_in_log(BURST, 0.020, reading_seconds=0.001)[0] == ("sleep", 0.019)  # 1 ms already idle: 19 more
    assert lead_in_log(BURST, 0.020, reading_seconds=0.030)[0] == "flush"  # the readings took longer than the idle


def test_burst_wakes_the_gpu_with_the_call_itself_where_it_is_shorter_than_the_wake():
    log = lead_in_log(BURST, 0.002)
    assert log[0] == ("sleep", BURST.idle_min_s)  # at least 5 ms idle, however short the call
    assert log[1:4] == ["call"] * 3  # 5 ms of wake at 2 ms a call, queued before the flush and the timed call
    assert log[4:] == ["flush", ("before", "call"), "start", "call", "stop", ("after", "call")]
    assert BURST.wake_calls(0.0) == 0  # no warm-up, no known length: no wake


def test_a_run_whose_wake_call_raises_is_dropped_like_one_whose_timed_call_does():
    calls = {"short": 0}

    def short():  # 2 ms: woken by three calls of itself (5 ms); the first wake call fails
        calls["short"] += 1
        if calls["short"] == 3:
            raise RuntimeError("illegal memory access")

    host = FakeHost([])
    samples = sample_interleaved(
        {"short": short, "long": lambda: None},
        clock=FakeClock([0.002, 0.02] * 10, []),
        samples=2,
        warmup=2,
        lead_in=LeadIn(BURST, sleep=host.sleep, now=host.now),
    )
    assert isinstance(samples["short"], RuntimeError) and calls["short"] == 3  # no timed call after it
    assert len(samples["long"]) == 2


def test_sustained_queues_a_heater_as_long_as_the_call_and_never_idles():
    log = lead_in_log(SUSTAINED, 0.020)
    assert log[0] == ("heat", 0.02) and not any(step[0] == "sleep" for step in log if isinstance(step, tuple))
    assert lead_in_log(SUSTAINED, 0.001)[0] == ("heat", SUSTAINED.heat_min_s)
    with pytest.raises(ValueError, match="needs a heater"):
        LeadIn(SUSTAINED)


def test_back_to_back_adds_nothing_before_a_call_and_every_protocol_pairs_its_rounds():
    assert lead_in_log(BACK_TO_BACK, 0.020) == ["flush", ("before", "call"), "start", "call", "stop", ("after", "call")]
    assert PROTOCOL.sampling in PAIRED_SAMPLINGS and "williams-rounds" in PAIRED_SAMPLINGS
    assert {p.sampling for p in PROTOCOLS.values()} <= PAIRED_SAMPLINGS


def test_a_calls_expected_time_is_its_median_warm_up_call():
    log = []
    host = FakeHost(log)
    durations = iter([0.010, 0.050, 0.020, 0.020])  # three warm-up calls, then the timed one

    class Clock:
        def start(self):
            pass

        def stop(self):
            return next(durations)

    lead_in = LeadIn(BURST, sleep=host.sleep, now=host.now)
    sample_interleaved({"call": lambda: None}, clock=Clock(), samples=1, warmup=3, lead_in=lead_in)
    assert log == [("sleep", 0.02)]  # idle as long as the median warm-up call, not the slowest


def test_fused_autotuned_executes_the_fastest_median_of_its_own_rounds_passing_over_an_algorithm_that_raises(
    monkeypatch,
):
    from fusedbench.measure.gpu import providers

    outcomes = {"0": [3.0, 1.0, 3.0], "1": [2.0, 2.0, 9.0], "2": RuntimeError("no")}  # medians 3 and 2; one failed

    class FakeTiming:
        closed = 0

        @classmethod
        def open(cls, stack, telemetry=True):
            assert telemetry is False  # nobody keeps the autotune's readings
            return cls()

        def sample(self, runs, samples):
            assert list(runs) == ["0", "1", "2"] and samples == providers.AUTOTUNE_SAMPLES
            return dict(outcomes)

        def close(self):
            FakeTiming.closed += 1

    monkeypatch.setattr(providers, "Timing", FakeTiming)
    matmul = type("Matmul", (), {"execute": lambda self, algorithm: None})()
    assert providers.fastest_algorithm(None, matmul, ["a", "b", "c"]) == "b"
    outcomes.update({"0": RuntimeError("first"), "1": RuntimeError("second")})
    with pytest.raises(RuntimeError, match="first"):
        providers.fastest_algorithm(None, matmul, ["a", "b", "c"])
    assert FakeTiming.closed == 2


def test_a_flush_or_probe_that_raises_is_fusedbenchs_own_error_not_a_runs():
    def flush():
        raise RuntimeError("the flush buffer is gone")

    with pytest.raises(RuntimeError, match="flush buffer"):
        sample_interleaved(
            {"a": lambda: None}, clock=FakeClock([1.0] * 4, []), samples=1, warmup=1, between_samples=flush
        )


@pytest.mark.parametrize("failing", ["plan", "choice"])
def test_a_matmul_whose_plan_or_choice_fails_is_freed(monkeypatch, failing):
    """plan_matmul allocates nvmath's Matmul first: a refused plan or a failed choice must not leave it behind."""
    from types import SimpleNamespace

    from fusedbench.catalog.dtypes import dtype_spec
    from fusedbench.catalog.epilogs import epilog_spec
    from fusedbench.catalog.workloads import Workload
    from fusedbench.measure.gpu import providers

    freed = []

    class Matmul:
        def __init__(self, *args, **kwargs):
            pass

        def plan(self, **kwargs):
            if failing == "plan":
                raise ValueError("no algorithm for this layout")
            return ["first", "second"]

        def free(self):
            freed.append(True)

    def no_choice(stack, matmul, algorithms):
        raise RuntimeError("out of memory")

    monkeypatch.setattr(providers, "fastest_algorithm", no_choice)
    stack = SimpleNamespace(nvmath_advanced=SimpleNamespace(Matmul=Matmul), compute_types=None)
    workload = Workload(epilog_spec("DEFAULT"), dtype_spec("fp16"), 64, 32, 16)
    operands = SimpleNamespace(a=None, b=None, result=None, workload=workload)
    with pytest.raises((ValueError, RuntimeError)):
        providers.plan_matmul(stack, operands, autotune=True)
    assert freed == [True]


class FakeStretch:
    """Logs the stretch's two halves around a timed call."""

    def __init__(self, log):
        self._log = log

    def mark(self):
        self._log.append("mark")

    def stretch(self, fraction):
        self._log.append(f"stretch {fraction}")


def test_an_injected_slowdown_stretches_only_its_runs_sampled_calls_inside_the_timed_region():
    log = []
    samples = sample_interleaved(
        {"a": lambda: log.append("a"), "b": lambda: log.append("b")},
        clock=FakeClock([1.0] * 6, log),
        samples=2,
        warmup=1,
        slower={"a": 0.05},
        stretch=FakeStretch(log),
    )
    assert log[:6] == ["start", "a", "stop", "start", "b", "stop"]  # warm-up calls are never stretched
    sampled = log[6:]
    assert sampled.count("mark") == 2 and sampled.count("stretch 0.05") == 2
    for index, event in enumerate(sampled):
        if event == "mark":  # the mark right before the region, the stretch inside it right after the call
            assert sampled[index + 1 : index + 5] == ["start", "a", "stretch 0.05", "stop"]
    assert all(sampled[i - 1] == "start" and sampled[i + 1] == "stop" for i, e in enumerate(sampled) if e == "b")
    assert samples == {"a": [1.0, 1.0], "b": [1.0, 1.0]}


def test_a_slowdown_without_a_stretch_is_refused():
    with pytest.raises(ValueError, match=r"runs \['a'\] are to be slowed, but no stretch was given"):
        sample_interleaved({"a": lambda: None}, clock=FakeClock([1.0], []), samples=1, warmup=0, slower={"a": 0.05})
