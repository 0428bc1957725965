"""A model provider's limits, simulated: what ``crabray llm serve --max-concurrent ...`` enforces.

Hosted model APIs cap calls in flight, requests and tokens per minute, take
their time and sometimes fail. ``ProviderLimits`` says which of these the mock
model imitates; ``ProviderSimulator`` enforces them for every client of one
server (one lock, so the limits hold across threads and client processes) and
counts what it did as ``ProviderStats``, which the server shows on
``GET /stats``. It knows nothing of HTTP: ``chat_server.ChatServer`` asks it,
request by request, whether to admit, fail, refuse or delay.

Rules, in the order a request meets them:

1. ``max_concurrent``: a request arriving while that many are in flight is
   refused (429, reason ``concurrency``) at once;
2. ``rpm``: a request that would be the window's ``rpm + 1``-th admitted one is
   refused (429, ``rpm``); the window slides (the last ``window_sec``);
3. ``error_rate``: an admitted request fails (500) with that probability,
   after its latency;
4. ``tpm``: a reply whose tokens (prompt + completion, as its ``usage`` says)
   would take the window's total past ``tpm`` is replaced by a 429 (``tpm``);
   only served replies count;
5. ``latency``: every reply but a 429 is sent after a delay drawn from its
   distribution, holding its place in flight.

Refusals carry a ``Retry-After`` in whole seconds (at least 1): when the
window has room again for ``rpm`` and ``tpm``, the mean latency for
``concurrency``.
"""

from __future__ import annotations

import math
import random
import threading
import time
from collections import deque
from dataclasses import dataclass
from typing import Literal, cast

from pydantic import BaseModel, ConfigDict, Field, model_validator

from crabray.core.words import counted

LATENCY_GRAMMAR = "SECONDS, uniform:LOW,HIGH, normal:MEAN,SD or exp:MEAN (all in seconds)"
"""What ``LatencySpec.parse`` reads, for its error messages."""

LatencyKind = Literal["fixed", "uniform", "normal", "exp"]
_ARITY: dict[str, int] = {"fixed": 1, "uniform": 2, "normal": 2, "exp": 1}

RefusalReason = Literal["concurrency", "rpm", "tpm"]


