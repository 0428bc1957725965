"""A run joining a head someone else started (``ray start``): its stop request still works.

On a running cluster the run's control actor starts a worker process of its
own, so that the first sandbox takes the worker left idle by the preflight
(``crabray.cluster.actors.control.start_control``). Ctrl-C must still reach the
episodes in flight through it: they are saved as they stood, not lost.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.cluster.conftest import ray_start_head
from tests.conftest import raw_episode_rows, write_sleepy_suite
from tests.interrupts.conftest import Driver, finished_rows

pytestmark = [pytest.mark.ray, pytest.mark.slow]

TASKS = 6


@pytest.fixture
def open_head(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[str]:
    """A head without token authentication; the driver joins it without one."""
    monkeypatch.setenv("RAY_AUTH_MODE", "disabled")
    monkeypatch.setenv("CRABRAY_NODES_FILE", str(tmp_path / "nodes.json"))
    with ray_start_head({**os.environ}, num_cpus=2) as address:
        yield address


@pytest.mark.timeout(400)
def test_ctrl_c_saves_the_episodes_in_flight_on_a_running_head(
    tmp_path: Path, open_head: str
) -> None:
    suite = write_sleepy_suite(tmp_path / "slow.py", tasks=TASKS, sleep=4.0)
    out = tmp_path / "results"
    driver = Driver(tmp_path, str(suite), "--agent", "oracle", "--address", open_head)
    driver.wait_for_rows(out, 1)
    driver.signal_group(signal.SIGINT)
    code, stdout, stderr = driver.finish()

    assert code == 130, driver.output()
    assert "Traceback" not in stderr, stderr
    finished = len(finished_rows(out))
    assert 1 <= finished < TASKS
    cancelled = [
        row
        for row in raw_episode_rows(out, ["termination_reason", "error"])
        if row["termination_reason"] == "cancelled"
    ]
    assert cancelled, f"the episodes in flight were not saved as they stood: {stdout}"
    assert all("interrupted" in row["error"] for row in cancelled)
