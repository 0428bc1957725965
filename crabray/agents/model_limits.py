"""One limiter per model endpoint: calls in flight, requests and tokens per minute, adaptive.

A hosted model API caps what one account may send (calls in flight, requests
and tokens per minute) and answers the excess with 429. A sweep whose
hundreds of episodes each call the model on their own meets those caps as a
429 storm. ``ModelLimiter`` grants calls to one endpoint (a base URL and a
model) so that the run as a whole stays within:

- ``max_connections`` calls in flight, ``rpm`` requests and ``tpm`` tokens per
  sliding minute (0: no limit);
- adaptively (AIMD, on by default), a current limit on calls in flight within
  ``[min_connections, max_connections]``: it shrinks by ``DECREASE_FACTOR`` on a
  429, a server error or latency rising past ``LATENCY_RISE`` times its
  baseline (at most once per round trip, so one burst of refusals is one
  decrease; a burst's further 429s bring it down to the calls still in flight,
  which the provider kept, at most halving it per 429), and grows by one call per
  round of successful calls while calls fill it (one per ``PROBE_CALLS`` near where
  the provider last refused); when it cannot shrink further, a 429's
  ``Retry-After`` pauses every grant;
- a learned ceiling: the highest whole limit at which a full round of calls filled
  the limit and succeeded without a 429. A 429 above it is a probe that went one call
  too far: the limit goes back to that level, not down by a quarter. A 429 at or
  below it says the provider takes less than it did: the level is forgotten and the
  limit steps one call down (a further 429 shrinks it by ``DECREASE_FACTOR``).

Why the ceiling: the limiter counts a call from its grant to its release, the
provider from its arrival to its answer. On a cluster the difference is the way
there and back (the actor's messages, HTTP): on the bench's 3-node cluster a
grant was held 358 ms for a call the mock served in 304 (``docs/models.md``), so
a limit at the provider's own number leaves it about a sixth idle. The limit
that keeps the provider full is above the provider's number, where a probe
meets an occasional 429: cheap (the provider refuses at once) as long as one
429 does not cost a quarter of the limit.

The core is plain Python with an injected clock: it never sleeps and never
blocks, so it is tested deterministically. What waits around it is in
``crabray.agents.model_gate``: a lock in-process, a named Ray actor per
endpoint for a run on a cluster.
"""

from __future__ import annotations

import itertools
import logging
import math
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from typing import Protocol

from pydantic import BaseModel, ConfigDict, Field

logger = logging.getLogger(__name__)

START_CONNECTIONS = 8
"""Where an adaptive limit starts (within its bounds): few enough that a first burst does
not meet a small provider quota with a storm, and it grows within seconds where there is
room."""

DECREASE_FACTOR = 0.75
"""What a decrease multiplies the adaptive limit by."""

PROBE_CALLS = 40
"""Near where the provider last refused, the limit grows by one call per this many successes
at most: probing past a known ceiling is what causes the next refusal, so it is done rarely
(about one 429 per this many calls at a steady provider, whatever its size)."""

LATENCY_RISE = 2.0
"""A latency average this many times its baseline counts as the provider queueing calls
(a provider that slows down rather than refuses): the limit shrinks."""

_LATENCY_WEIGHT = 0.2
"""Weight of a new latency in its moving average."""

_BASELINE_DRIFT = 0.01
"""Share of the way the latency baseline moves up towards the average per call: a model
that is slow for good (long answers) becomes the new normal over a few hundred calls."""

LEASE_SEC = 900.0
"""By default, a grant not released within this long is freed: its caller died holding it."""

WINDOW_SEC = 60.0
"""The sliding window of ``rpm`` and ``tpm``."""


class Outcome(StrEnum):
    """How a granted call ended, as the limiter learns from it."""

    OK = "ok"
    RATE_LIMITED = "rate_limited"
    SERVER_ERROR = "server_error"
    OTHER = "other"
    """A client error or an abandoned call: it frees its place, and teaches nothing."""