class LatencySpec(BaseModel):
    """How long a reply takes: a fixed delay or a distribution, in seconds.

    ``normal`` draws are clipped at 0. Example: ``LatencySpec.parse("uniform:0.1,0.5")``.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: LatencyKind = Field(default="fixed", description="The distribution.")
    params: tuple[float, ...] = Field(
        default=(0.0,),
        description="fixed: (seconds,); uniform: (low, high); normal: (mean, sd); exp: (mean,).",
    )

    @model_validator(mode="after")
    def _check(self) -> LatencySpec:
        """Reject what cannot be drawn from, so a bad spec fails at startup, not per request."""
        problem = _latency_problem(self.kind, self.params)
        if problem is not None:
            raise ValueError(problem)
        return self

    @classmethod
    def parse(cls, text: str) -> LatencySpec:
        """A spec from its text: ``0.3``, ``uniform:0.1,0.5``, ``normal:0.3,0.05``, ``exp:0.3``.

        Raises:
            ValueError: The text is not one of these, naming what is wrong.
        """
        kind, sep, rest = text.strip().partition(":")
        kind = kind.strip().lower() if sep else "fixed"
        rest = rest if sep else text
        if kind not in _ARITY:
            raise ValueError(
                f"unknown distribution '{kind}' in '{text}'; expected {LATENCY_GRAMMAR}"
            )
        params: list[float] = []
        for part in rest.split(","):
            try:
                params.append(float(part))
            except ValueError:
                wrong = f"'{part.strip()}' is not a number of seconds"
                raise ValueError(f"'{text}': {wrong}; expected {LATENCY_GRAMMAR}") from None
        problem = _latency_problem(kind, tuple(params))
        if problem is not None:
            raise ValueError(f"'{text}': {problem}; expected {LATENCY_GRAMMAR}")
        return cls(kind=cast(LatencyKind, kind), params=tuple(params))

    def draw(self, rng: random.Random) -> float:
        """One delay, in seconds (never negative)."""
        if self.kind == "uniform":
            return rng.uniform(*self.params)
        if self.kind == "normal":
            return max(0.0, rng.gauss(*self.params))
        if self.kind == "exp":
            return rng.expovariate(1 / self.params[0])
        return self.params[0]

    @property
    def mean_sec(self) -> float:
        """The delays' mean: what a bench divides by to know the mock's capacity."""
        if self.kind == "uniform":
            return (self.params[0] + self.params[1]) / 2
        if self.kind == "normal":
            mean, sd = self.params
            if sd == 0:
                return mean
            z = mean / sd  # the mean of max(0, X) for X ~ N(mean, sd)
            cdf = 0.5 * (1 + math.erf(z / math.sqrt(2)))
            pdf = math.exp(-z * z / 2) / math.sqrt(2 * math.pi)
            return mean * cdf + sd * pdf
        return self.params[0]

    def __str__(self) -> str:
        numbers = ",".join(f"{p:g}" for p in self.params)
        return numbers if self.kind == "fixed" else f"{self.kind}:{numbers}"


class ProviderLimits(BaseModel):
    """The limits a mock provider imposes; the defaults impose none (the plain mock model)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    max_concurrent: int | None = Field(
        default=None, ge=1, description="Requests in flight at once; one more gets a 429."
    )
    rpm: int | None = Field(
        default=None, ge=1, description="Requests admitted per window (a minute by default)."
    )
    tpm: int | None = Field(
        default=None,
        ge=1,
        description="Tokens (prompt + completion) served per window (a minute by default).",
    )
    latency: LatencySpec | None = Field(
        default=None, description="The delay of every reply, the injected errors' included."
    )
    error_rate: float = Field(
        default=0.0, ge=0, le=1, description="The share of admitted requests answered with 500."
    )
    seed: int | None = Field(
        default=None, description="Seeds the draws of errors and latencies (None: random)."
    )
    window_sec: float = Field(
        default=60.0,
        gt=0,
        description="The sliding window rpm and tpm count over: a minute, as hosted APIs; "
        "shorter in tests that watch the window pass.",
    )

    @property
    def limited(self) -> bool:
        """Whether any limit, delay or error applies: the plain mock model has none."""
        limits = (self.max_concurrent, self.rpm, self.tpm, self.latency, self.error_rate)
        return any(limit is not None and limit != 0 for limit in limits)

    def capacity_per_sec(self) -> float | None:
        """Requests per second these limits let through at best (None: no bound on requests).

        The smaller of ``max_concurrent`` over the mean latency and ``rpm`` per
        window; ``tpm`` is left out, as it depends on the requests' sizes.
        """
        bounds: list[float] = []
        mean = self.latency.mean_sec if self.latency is not None else 0.0
        if self.max_concurrent is not None and mean > 0:
            bounds.append(self.max_concurrent / mean)
        if self.rpm is not None:
            bounds.append(self.rpm / self.window_sec)
        return min(bounds) if bounds else None

    def describe(self) -> str:
        """One line for the terminal: ``at most 8 in flight, 60 requests a minute, ...``."""
        window = "a minute" if self.window_sec == 60 else f"per {self.window_sec:g} s"
        parts: list[str] = []
        if self.max_concurrent is not None:
            parts.append(f"at most {self.max_concurrent} in flight")
        if self.rpm is not None:
            parts.append(f"{counted(self.rpm, 'request')} {window}")
        if self.tpm is not None:
            parts.append(f"{counted(self.tpm, 'token')} {window}")
        if self.latency is not None:
            parts.append(f"latency {self.latency} s")
        if self.error_rate:
            parts.append(f"{self.error_rate:.0%} errors")
        if self.seed is not None:
            parts.append(f"seed {self.seed}")
        return ", ".join(parts) or "no limits"


class RateLimited(BaseModel):
    """429s sent, by the limit that refused."""

    concurrency: int = 0
    rpm: int = 0
    tpm: int = 0

    @property
    def total(self) -> int:
        return self.concurrency + self.rpm + self.tpm


