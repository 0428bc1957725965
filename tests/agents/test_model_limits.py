"""The model limiter's core, by its grants: plain Python on a clock the tests move.

Nothing here sleeps: ``Clock`` is the time the limiter sees. The simulated
provider at the end is the bench's setting (8 calls in flight, 0.3 s each)
run as discrete events, so the adaptive limit's 429 rate and throughput are
checked exactly, without a machine's noise.
"""

from __future__ import annotations

import heapq
import random
import threading
import time

import pytest

from crabray.agents.base import AgentSpec
from crabray.agents.config import LLMSettings
from crabray.agents.model_gate import LocalGate, agent_endpoints, limits_of
from crabray.agents.model_limits import (
    DECREASE_FACTOR,
    START_CONNECTIONS,
    ModelLimiter,
    ModelLimits,
    Outcome,
)


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def limiter(**limits: object) -> tuple[ModelLimiter, Clock]:
    clock = Clock()
    return ModelLimiter(ModelLimits.model_validate(limits), clock), clock


def test_calls_in_flight_stay_within_max_connections_first_come_first_served() -> None:
    core, _ = limiter(max_connections=2, adaptive=False)
    requests = [core.submit(10) for _ in range(5)]
    assert core.grant() == requests[:2]
    assert core.grant() == []
    assert core.next_check_sec() is not None  # the leases' end, far off
    core.release(requests[1], Outcome.OK, latency_sec=0.1)
    assert core.grant() == [requests[2]]
    assert core.state().in_flight == 2 and core.state().waiting == 2


def test_requests_per_minute_hold_the_excess_until_the_window_slides() -> None:
    core, clock = limiter(max_connections=10, rpm=3, adaptive=False)
    requests = [core.submit(1) for _ in range(4)]
    assert core.grant() == requests[:3]
    for request in requests[:3]:
        core.release(request, Outcome.OK)
    clock.now += 20
    assert core.grant() == []
    assert core.next_check_sec() == pytest.approx(40)
    clock.now += 40
    assert core.grant() == [requests[3]]


def test_tokens_per_minute_count_what_calls_really_used() -> None:
    core, clock = limiter(max_connections=10, tpm=100, adaptive=False)
    first, second = core.submit(60), core.submit(60)
    assert core.grant() == [first]
    assert core.grant() == []  # 120 > 100 with the estimate
    core.release(first, Outcome.OK, tokens=10)
    assert core.grant() == [second]  # 70: the answer said 10
    third = core.submit(60)
    assert core.grant() == []
    clock.now += 60
    assert core.grant() == [third]


def test_a_call_larger_than_tpm_still_goes_alone() -> None:
    core, _ = limiter(max_connections=10, tpm=100, adaptive=False)
    big = core.submit(500)
    assert core.grant() == [big]


def test_adaptive_limit_starts_low_and_grows_while_calls_fill_it() -> None:
    core, clock = limiter(max_connections=32)
    assert core.limit == START_CONNECTIONS
    for _ in range(100):
        requests = [core.submit(1) for _ in range(int(core.limit))]
        assert core.grant() == requests
        clock.now += 0.3
        for request in requests:
            core.release(request, Outcome.OK, latency_sec=0.3)
    assert core.limit > 30


def test_adaptive_limit_does_not_grow_on_calls_that_leave_it_idle() -> None:
    core, clock = limiter(max_connections=32)
    for _ in range(200):
        request = core.submit(1)
        core.grant()
        clock.now += 0.3
        core.release(request, Outcome.OK, latency_sec=0.3)
    assert core.limit == START_CONNECTIONS


def test_a_burst_of_429s_shrinks_the_limit_to_the_calls_the_provider_kept() -> None:
    """Eight sent, four refused together: the provider was full with the other four, so the
    limit is four after the burst (a quarter off per round trip would take three trips)."""
    core, clock = limiter(max_connections=32)
    requests = [core.submit(1) for _ in range(8)]
    core.grant()
    core.release(requests[0], Outcome.RATE_LIMITED, retry_after_sec=1)
    assert core.limit == pytest.approx(START_CONNECTIONS * DECREASE_FACTOR)
    for request in requests[1:4]:  # refused in the same round trip
        core.release(request, Outcome.RATE_LIMITED, retry_after_sec=1)
    assert core.limit == 4
    assert core.state().rate_limited == 4
    clock.now += 1
    core.release(requests[4], Outcome.SERVER_ERROR)
    assert core.limit == pytest.approx(4 * DECREASE_FACTOR)


def test_a_burst_of_429s_at_most_halves_the_limit_per_429() -> None:
    """A 429 with few calls in flight (a quota per minute, or another client of the same
    account) does not throw the limit to the floor at once: each 429 at most halves it."""
    core, _ = limiter(max_connections=32)
    core.limit = 16.0
    requests = [core.submit(1) for _ in range(16)]
    core.grant()
    for request in requests[:12]:  # ended, teaching nothing
        core.release(request, Outcome.OTHER)
    limits = []
    for request in requests[12:]:  # then four 429s at once, three calls in flight
        core.release(request, Outcome.RATE_LIMITED, retry_after_sec=1)
        limits.append(core.limit)
    assert limits == [6, 3, 1.5, 1]


