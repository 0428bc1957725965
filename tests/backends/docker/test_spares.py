"""Warm spares: how many are kept under way, and that none outlives its sandbox.

The queue's policy is checked with plain callables standing in for a
container start (it only calls them); the last test runs it in a real docker
sandbox, where what matters is the containers the engine holds.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from crabray.backends import create_backend
from crabray.backends.docker._spares import SpareQueue
from crabray.core.environment import EnvironmentConfig
from tests.backends.docker.dockerd import BUSYBOX_IMAGE


class Starts:
    """Spares that take ``start_sec`` each, numbered in start order; what was discarded."""

    def __init__(self, start_sec: float) -> None:
        self.start_sec = start_sec
        self.numbers = itertools.count()
        self.discarded: list[int] = []
        self.lock = threading.Lock()

    def launch(self) -> int:
        time.sleep(self.start_sec)
        with self.lock:
            return next(self.numbers)

    def discard(self, spare: int) -> None:
        self.discarded.append(spare)


@pytest.fixture
def starts() -> Iterator[Starts]:
    yield Starts(0.3)


def _sweep(queue: SpareQueue[int], episodes: int, episode_sec: float) -> list[int]:
    taken = []
    for _ in range(episodes):
        time.sleep(episode_sec)
        spare = queue.take()
        assert spare is not None
        taken.append(spare.result())
    return taken


def _assert_all_used_or_discarded(starts: Starts, taken: list[int]) -> None:
    """Every spare that started was used once or discarded at close (one not started is not)."""
    launched = next(starts.numbers)
    assert sorted(taken + starts.discarded) == list(range(launched))


def test_episodes_shorter_than_a_start_keep_more_spares(starts: Starts) -> None:
    queue = SpareQueue(starts.launch, starts.discard, limit=3, name="t")
    queue.top_up()
    taken = _sweep(queue, 6, episode_sec=0.03)
    assert queue.wanted == 3  # a 0.3 s start spans ten 0.03 s episodes: the limit holds
    assert len(set(taken)) == len(taken), "every spare is used once"
    queue.close()
    _assert_all_used_or_discarded(starts, taken)


def test_episodes_longer_than_a_start_keep_one(starts: Starts) -> None:
    starts.start_sec = 0.01
    queue = SpareQueue(starts.launch, starts.discard, limit=3, name="t")
    queue.top_up()
    taken = _sweep(queue, 4, episode_sec=0.5)  # far longer than a start, even under load
    assert queue.wanted == 1
    queue.close()
    _assert_all_used_or_discarded(starts, taken)


def test_removals_run_even_when_asked_during_close(starts: Starts) -> None:
    queue = SpareQueue(starts.launch, starts.discard, limit=1, name="t")
    removed = threading.Event()
    queue.remove(lambda: (time.sleep(0.1), removed.set()))
    queue.close()
    assert removed.is_set()
    queue.remove(removed.clear)  # after close it runs here, at once
    assert not removed.is_set()


def test_docker_spares_are_bounded_unused_and_removed_at_close(client: Any) -> None:
    backend = create_backend(
        EnvironmentConfig(
            name="sparebox",
            backend="docker",
            backend_settings={"image": BUSYBOX_IMAGE, "max_spares": 2},
        )
    )
    backend.start()
    sandbox = backend.describe()["sandbox"]

    def containers() -> list[Any]:
        return client.containers.list(all=True, filters={"label": f"crabray.sandbox={sandbox}"})

    try:
        seen = {backend.describe()["container"]}
        for _ in range(4):  # episodes of a command, far shorter than a container start
            backend.put_file("used", b"x")
            backend.reset()
            assert backend.exec("test ! -e used").exit_code == 0
            seen.add(backend.describe()["container"])
        assert len(seen) == 5, "every episode got a container no episode used"
        started = backend._spares.wait_started()
        assert 1 <= len(started) <= 2  # two while a start outlasts an episode, as it does here
        assert not {c.id for c, _ in started} & seen
    finally:
        backend.close()
    assert containers() == [], "close removes the container in use, the spares and the used ones"