class ModelLimits(BaseModel):
    """The limits of one model endpoint for a whole run.

    Example:
        >>> ModelLimits(max_connections=16, rpm=500).tightest(ModelLimits(max_connections=4))
        ModelLimits(max_connections=4, min_connections=1, rpm=500, tpm=0, adaptive=True)
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    max_connections: int = Field(default=32, gt=0, description="Most calls in flight.")
    min_connections: int = Field(
        default=1, gt=0, description="Fewest calls in flight an adaptive limit shrinks to."
    )
    rpm: int = Field(default=0, ge=0, description="Requests per sliding minute; 0: no limit.")
    tpm: int = Field(default=0, ge=0, description="Tokens per sliding minute; 0: no limit.")
    adaptive: bool = Field(
        default=True, description="Shrink on 429, 5xx and rising latency; grow while calls pass."
    )

    def tightest(self, other: ModelLimits) -> ModelLimits:
        """The limits both ``self`` and ``other`` allow: agents sharing an endpoint share them."""
        return ModelLimits(
            max_connections=min(self.max_connections, other.max_connections),
            min_connections=min(self.min_connections, other.min_connections),
            rpm=_tightest_rate(self.rpm, other.rpm),
            tpm=_tightest_rate(self.tpm, other.tpm),
            adaptive=self.adaptive or other.adaptive,
        )


def _tightest_rate(a: int, b: int) -> int:
    """The smaller of two rates where 0 means no limit."""
    return min(a, b) if a and b else a or b


class LimiterState(BaseModel):
    """What a limiter is doing: for the progress display, logs and tests."""

    limit: float = Field(description="Calls in flight allowed now.")
    in_flight: int
    waiting: int
    granted: int = Field(description="Grants since the limiter started.")
    rate_limited: int = Field(description="429s reported since the limiter started.")
    server_errors: int
    decreases: int = Field(description="Times the adaptive limit shrank.")
    paused_sec: float = Field(description="Seconds until grants resume after a 429 at the floor.")


@dataclass
class _Grant:
    tokens: int
    at: float
    expires: float
    saturated: bool
    """Whether the limit was full while this call was in flight: only then (or when calls
    wait as it ends) does its success show that a higher limit would be used."""


class ModelLimiter:
    """Grants calls to one model endpoint; never blocks (see the module's docstring).

    Callers ``submit`` a request (its estimated tokens), ask ``grant`` which
    requests may go now (first come, first served), ``release`` each granted one
    with its ``Outcome``, and ``cancel`` a request they stop waiting for.
    ``next_check_sec`` says when time alone could let a waiting request through.

    Args:
        limits: The endpoint's limits.
        clock: Seconds, monotonic; ``time.monotonic`` in use, a counter in tests.
        name: The endpoint, for logs.
    """

    def __init__(
        self, limits: ModelLimits, clock: Callable[[], float], name: str = "model"
    ) -> None:
        self.limits = limits
        self.clock = clock
        self.name = name
        low, high = limits.min_connections, limits.max_connections
        start = min(high, max(low, START_CONNECTIONS)) if limits.adaptive else high
        self.limit = float(min(start, high))
        self._ids = itertools.count(1)
        self._waiting: deque[tuple[int, int, float]] = deque()
        self._granted: dict[int, _Grant] = {}
        self._requests: deque[float] = deque()
        self._tokens: deque[tuple[float, int]] = deque()
        self._paused_until = 0.0
        self._last_decrease = -math.inf
        self._refused_at: float | None = None
        self._ceiling: int | None = None
        """The learned ceiling (the module's docstring); None until a round proves one."""
        self._round: tuple[int, int] = (0, 0)
        """The whole limit now, and its calls that succeeded filling it since it was reached."""
        self._latency: float | None = None
        self._baseline: float | None = None
        self.granted_count = 0
        self.rate_limited = 0
        self.server_errors = 0
        self.decreases = 0

    def set_limits(self, limits: ModelLimits) -> None:
        """Apply new bounds (another agent of the same endpoint), keeping what was learnt."""
        self.limits = limits
        self.limit = min(max(self.limit, limits.min_connections), limits.max_connections)
        if not limits.adaptive:
            self.limit = float(limits.max_connections)

    def submit(self, tokens: int, lease_sec: float = LEASE_SEC) -> int:
        """Queue a request for ``tokens`` (its estimate); returns its id.

        Args:
            tokens: What the call is expected to use, prompt and answer.
            lease_sec: Once granted, how long its place is kept without a release (its
                caller may have died): longer than the request's own timeout.
        """
        request = next(self._ids)
        self._waiting.append((request, max(tokens, 0), lease_sec))
        return request

    def cancel(self, request: int) -> None:
        """Forget a request: still waiting, it leaves the queue; granted, it is released."""
        if request in self._granted:
            self.release(request, Outcome.OTHER)
            return
        self._waiting = deque(item for item in self._waiting if item[0] != request)

    def grant(self) -> list[int]:
        """The waiting requests that may go now, in the order they came; they are in flight."""
        now = self.clock()
        self._expire(now)
        self._slide(now)
        granted: list[int] = []
        while self._waiting and self._room_for(self._waiting[0][1], now):
            request, tokens, lease_sec = self._waiting.popleft()
            self._requests.append(now)
            if tokens:
                self._tokens.append((now, tokens))
            self._granted[request] = _Grant(tokens, now, now + lease_sec, False)
            self.granted_count += 1
            granted.append(request)
        if len(self._granted) >= math.floor(self.limit):
            for grant in self._granted.values():
                grant.saturated = True
        return granted

    def release(
        self,
        request: int,
        outcome: Outcome,
        *,
        latency_sec: float | None = None,
        tokens: int | None = None,
        retry_after_sec: float | None = None,
    ) -> None:
        """A granted call ended: free its place and learn from how.

        Args:
            request: Its id (an unknown or already released id is ignored).
            outcome: How it ended.
            latency_sec: How long the request took (a success's teaches the baseline).
            tokens: The tokens it really used, replacing its estimate in the ``tpm`` window.
            retry_after_sec: The provider's ``Retry-After`` of a 429.
        """
        grant = self._granted.pop(request, None)
        if grant is None:
            return
        now = self.clock()
        if tokens is not None and grant.tokens != tokens:
            self._correct_tokens(grant, tokens)
        if outcome is Outcome.OK:
            self._succeeded(grant, latency_sec, now)
        elif outcome is Outcome.RATE_LIMITED:
            self.rate_limited += 1
            floor = self.limit <= self.limits.min_connections
            self._refused(now)
            if floor and retry_after_sec:
                self._paused_until = max(self._paused_until, now + retry_after_sec)
        elif outcome is Outcome.SERVER_ERROR:
            self.server_errors += 1
            self._decrease(now, "a server error")

    def next_check_sec(self) -> float | None:
        """Seconds until time alone may let the first waiting request go (a window slides,
        a pause or a lease ends); None when nothing waits, or only a release can help."""
        if not self._waiting:
            return None
        now = self.clock()
        times = []
        if self._paused_until > now:
            times.append(self._paused_until - now)
        if self.limits.rpm and len(self._requests) >= self.limits.rpm:
            times.append(self._requests[0] + WINDOW_SEC - now)
        if self.limits.tpm and self._tokens:
            times.append(self._tokens[0][0] + WINDOW_SEC - now)
        if self._granted:
            times.append(min(g.expires for g in self._granted.values()) - now)
        return max(min(times), 0.0) if times else None

    def state(self) -> LimiterState:
        """What the limiter is doing now."""
        now = self.clock()
        return LimiterState(
            limit=round(self.limit, 2),
            in_flight=len(self._granted),
            waiting=len(self._waiting),
            granted=self.granted_count,
            rate_limited=self.rate_limited,
            server_errors=self.server_errors,
            decreases=self.decreases,
            paused_sec=round(max(self._paused_until - now, 0.0), 3),
        )

    def _room_for(self, tokens: int, now: float) -> bool:
        """Whether one more call of ``tokens`` fits every limit now."""
        if now < self._paused_until or len(self._granted) >= max(math.floor(self.limit), 1):
            return False
        limits = self.limits
        if limits.rpm and len(self._requests) >= limits.rpm:
            return False
        if limits.tpm and self._tokens:  # an empty window lets even an oversized call go
            used = sum(t for _, t in self._tokens)
            if used + tokens > limits.tpm:
                return False
        return True

    def _slide(self, now: float) -> None:
        while self._requests and self._requests[0] <= now - WINDOW_SEC:
            self._requests.popleft()
        while self._tokens and self._tokens[0][0] <= now - WINDOW_SEC:
            self._tokens.popleft()

    def _expire(self, now: float) -> None:
        """Free the places of grants never released (their worker died with them)."""
        for request in [r for r, g in self._granted.items() if g.expires <= now]:
            logger.warning("%s: a granted call was never released; freeing its place", self.name)
            self._granted.pop(request)

    def _correct_tokens(self, grant: _Grant, tokens: int) -> None:
        for index, (at, estimate) in enumerate(self._tokens):
            if at == grant.at and estimate == grant.tokens:
                self._tokens[index] = (at, tokens)
                return
        if tokens and grant.at > self.clock() - WINDOW_SEC:
            self._tokens.appendleft((grant.at, tokens))

    def _succeeded(self, grant: _Grant, latency_sec: float | None, now: float) -> None:
        if latency_sec is not None:
            if self._latency is None or self._baseline is None:
                self._latency = self._baseline = latency_sec
            else:
                self._latency += _LATENCY_WEIGHT * (latency_sec - self._latency)
                drift = _BASELINE_DRIFT * (self._latency - self._baseline)
                self._baseline = min(self._latency, self._baseline + max(drift, 0.0))
            if self._latency > LATENCY_RISE * self._baseline + 0.05:
                self._decrease(now, "rising latency")
                self._baseline = min(self._baseline * 1.1, self._latency)
                return
        if not self.limits.adaptive or not (grant.saturated or self._waiting):
            return
        self._count_round()
        step = 1.0 / max(self.limit, 1.0)
        if self._refused_at is not None and self.limit + 1 >= self._refused_at:
            step = min(step, 1.0 / PROBE_CALLS)
        self.limit = min(self.limit + step, float(self.limits.max_connections))

    def _count_round(self) -> None:
        """A call succeeded filling the limit: once a whole round has at this level, the
        provider takes it (the learned ceiling rises to it)."""
        level = max(math.floor(self.limit), 1)
        at, calls = self._round
        calls = calls + 1 if at == level else 1
        self._round = (level, calls)
        if calls >= level and (self._ceiling is None or level > self._ceiling):
            self._ceiling = level

    def _refused(self, now: float) -> None:
        """A 429: back to the learned ceiling when the limit was above it; one call down
        when the provider refused the ceiling itself (which is forgotten); else shrink."""
        if not self.limits.adaptive:
            return
        if self._deciding(now):
            self._bound_by_kept_calls()
            return
        level = max(math.floor(self.limit), 1)
        self._refused_at = self.limit
        ceiling = self._ceiling
        if ceiling is not None and ceiling < level:
            self._decrease(now, "a 429 past the learned ceiling", to=float(ceiling))
        elif ceiling is not None:
            self._ceiling = None
            self._decrease(now, "a 429 at the learned ceiling", to=float(level - 1))
        else:
            # The calls still in flight are what the provider took: no more fit.
            self._decrease(now, "a 429", ceiling=float(max(len(self._granted), 1)))

    def _bound_by_kept_calls(self) -> None:
        """A further 429 of a burst: the provider was full with calls still in flight here,
        so its limit is at most their number. The limit comes down to it (at most by half
        per 429), so one burst teaches what a run of decreases would: six calls sent to a
        provider of two are four 429s and a limit of two, not a quarter off per round trip."""
        kept = float(max(len(self._granted), self.limits.min_connections))
        if kept >= self.limit:
            return
        before = self.limit
        self.limit = max(kept, self.limit / 2)
        self.decreases += 1
        logger.info(
            "%s: a burst of 429s; calls in flight now %.1f (was %.1f)",
            self.name,
            self.limit,
            before,
        )

    def _deciding(self, now: float) -> bool:
        """Whether a decrease was made within the last round trip (a burst is one)."""
        round_trip = max(self._latency or 0.0, _MIN_ROUND_TRIP_SEC)
        return now - self._last_decrease < round_trip

    def _decrease(
        self, now: float, why: str, ceiling: float | None = None, to: float | None = None
    ) -> None:
        """Shrink the adaptive limit, at most once per round trip: to ``to`` if given, else
        by ``DECREASE_FACTOR`` and to ``ceiling`` at most (a 429's: the calls the provider
        had in flight when it refused), never below half in one step."""
        if not self.limits.adaptive or self._deciding(now):
            return
        before = self.limit
        shrunk = self.limit * DECREASE_FACTOR if to is None else min(to, self.limit)
        if ceiling is not None:
            shrunk = min(shrunk, max(ceiling, shrunk / 2))  # never below half in one step
        self.limit = max(shrunk, float(self.limits.min_connections))
        self._last_decrease = now
        if self.limit < before:
            self.decreases += 1
            logger.info(
                "%s: %s; calls in flight now %.1f (was %.1f)", self.name, why, self.limit, before
            )


_MIN_ROUND_TRIP_SEC = 0.2
"""Shortest spacing of two decreases: 429s arrive faster than answers."""


WaitCallback = Callable[[float], None]
"""Told, as a call waits for its grant, each further stretch of seconds it waited."""


class Gate(Protocol):
    """Where a model client asks for a grant before each request and reports how it ended.

    ``crabray.agents.model_gate`` has the two: in-process, and a run's Ray actor.
    """

    def acquire(self, tokens: int, lease_sec: float, on_wait: WaitCallback | None = None) -> int:
        """Wait for a grant to send a request of about ``tokens``; returns its ticket.

        Raises:
            ModelUnreachableError: The limiter itself cannot be reached.
        """

    def release(
        self,
        ticket: int,
        outcome: Outcome,
        *,
        latency_sec: float | None = None,
        tokens: int | None = None,
        retry_after_sec: float | None = None,
    ) -> None:
        """The request of ``ticket`` ended (see ``ModelLimiter.release``)."""