def test_at_the_floor_a_429_pauses_every_grant_for_its_retry_after() -> None:
    core, clock = limiter(max_connections=4, min_connections=1)
    for _ in range(20):  # shrink to the floor
        request = core.submit(1)
        core.grant()
        core.release(request, Outcome.RATE_LIMITED, retry_after_sec=5)
        clock.now += 5
    assert core.limit == 1
    request = core.submit(1)
    assert core.grant() == [request]
    core.release(request, Outcome.RATE_LIMITED, retry_after_sec=5)
    waiting = core.submit(1)
    assert core.grant() == []
    assert core.next_check_sec() == pytest.approx(5)
    assert core.state().paused_sec == pytest.approx(5)
    clock.now += 5
    assert core.grant() == [waiting]


def test_rising_latency_shrinks_the_limit() -> None:
    core, clock = limiter(max_connections=32)
    for latency in [0.3] * 20 + [3.0] * 10:
        request = core.submit(1)
        core.grant()
        clock.now += latency
        core.release(request, Outcome.OK, latency_sec=latency)
    assert core.limit < START_CONNECTIONS
    assert core.state().decreases >= 1


def test_fixed_limits_never_adapt() -> None:
    core, _ = limiter(max_connections=4, adaptive=False)
    request = core.submit(1)
    core.grant()
    core.release(request, Outcome.RATE_LIMITED, retry_after_sec=1)
    assert core.limit == 4
    assert core.state().paused_sec == 0


def test_a_grant_never_released_frees_its_place_after_its_lease() -> None:
    core, clock = limiter(max_connections=1, adaptive=False)
    lost = core.submit(1, lease_sec=30)
    assert core.grant() == [lost]
    waiting = core.submit(1)
    assert core.grant() == []
    assert core.next_check_sec() == pytest.approx(30)
    clock.now += 30
    assert core.grant() == [waiting]
    core.release(lost, Outcome.OK)  # too late: ignored
    assert core.state().in_flight == 1


def test_cancel_leaves_the_queue_or_frees_the_place() -> None:
    core, _ = limiter(max_connections=1, adaptive=False)
    granted, queued, last = core.submit(1), core.submit(1), core.submit(1)
    assert core.grant() == [granted]
    core.cancel(queued)
    core.cancel(granted)
    assert core.grant() == [last]


def test_agents_sharing_an_endpoint_get_the_tightest_limits() -> None:
    a = ModelLimits(max_connections=16, rpm=500, tpm=0)
    b = ModelLimits(max_connections=64, rpm=0, tpm=10_000, adaptive=False)
    assert a.tightest(b) == ModelLimits(max_connections=16, rpm=500, tpm=10_000, adaptive=True)


def test_settings_without_any_limit_go_straight_to_the_model() -> None:
    assert limits_of(LLMSettings(max_connections=0, rpm=0, tpm=0)) is None
    defaults = limits_of(LLMSettings())
    assert defaults is not None and defaults.adaptive and defaults.rpm == 500
    spec = AgentSpec(
        name="p",
        kind="openai-planner",
        model="m",
        settings=LLMSettings(planner_model="big", base_url="http://x/v1/").model_dump(),
    )
    assert sorted(agent_endpoints(spec)) == ["http://x/v1#big", "http://x/v1#m"]


