"""Shared test helpers: running the real CLI in a subprocess, reading raw result rows."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from crabray.results import EPISODES_SCHEMA
from crabray.results.store.dataset import read_part_files

if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
    # Started in the background by a non-interactive shell, this process ignores Ctrl-C and
    # every process it starts would inherit that: the tests that press Ctrl-C on a `crabray`
    # command need it to reach them, as it does from a terminal.
    signal.signal(signal.SIGINT, signal.default_int_handler)

ROOT = Path(__file__).resolve().parents[1]

COMPONENT_MARKS = ("component", "ray", "slow")
"""The marks that declare a test costly: it starts Ray, Docker, sshd, QEMU, a desktop or a
browser (``component``, or ``ray`` for Ray alone), or takes more than a few seconds (``slow``)."""


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Split the suite by declared cost: ``-m component`` runs what is marked costly, ``-m fast``
    the rest, so that forgetting a mark slows ``-m fast`` down rather than hiding a test.

    A test is declared costly where its cost is known, with the narrowest scope that holds:
    ``@pytest.mark.component`` on a test, ``pytest.param(..., marks=pytest.mark.component)``
    on a parameter (the backend kinds of ``tests/backends/conftest.py``), ``pytestmark`` in a
    module, or, for a folder whose every test needs the component, ``pytest_itemcollected``
    in its ``conftest.py`` (pytest calls it for the tests under that folder only). Nothing is
    guessed from folder, fixture or test names.
    """
    for item in items:
        costly = any(item.get_closest_marker(name) for name in COMPONENT_MARKS)
        item.add_marker("component" if costly else "fast")


def raw_episode_rows(out: Path, columns: list[str]) -> list[dict[str, Any]]:
    """Every committed episode row under ``out``, duplicates and retries included.

    Reads only committed part files (``part-*.parquet``; a writer's dot-prefixed
    temporary files are skipped) against the episodes schema, so a run in progress
    with no part file yet reads as no rows rather than failing on a missing column.
    """
    files = sorted((out / "episodes").glob("run_id=*/part-*.parquet"))
    return read_part_files(files, EPISODES_SCHEMA, columns=columns).to_pylist()


def crabray(
    *args: str, timeout: float = 300, check: bool = False, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """Run ``python -m crabray ARGS`` as a user would, and capture what it shows.

    ``env`` adds to (or replaces) variables of this process's environment.
    """
    env = {**os.environ, "COLUMNS": "200", "NO_COLOR": "1", **(env or {})}
    done = subprocess.run(
        [sys.executable, "-m", "crabray", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=ROOT,
        env=env,
    )
    if check and done.returncode != 0:
        pytest.fail(
            f"crabray {' '.join(args)} exited {done.returncode}:\n{done.stdout}\n{done.stderr}"
        )
    return done


def abandoned_local_sandbox(settings: dict[str, Any], tmpdir: str | None = None) -> Path:
    """The root of a local sandbox whose owner process made it and was then killed, as a
    crashed run leaves one (``tmpdir``: the owner's temporary folder, where a sandbox
    without ``root_dir`` goes)."""
    env = os.environ if tmpdir is None else {**os.environ, "TMPDIR": tmpdir}
    owner = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import time\n"
            "from crabray.backends import create_backend\n"
            "from crabray.core.environment import EnvironmentConfig\n"
            f"b = create_backend(EnvironmentConfig(name='old', backend_settings={settings!r}))\n"
            "b.start(); print(b.root, flush=True); time.sleep(300)\n",
        ],
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    )
    assert owner.stdout is not None
    root = Path(owner.stdout.readline().strip())
    owner.kill()
    owner.wait()
    assert root.is_dir()
    return root


@pytest.fixture
def demo_suite() -> Path:
    return ROOT / "tasks" / "demo"


SLEEPY_SUITE = textwrap.dedent(
    """
    from crabray import BenchmarkConfig, EnvironmentConfig, Task
    from crabray.actions import SHELL_ACTIONS, FILE_ACTIONS, path_exists, run_command, write_file

    ENV = EnvironmentConfig(name="box", action_space=[*SHELL_ACTIONS, *FILE_ACTIONS])
    sweep = BenchmarkConfig(
        name="sweep",
        environments=[ENV],
        tasks=[
            Task(
                id=f"t{i:02d}",
                description="sleep, then write done.txt",
                evaluator=path_exists(path="done.txt"),
                solution=[
                    run_command(command="sleep SLEEP"),
                    write_file(path="done.txt", content="x"),
                ],
                time_limit_sec=LIMIT,
            )
            for i in range(N_TASKS)
        ],
    )
    """
)


def write_sleepy_suite(path: Path, tasks: int, sleep: float, limit: float | None = None) -> Path:
    """A suite of ``tasks`` tasks whose solution sleeps ``sleep`` seconds, then writes a file."""
    text = SLEEPY_SUITE.replace("N_TASKS", str(tasks)).replace("SLEEP", str(sleep))
    path.write_text(text.replace("LIMIT", repr(limit)))
    return path


@contextlib.contextmanager
def serve_mock_llm(
    suite: str, cwd: Path, env: dict[str, str], log: Path, flags: Sequence[str] = ()
) -> Iterator[str]:
    """``crabray llm serve SUITE [FLAGS]`` on a free port, as docs/offline-llm.md starts it: a
    model that replays the suite's solutions. Yields its base URL; stopped on exit (SIGTERM,
    after which ``log`` ends with its counts)."""
    with log.open("w") as out:
        server = subprocess.Popen(
            [sys.executable, "-m", "crabray", "llm", "serve", suite, "--port", "0", *flags],
            cwd=cwd,
            env={**env, "PYTHONUNBUFFERED": "1"},
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        deadline = time.monotonic() + 60
        while not (found := re.search(r"http://127\.0\.0\.1:\d+/v1", log.read_text())):
            assert server.poll() is None, log.read_text()
            assert time.monotonic() < deadline, f"no URL printed: {log.read_text()}"
            time.sleep(0.1)
        yield found.group(0)
    finally:
        server.terminate()
        server.wait(timeout=30)


REPLAYER_AGENT = """
[[agents]]
name = "replayer"
kind = "openai"
model = "crabray-mock"
base_url = "{url}"
"""


def run_replayed(
    suite: Path, out: Path, scratch: Path, *, timeout: float = 900
) -> subprocess.CompletedProcess[str]:
    """``crabray run SUITE`` by an ordinary LLM agent, ``replayer``, one attempt per episode.

    Its model is the offline one (``crabray llm serve SUITE``), which answers each
    step with the task's reference solution: the attack, in the attack suites. Not
    the oracle, whose evaluator errors would be the benchmark's.
    """
    env = {**os.environ, "COLUMNS": "200", "NO_COLOR": "1"}
    with serve_mock_llm(str(suite), ROOT, env, scratch / "serve.log") as url:
        agents = scratch / "agents.toml"
        agents.write_text(REPLAYER_AGENT.format(url=url))
        return crabray(
            "run", str(suite), "--agent-config", str(agents), "--agent", "replayer",
            "--out", str(out), "--max-attempts", "1", timeout=timeout,
        )  # fmt: skip
