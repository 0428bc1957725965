"""The run's stop request as an environment actor sees it (``StopWatch``), on a real local Ray."""

from __future__ import annotations

import time
from typing import Any

import pytest
import ray

from crabray.cluster.actors.control import StopWatch, start_control

pytestmark = pytest.mark.usefixtures("local_ray")


@ray.remote(num_cpus=0)
class Watcher:
    """An actor holding the run's stop watch, as an environment actor does."""

    def __init__(self, control: Any) -> None:
        self.watch = StopWatch(control)

    def requested_within(self, seconds: float) -> bool:
        """Whether a stop is seen within ``seconds``, reading the watch as an episode does."""
        deadline = time.monotonic() + seconds
        while not self.watch.requested():
            if time.monotonic() > deadline:
                return False
            time.sleep(0.01)
        return True


def test_a_stop_reaches_a_watching_actor_and_nothing_else_does() -> None:
    control = start_control()
    watcher = Watcher.remote(control)
    assert ray.get(watcher.requested_within.remote(0.5)) is False
    ray.get(control.stop.remote())
    assert ray.get(watcher.requested_within.remote(10)) is True


def test_the_control_dying_with_its_driver_reads_as_a_stop() -> None:
    control = start_control()
    watcher = Watcher.remote(control)
    assert ray.get(watcher.requested_within.remote(0.5)) is False
    ray.kill(control)
    assert ray.get(watcher.requested_within.remote(10)) is True


def test_a_run_without_a_control_is_never_stopped() -> None:
    assert StopWatch(None).requested() is False