def test_local_gate_holds_threads_to_the_limit_and_reports_their_wait() -> None:
    gate = LocalGate(ModelLimiter(ModelLimits(max_connections=2, adaptive=False), time.monotonic))
    in_flight, peak, waited = [0], [0], [0.0]
    lock = threading.Lock()

    def call() -> None:
        def on_wait(seconds: float) -> None:
            with lock:
                waited[0] += seconds

        ticket = gate.acquire(1, 60, on_wait)
        with lock:
            in_flight[0] += 1
            peak[0] = max(peak[0], in_flight[0])
        time.sleep(0.05)
        with lock:
            in_flight[0] -= 1
        gate.release(ticket, Outcome.OK, latency_sec=0.05)

    threads = [threading.Thread(target=call) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert peak[0] == 2
    assert waited[0] > 0.1  # six of eight waited for a place
    assert gate.state().granted == 8 and gate.state().in_flight == 0


def simulate(
    limits: ModelLimits | None,
    seconds: float = 300.0,
    capacity: int = 8,
    latency: float = 0.3,
    hop: float = 0.0,
) -> tuple[float, float]:
    """64 callers against a provider that refuses past ``capacity`` calls in flight (429,
    Retry-After 1 s) and answers the rest in ``latency``; no limiter with ``limits`` None.

    ``hop`` is the way between the limiter and the provider, each way, on average (drawn
    uniformly from 0 to twice it, from a seeded generator): a granted call reaches the
    provider that long after its grant, and its end reaches the limiter that long after
    the provider freed its place (a Ray actor's messages and HTTP, on a real cluster).
    Meanwhile the limiter counts a place the provider does not.

    Returns 429s per 100 requests and the share of the provider's capacity served, both
    after the first 30 s.
    """
    clock = Clock()
    start = clock.now
    core = ModelLimiter(limits, clock) if limits is not None else None
    rng = random.Random(37)
    events: list[tuple[float, int, str, int]] = []  # (when, order, what, request)
    order = 0

    def at(when: float, what: str, request: int = 0) -> None:
        nonlocal order
        order += 1
        heapq.heappush(events, (when, order, what, request))

    busy, sent, refused, served = 0, 0, 0, 0
    waiting = 0
    for _ in range(64):
        at(clock.now, "ask")
    while events:
        when, _, what, request = heapq.heappop(events)
        if when > start + seconds:
            break
        clock.now = when
        late = when >= start + 30
        if what == "ask":
            if core is None:
                waiting += 1
            else:
                core.submit(100)
        elif what == "arrive":
            sent += late
            if busy >= capacity:
                refused += late
                at(clock.now + rng.uniform(0, 2 * hop), "refused", request)
            else:
                busy += 1
                at(clock.now + latency, "done", request)
        elif what == "refused":
            if core is not None:
                core.release(request, Outcome.RATE_LIMITED, retry_after_sec=1)
            at(clock.now + 1.0, "ask")
        elif what == "done":
            busy -= 1
            served += late
            at(clock.now + rng.uniform(0, 2 * hop), "answered", request)
        elif what == "answered":
            if core is not None:
                core.release(request, Outcome.OK, latency_sec=latency + hop)
            at(clock.now + 0.05, "ask")  # the episode acts, then asks again
        go = core.grant() if core is not None else [0] * waiting
        waiting = 0
        for granted in go:
            at(clock.now + rng.uniform(0, 2 * hop), "arrive", granted)
        if core is not None and (check := core.next_check_sec()) is not None:
            at(clock.now + max(check, 0.001), "tick")
    share = served / ((seconds - 30) * capacity / latency)
    return 100 * refused / max(sent, 1), share


@pytest.mark.parametrize("capacity", [2, 8, 16])
def test_adaptive_limit_against_a_provider_keeps_429s_rare_and_throughput_high(
    capacity: int,
) -> None:
    """The issue's bar (the bench's provider takes 8): under 5 429s per 100 calls after
    30 s, 85% of the provider's capacity served; without a limiter most calls are refused."""
    rate, share = simulate(ModelLimits(max_connections=32), capacity=capacity)
    assert rate < 5, rate
    assert share >= 0.85, share
    unlimited_rate, _ = simulate(None, capacity=capacity)
    assert unlimited_rate > 50, unlimited_rate


@pytest.mark.parametrize("hop", [0.0, 0.03])
@pytest.mark.parametrize("capacity", [8, 16])
def test_a_429_past_a_level_the_provider_took_costs_one_call_not_a_quarter(
    capacity: int, hop: float
) -> None:
    """Once a full round of calls filled a level without a 429, a probe past it that meets
    one goes back to that level: the provider stays as full as the way to it allows
    (``hop`` 30 ms each way, as measured on the bench's cluster, leaves a call 60 ms of
    its 360 outside the provider). Shrinking by a quarter at each probe's 429 served 96%
    of a 16-call provider without the way, and 79% with it."""
    rate, share = simulate(ModelLimits(max_connections=32), capacity=capacity, hop=hop)
    best = 0.3 / (0.3 + 2 * hop)
    assert rate < 5, rate
    assert share >= 0.99 * best, (share, best)


def test_a_429_at_the_learned_level_forgets_it_and_steps_one_call_down() -> None:
    """A provider that takes less than it did (its account shared now): the level it took
    is refused too, and the limit comes down, a call, then by a quarter."""
    core, clock = limiter(max_connections=32)
    for _ in range(3):  # full rounds at 8: the provider takes 8
        requests = [core.submit(1) for _ in range(8)]
        assert core.grant() == requests
        clock.now += 0.3
        for request in requests:
            core.release(request, Outcome.OK, latency_sec=0.3)
    core.limit = 9.5  # a probe past 8 ...
    requests = [core.submit(1) for _ in range(9)]
    core.grant()
    core.release(requests[0], Outcome.RATE_LIMITED, retry_after_sec=1)
    assert core.limit == 8  # ... back to the level the provider took
    clock.now += 1
    core.release(requests[1], Outcome.RATE_LIMITED, retry_after_sec=1)
    assert core.limit == 7  # the level itself refused: one down, and forgotten
    clock.now += 1
    core.release(requests[2], Outcome.RATE_LIMITED, retry_after_sec=1)
    assert core.limit == pytest.approx(7 * DECREASE_FACTOR)