class ProviderStats(BaseModel):
    """What a mock provider did since it started: ``GET /stats``, and its summary at shutdown."""

    requests: int = Field(default=0, description="POST requests received, refused ones included.")
    served: int = Field(default=0, description="Replies with a 2xx status.")
    replies_by_status: dict[int, int] = Field(
        default_factory=dict, description="Replies sent, by HTTP status."
    )
    rate_limited: RateLimited = Field(
        default_factory=RateLimited, description="429s, by the limit that refused."
    )
    server_errors: int = Field(default=0, description="Replies with a 5xx status.")
    injected_errors: int = Field(default=0, description="The 5xx of them from error_rate.")
    tokens_in: int = Field(default=0, description="Prompt tokens of the served replies.")
    tokens_out: int = Field(default=0, description="Completion tokens of the served replies.")
    in_flight: int = Field(default=0, description="Requests admitted and not yet answered.")
    peak_in_flight: int = Field(default=0, description="The most in flight at once so far.")
    uptime_sec: float = Field(default=0.0, description="Since the server started.")
    capacity_per_sec: float | None = Field(
        default=None, description="ProviderLimits.capacity_per_sec: a bench's 100%."
    )
    limits: ProviderLimits = Field(default_factory=ProviderLimits)

    def summary(self) -> str:
        """One line: requests, served, 429s by reason, 5xx, tokens, peak concurrency."""
        limited = self.rate_limited
        return (
            f"{counted(self.requests, 'request')}: {self.served} served, "
            f"{limited.total} rate-limited (concurrency {limited.concurrency}, "
            f"rpm {limited.rpm}, tpm {limited.tpm}), "
            f"{counted(self.server_errors, 'server error')} "
            f"({self.injected_errors} injected); "
            f"{counted(self.tokens_in + self.tokens_out, 'token')}; "
            f"peak {self.peak_in_flight} in flight"
        )


@dataclass(frozen=True)
class Refusal:
    """A request refused by a limit: why, and when to come back (whole seconds, at least 1)."""

    reason: RefusalReason
    retry_after_sec: int
    message: str


