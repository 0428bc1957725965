"""Helpers of the interrupt tests: ``crabray`` run as a user runs it, in a folder of its own."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import IO

import pytest

from tests.conftest import ROOT
from tests.conftest import raw_episode_rows as raw_rows


def cli_env() -> dict[str, str]:
    """The environment of a ``crabray`` started here (read now: tests set RAY_TMPDIR)."""
    return {
        **os.environ,
        "COLUMNS": "200",
        "NO_COLOR": "1",
        "PYTHONUNBUFFERED": "1",
        "PYTHONPATH": str(ROOT),
    }


def crabray_in(cwd: Path, *args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    """``crabray ARGS`` run in ``cwd`` (its default results root is ``cwd/results``)."""
    return subprocess.run(
        [sys.executable, "-m", "crabray", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=cwd,
        env=cli_env(),
    )


class Driver:
    """A ``crabray run`` (or ``command``) in its own process group, as a terminal's
    foreground job is."""

    def __init__(self, cwd: Path, *args: str, command: str = "run") -> None:
        self.stdout_path = cwd / f"driver-{time.monotonic_ns()}.out"
        self.stderr_path = self.stdout_path.with_suffix(".err")
        self._out: IO[str] = self.stdout_path.open("w")
        self._err: IO[str] = self.stderr_path.open("w")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "crabray", command, *args],
            cwd=cwd,
            env=cli_env(),
            stdout=self._out,
            stderr=self._err,
            text=True,
            start_new_session=True,
        )

    def wait_for_rows(self, out: Path, count: int, within_sec: float = 240) -> None:
        """Wait until ``count`` finished episodes are on disk (the run is mid-way)."""
        deadline = time.monotonic() + within_sec
        while len(finished_rows(out)) < count:
            assert self.process.poll() is None, f"the run ended early: {self.output()}"
            assert time.monotonic() < deadline, f"no {count} episodes yet: {self.output()}"
            time.sleep(0.2)

    def wait_for_text(self, text: str, within_sec: float = 240) -> None:
        deadline = time.monotonic() + within_sec
        while text not in self.stdout_path.read_text():
            assert self.process.poll() is None, f"the run ended early: {self.output()}"
            assert time.monotonic() < deadline, f"no {text!r} yet: {self.output()}"
            time.sleep(0.2)

    def wait_for_progress(self, text: str, within_sec: float = 240) -> None:
        """Wait, polling often, until the run's progress lines (standard error off a
        terminal: a line per finished episode) show ``text``."""
        deadline = time.monotonic() + within_sec
        while text not in self.stderr_path.read_text():
            assert self.process.poll() is None, f"the run ended early: {self.output()}"
            assert time.monotonic() < deadline, f"no {text!r} yet: {self.output()}"
            time.sleep(0.01)

    def signal_group(self, signum: int) -> None:
        """Send ``signum`` to the whole group, as the terminal does on Ctrl-C."""
        os.killpg(self.process.pid, signum)

    def finish(self, timeout: float = 180) -> tuple[int, str, str]:
        try:
            code = self.process.wait(timeout=timeout)
        finally:
            if self.process.poll() is None:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()
            self._out.close()
            self._err.close()
        return code, self.stdout_path.read_text(), self.stderr_path.read_text()

    def output(self) -> str:
        return self.stdout_path.read_text() + self.stderr_path.read_text()


def finished_rows(out: Path) -> list[dict]:
    """Episode rows on disk with a final result (neither cancelled nor env_error)."""
    rows = raw_rows(out, ["task_id", "agent", "epoch", "attempt", "termination_reason"])
    return [r for r in rows if r["termination_reason"] not in ("cancelled", "env_error")]


def resume_command(stdout: str) -> str:
    """The resume command an interrupted run printed."""
    found = re.search(r"resume with: (.+)", stdout)
    assert found, f"no resume command printed: {stdout}"
    return found.group(1).strip()


@pytest.fixture(autouse=True)
def private_ray(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Each test's runs start their own Ray instance under a temp dir of their own (short:
    Ray's socket paths must stay short), and never attach to another one on this machine."""
    import shutil
    import tempfile

    ray_tmp = tempfile.mkdtemp(prefix="crt", dir="/tmp")
    monkeypatch.setenv("RAY_TMPDIR", ray_tmp)
    yield
    shutil.rmtree(ray_tmp, ignore_errors=True)
