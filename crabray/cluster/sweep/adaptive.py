"""``--concurrency auto``: how many episodes of each host kind run at once.

The decision is a small pure class, ``LevelController``: observations in, a
level out, per host kind, so that one kind saturating never holds back
another, and so it can be tested with synthetic observations. The scheduler
feeds it once a second (``levels.Levels.adapt``) and reads the level of each kind
before it dispatches an episode.

The rules, in order (the first that applies decides):

1. a sandbox start failed since the last observation: halve the level;
2. a node hosting the kind uses ``memory_high`` of its memory or more (well
   below Ray's out-of-memory killer, ``RAY_memory_usage_threshold``, 0.95 by
   default): halve the level;
3. sandbox starts take ``latency_factor`` times as long as the fastest seen at
   a lower level: one level down;
4. every episode the level allows is in flight, memory is below
   ``memory_ramp``, CPU below ``cpu_ramp``, and no model limiter of the run
   queues calls: one level up.

A model queueing holds the level rather than lowering it: the sandboxes in
flight are what keeps the model's queue full, and an LLM agent's sandbox that
waits for its model costs the host neither memory nor CPU, so without rule 4's
last part the level would climb to the slots while the agents wait for their
turn (``crabray.agents.model_gate.ModelLimiters.queued``).

After a backoff the level holds for ``hold_after_backoff`` observations.
The level stays within 1 and the kind's ceiling (the slots the cluster has
for it, which Ray's ``memory`` resource already bounds per node).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated, Literal

from pydantic import BaseModel, Field, PlainValidator
from pydantic_core import PydanticCustomError

AUTO: Literal["auto"] = "auto"
"""The value of ``concurrency`` that turns the controller on."""


def _concurrency(value: object) -> int | Literal["auto"]:
    """A concurrency as a run file or the command line gives it: ``auto``, or a whole
    number of at least 1 (``"4"`` too); one error naming both, not one per union branch."""
    if value == AUTO:
        return AUTO
    if isinstance(value, str) and value.strip().isdigit():
        value = int(value)
    if not isinstance(value, int) or isinstance(value, bool):
        raise PydanticCustomError(
            "concurrency", "Input should be a whole number of at least 1 or 'auto'"
        )
    if value < 1:
        raise PydanticCustomError("greater_than", "Input should be greater than 0 or 'auto'")
    return value


Concurrency = Annotated[int | Literal["auto"], PlainValidator(_concurrency)]
"""``--concurrency``: a fixed number of episodes in flight, or ``auto``."""


class KindObservation(BaseModel):
    """What the scheduler saw of one host kind since its last observation."""

    ceiling: int = Field(ge=0, description="Slots the cluster has for the kind now.")
    in_flight: int = Field(ge=0, description="Episodes of the kind in flight.")
    start_failures: int = Field(default=0, ge=0, description="Sandbox starts that failed.")
    start_latency_sec: float | None = Field(
        default=None, description="Median setup time of the episodes that finished; None: none."
    )
    memory_used: float | None = Field(
        default=None, description="Highest memory use (0-1) of the nodes hosting the kind."
    )
    cpu_used: float | None = Field(
        default=None, description="Highest CPU load (0-1, load per core) of those nodes."
    )
    model_queued: bool = Field(
        default=False,
        description="Whether a model limiter of the run queues calls: more episodes would "
        "wait for the model, holding their sandboxes.",
    )


class ControllerSettings(BaseModel):
    """The thresholds of ``LevelController``."""

    start: int = Field(default=2, ge=1, description="Level of each kind at the start.")
    memory_high: float = Field(default=0.85, description="Memory use that halves the level.")
    memory_ramp: float = Field(default=0.75, description="Memory use below which it may rise.")
    cpu_ramp: float = Field(default=0.9, description="CPU load below which it may rise.")
    latency_factor: float = Field(
        default=2.0, description="Start latency over the lower levels' best that steps down."
    )
    hold_after_backoff: int = Field(default=5, ge=0, description="Observations without a rise.")


class LevelController:
    """Per host kind, the episodes that may be in flight: raised while there is room,
    lowered on start failures, memory pressure and start latency growing."""

    def __init__(self, settings: ControllerSettings | None = None) -> None:
        self.settings = settings or ControllerSettings()
        self._levels: dict[str, int] = {}
        self._hold: dict[str, int] = {}
        self._best_latency: dict[str, dict[int, float]] = {}
        self.ceilings: dict[str, int] = {}

    def level(self, kind: str) -> int:
        """The episodes of ``kind`` that may be in flight now (at least 1)."""
        return self._levels.get(kind, self.settings.start)

    def observe(self, kind: str, seen: KindObservation) -> int:
        """Take one observation of ``kind``; return its new level."""
        ceiling = max(1, seen.ceiling)
        self.ceilings[kind] = ceiling
        level = min(self.level(kind), ceiling)
        pressed = seen.memory_used is not None and seen.memory_used >= self.settings.memory_high
        if seen.start_failures or pressed:
            level = self._back_off(kind, level // 2)
        elif self._slower(kind, level, seen.start_latency_sec):
            level = self._back_off(kind, level - 1)
        elif self._hold.get(kind, 0) > 0:
            self._hold[kind] -= 1
        elif self._has_room(seen, level):
            level += 1
        level = max(1, min(level, ceiling))
        self._levels[kind] = level
        return level

    def _back_off(self, kind: str, level: int) -> int:
        self._hold[kind] = self.settings.hold_after_backoff
        return level

    def _slower(self, kind: str, level: int, latency: float | None) -> bool:
        """Record ``latency`` at ``level``; whether it is well past the best of a lower level."""
        if latency is None:
            return False
        best = self._best_latency.setdefault(kind, {})
        best[level] = min(best.get(level, latency), latency)
        lower = [value for at, value in best.items() if at < level]
        return bool(lower) and latency > self.settings.latency_factor * max(min(lower), 0.05)

    def _has_room(self, seen: KindObservation, level: int) -> bool:
        s = self.settings
        return (
            seen.in_flight >= level
            and not seen.model_queued
            and (seen.memory_used is None or seen.memory_used < s.memory_ramp)
            and (seen.cpu_used is None or seen.cpu_used < s.cpu_ramp)
        )


def host_memory_used(meminfo: Path = Path("/proc/meminfo")) -> float:
    """This host's memory in use (0-1), as Ray's OOM killer counts it: 1 - available/total."""
    fields: dict[str, int] = {}
    for line in meminfo.read_text().splitlines():
        name, _, rest = line.partition(":")
        fields[name] = int(rest.split()[0])
    return 1.0 - fields["MemAvailable"] / fields["MemTotal"]


def host_cpu_used() -> float:
    """This host's CPU load per core over the last minute (0-1, can exceed 1)."""
    return os.getloadavg()[0] / (os.cpu_count() or 1)


__all__ = [
    "AUTO",
    "Concurrency",
    "ControllerSettings",
    "KindObservation",
    "LevelController",
    "host_cpu_used",
    "host_memory_used",
]