class ProviderSimulator:
    """Enforces ``ProviderLimits`` for all of one server's clients, and counts.

    Thread-safe: every decision and count is taken under one lock, so a limit
    holds however many handler threads ask at once. A request the simulator
    admits must be ended with ``finish``, whatever happens to it.
    """

    def __init__(self, limits: ProviderLimits | None = None) -> None:
        self.limits = limits or ProviderLimits()
        self._rng = random.Random(self.limits.seed)
        self._lock = threading.Lock()
        self._started = time.monotonic()
        self._admitted: deque[float] = deque()  # when, for rpm
        self._tokens: deque[tuple[float, int]] = deque()  # when and how many, for tpm
        self._stats = ProviderStats(limits=self.limits)

    def admit(self) -> Refusal | None:
        """Take a place in flight for a new request, or say which limit refuses it."""
        with self._lock:
            self._stats.requests += 1
            refusal = self._concurrency_refusal() or self._rpm_refusal()
            if refusal is not None:
                self._refused(refusal)
                return refusal
            self._admitted.append(time.monotonic())
            self._stats.in_flight += 1
            self._stats.peak_in_flight = max(self._stats.peak_in_flight, self._stats.in_flight)
            return None

    def fails(self) -> bool:
        """Whether this admitted request is to fail on purpose (``error_rate``)."""
        if not self.limits.error_rate:
            return False
        with self._lock:
            return self._rng.random() < self.limits.error_rate

    def take_tokens(self, tokens: int) -> Refusal | None:
        """Count a reply's tokens against ``tpm``, or refuse it if they do not fit the window."""
        with self._lock:
            refusal = self._tpm_refusal(tokens)
            if refusal is not None:
                self._refused(refusal)
                return refusal
            if self.limits.tpm is not None:
                self._tokens.append((time.monotonic(), tokens))
            return None

    def delay(self) -> None:
        """Sleep as long as a reply takes (``latency``), holding the request's place in flight."""
        if self.limits.latency is None:
            return
        with self._lock:
            seconds = self.limits.latency.draw(self._rng)
        time.sleep(seconds)

    def finish(self, status: int, usage: tuple[int, int] = (0, 0)) -> None:
        """Count a reply with ``status`` and ``(prompt, completion)`` tokens; free its place."""
        with self._lock:
            self._stats.in_flight -= 1
            self._count(status, usage)

    def note_injected_error(self) -> None:
        """Count a 5xx sent because of ``error_rate`` (its status is counted by ``finish``)."""
        with self._lock:
            self._stats.injected_errors += 1

    def stats(self) -> ProviderStats:
        """A copy of the counts so far."""
        with self._lock:
            return self._stats.model_copy(
                deep=True,
                update={
                    "uptime_sec": round(time.monotonic() - self._started, 3),
                    "capacity_per_sec": self.limits.capacity_per_sec(),
                },
            )

    # Everything below runs under the lock.

    def _count(self, status: int, usage: tuple[int, int]) -> None:
        stats = self._stats
        stats.replies_by_status[status] = stats.replies_by_status.get(status, 0) + 1
        if 200 <= status < 300:
            stats.served += 1
            stats.tokens_in += usage[0]
            stats.tokens_out += usage[1]
        elif status >= 500:
            stats.server_errors += 1

    def _refused(self, refusal: Refusal) -> None:
        limited = self._stats.rate_limited
        setattr(limited, refusal.reason, getattr(limited, refusal.reason) + 1)
        if refusal.reason != "tpm":  # a tpm refusal was admitted: ``finish`` counts its 429
            self._count(429, (0, 0))

    def _concurrency_refusal(self) -> Refusal | None:
        limit = self.limits.max_concurrent
        if limit is None or self._stats.in_flight < limit:
            return None
        mean = self.limits.latency.mean_sec if self.limits.latency is not None else 0.0
        message = f"rate limited: {limit} requests in flight already (max_concurrent {limit})"
        return Refusal("concurrency", _whole_seconds(mean), message)

    def _rpm_refusal(self) -> Refusal | None:
        limit = self.limits.rpm
        if limit is None:
            return None
        now = time.monotonic()
        _drop_before(self._admitted, now - self.limits.window_sec)
        if len(self._admitted) < limit:
            return None
        wait = self._admitted[0] + self.limits.window_sec - now
        message = f"rate limited: {counted(limit, 'request')} in the last {self._window()} (rpm)"
        return Refusal("rpm", _whole_seconds(wait), message)

    def _tpm_refusal(self, tokens: int) -> Refusal | None:
        limit = self.limits.tpm
        if limit is None:
            return None
        now = time.monotonic()
        while self._tokens and self._tokens[0][0] <= now - self.limits.window_sec:
            self._tokens.popleft()
        used = sum(count for _, count in self._tokens)
        if used + tokens <= limit:
            return None
        reply = f"a reply of {counted(tokens, 'token')}"
        if tokens > limit:
            message = f"rate limited: {reply} is over tpm {limit} on its own"
            return Refusal("tpm", _whole_seconds(self.limits.window_sec), message)
        wait, freed = 0.0, 0
        for when, count in self._tokens:  # until enough of the window's tokens have left it
            freed += count
            wait = when + self.limits.window_sec - now
            if used - freed + tokens <= limit:
                break
        message = (
            f"rate limited: {reply} would take the last {self._window()}'s {used} past tpm {limit}"
        )
        return Refusal("tpm", _whole_seconds(wait), message)

    def _window(self) -> str:
        return "minute" if self.limits.window_sec == 60 else f"{self.limits.window_sec:g} s"


def _drop_before(times: deque[float], start: float) -> None:
    """Forget the times at or before ``start``: they have left the window."""
    while times and times[0] <= start:
        times.popleft()


def _whole_seconds(seconds: float) -> int:
    """A ``Retry-After`` value: whole seconds, rounded up, at least 1."""
    return max(1, math.ceil(seconds))


def _latency_problem(kind: str, params: tuple[float, ...]) -> str | None:
    """What makes a latency spec impossible to draw from, or None: one check for both ways in."""
    if len(params) != _ARITY[kind]:
        return f"{kind} takes {counted(_ARITY[kind], 'number')}, not {len(params)}"
    if any(not math.isfinite(p) or p < 0 for p in params):
        return "seconds are finite and not negative"
    if kind == "uniform" and params[0] > params[1]:
        return "uniform:LOW,HIGH needs LOW <= HIGH"
    if kind == "exp" and params[0] == 0:
        return "exp:MEAN needs a MEAN above 0"
    return None
