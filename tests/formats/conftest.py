"""Fixtures for the task-JSON tests: a real local sandbox and a task folder."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from crabray.backends import create_backend
from crabray.backends.episode_env import EpisodeEnv
from crabray.core import EnvironmentConfig
from crabray.core.env import AgentSignals
from crabray.formats.task_json import TaskContext


@pytest.fixture
def env(tmp_path: Path) -> Iterator[EpisodeEnv]:
    backend = create_backend(
        EnvironmentConfig(name="box", backend_settings={"root_dir": str(tmp_path / "sandboxes")})
    )
    backend.start()
    try:
        yield EpisodeEnv("box", backend, AgentSignals())
    finally:
        backend.close()


@pytest.fixture
def task_dir(tmp_path: Path) -> Path:
    folder = tmp_path / "task"
    folder.mkdir()
    return folder


@pytest.fixture
def ctx(env: EpisodeEnv, task_dir: Path) -> TaskContext:
    return TaskContext(env, task_dir)


# Task folders: a task written into a temporary folder, file by file.

TASK_BASE_FROM = "FROM ghcr.io/theagentcompany/task-base-image:1.0.0\n"

GOOD_EVALUATOR = """\
from typing import List

from common import grader
from scoring import Checkpoint, Result, bonus_for_completing_final


@grader
def grade_checkpoint1() -> bool:
    with open("/workspace/order.txt") as handle:
        return handle.read() == "pre\\npopulate\\npost\\n"


@grader
def grade_checkpoint2(trajectory: str) -> bool:
    return "answer.txt" in trajectory


@grader
def grade_final_checkpoint() -> bool:
    with open("/workspace/answer.txt") as handle:
        return handle.read().strip() == "hello"


def grade_checkpoints(trajectory="") -> Result:
    checkpoints: List[Checkpoint] = []
    checkpoints.append(Checkpoint(1, int(grade_checkpoint1())))
    checkpoints.append(Checkpoint(1, int(grade_checkpoint2(trajectory))))
    checkpoints.append(Checkpoint(2, 2 * int(grade_final_checkpoint())))
    return Result(checkpoints, bonus_for_completing_final)
"""
"""Four points: 1 for the init scripts' work (the noop agent gets it), 1 for a trajectory
that names answer.txt, 2 for /workspace/answer.txt holding hello."""

INIT_SCRIPTS = {
    "pre_init.py": "open('/workspace/order.txt', 'w').write('pre\\n')\n",
    "populate_data.py": "open('/workspace/order.txt', 'a').write('populate\\n')\n",
    "post_init.py": "open('/workspace/order.txt', 'a').write('post\\n')\n",
}


def write_task_folder(
    folder: Path,
    *,
    files: dict[str, str] | None = None,
    omit: tuple[str, ...] = (),
) -> Path:
    """A valid task folder at ``folder`` (the 'write hello' task), ``files`` overriding.

    ``omit`` names files not to write at all.
    """
    content = {
        "task.md": "Write the word hello into /workspace/answer.txt.\n",
        "checkpoints.md": "1. init ran (1 pt)\n2. answer.txt in the trajectory (1 pt)\n"
        "3. answer.txt holds hello (2 pts)\n",
        "evaluator.py": GOOD_EVALUATOR,
        "Dockerfile": TASK_BASE_FROM,
        "dependencies.yml": "",
        "solution.sh": "echo hello > /workspace/answer.txt\n",
        **INIT_SCRIPTS,
        **(files or {}),
    }
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in content.items():
        if name not in omit:
            (folder / name).write_text(text)
    return folder


# Task folders: a service on loopback for the service registry.


class FakeService(ThreadingHTTPServer):
    """A service with ``/reset`` (POST) and ``/health`` (503 while down, or before ``healthy_at``).

    It serves on loopback from a thread, started by the ``service`` fixture.
    """

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.resets = 0
        self.health_checks = 0
        self.healthy = True
        self.healthy_at = 0.0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


class _Handler(BaseHTTPRequestHandler):
    server: FakeService

    def do_GET(self) -> None:
        if self.path != "/health":
            self._answer(404)
            return
        self.server.health_checks += 1
        up = self.server.healthy and time.monotonic() >= self.server.healthy_at
        self._answer(200 if up else 503)

    def do_POST(self) -> None:
        if self.path != "/reset":
            self._answer(404)
            return
        self.server.resets += 1
        self._answer(200)

    def _answer(self, status: int) -> None:
        body = b"ok" if status == 200 else b"not ready"
        self.send_response(status)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        """Quiet: the test asserts on counters, not logs."""


@pytest.fixture
def service() -> Iterator[FakeService]:
    server = FakeService()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)
