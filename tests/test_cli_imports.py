"""What each ``crabray`` command loads: the fixed cost every command pays (issue 16).

A command that only reads results or prints help must not load Ray or the
authoring model (pydantic schemas of actions, docstring_parser, networkx):
they are what a user waits for before anything is shown. Checked on the
modules a real ``crabray`` process holds when it exits.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from crabray.core.result import TerminationReason
from crabray.results import ResultSink, RunManifest, write_manifest
from tests.conftest import ROOT, raw_episode_rows
from tests.results.conftest import build_record

PROBE = """
import atexit, json, sys
atexit.register(lambda: print("MODULES", json.dumps(sorted(sys.modules)), file=sys.stderr))
from crabray.cli import app
app(prog_name="crabray")
"""
"""``crabray ARGS`` in a process that reports, as it exits, every module it loaded."""

AUTHORING = ("crabray.core.actions", "crabray.core.evaluators", "docstring_parser", "networkx")
RAY = ("ray",)


def loaded_by(*args: str, code: int = 0) -> set[str]:
    """The modules a ``crabray ARGS`` process loaded; fails the test on another exit code."""
    done = subprocess.run(
        [sys.executable, "-c", PROBE, *args],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
        env={**os.environ, "COLUMNS": "200", "NO_COLOR": "1"},
    )
    assert done.returncode == code, done.stderr
    line = next(line for line in done.stderr.splitlines() if line.startswith("MODULES "))
    return set(json.loads(line.removeprefix("MODULES ")))


@pytest.fixture
def out(tmp_path: Path) -> Path:
    """A results directory with one run of two episodes."""
    ResultSink(tmp_path, "r1").write(
        [build_record("t1", run_id="r1"), build_record("t2", run_id="r1")]
    )
    manifest = RunManifest(
        run_id="r1", suite="tasks/demo", suite_name="demo", agents=["agent-1"], crabray_version="0"
    )
    write_manifest(tmp_path, manifest)
    return tmp_path


@pytest.mark.parametrize(
    "args",
    [("--help",), ("leaderboard", "--help"), ("run", "--help")],
    ids=["help", "leaderboard-help", "run-help"],
)
def test_help_loads_neither_ray_nor_the_authoring_model_nor_arrow(args: tuple[str, ...]) -> None:
    loaded = loaded_by(*args)
    assert not loaded & {*AUTHORING, *RAY, "pyarrow", "pandas"}


@pytest.mark.slow  # three commands, each a fresh interpreter: seconds
def test_leaderboard_and_runs_list_load_neither_ray_nor_the_authoring_model(out: Path) -> None:
    board = loaded_by("leaderboard", str(out), "--format", "json")
    assert "crabray.results" in board  # it did read the results
    assert not board & {*AUTHORING, *RAY}
    runs = loaded_by("runs", "list", str(out))
    assert not runs & {*AUTHORING, *RAY}
    # An error shown for bad input pays for no more than the command did.
    failed = loaded_by("leaderboard", str(out / "runs"), code=2)
    assert not failed & {*AUTHORING, *RAY}


def test_the_authoring_api_still_loads_on_first_use() -> None:
    """``from crabray import action`` gives the decorator even after its submodule was loaded."""
    program = (
        "import crabray.core.benchmark\n"
        "from crabray import action, evaluator, Action\n"
        "from crabray.core import action as core_action\n"
        "print(callable(action), action is core_action, evaluator.__module__, Action.__name__)"
    )
    done = subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, timeout=60, check=True
    )
    assert done.stdout.split() == ["True", "True", "crabray.core.evaluators", "Action"]


PLAIN_SUITE = """
from crabray import BenchmarkConfig, EnvironmentConfig, Task
from crabray.actions import SHELL_ACTIONS, path_exists, run_command

bench = BenchmarkConfig(
    name="plain",
    environments=[EnvironmentConfig(name="box", action_space=SHELL_ACTIONS)],
    tasks=[
        Task(
            id="t",
            description="touch a file",
            evaluator=[path_exists(path="a"), path_exists(path="b")],
            solution=[run_command(command="touch a b")],
        )
    ],
)
"""


def test_a_suite_without_networkx_graphs_loads_without_networkx(tmp_path: Path) -> None:
    """networkx is half a second of import; only suites that build DiGraphs pay for it."""
    suite = tmp_path / "plain.py"
    suite.write_text(PLAIN_SUITE)
    loaded = loaded_by("tasks", "validate", str(suite))
    assert "crabray.formats.crab_dataset" in loaded  # every format was registered
    assert "networkx" not in loaded


@pytest.mark.ray
@pytest.mark.slow
def test_a_run_and_its_resume_never_import_pandas(tmp_path: Path) -> None:
    """pandas is 0.3 to 0.8 s of a run's driver: writing, resuming and compacting need none.

    The resumed run reads back a superseding infrastructure failure of ``t1``
    (which it runs again, as the next attempt) and compacts its three part files.
    """
    suite, out = tmp_path / "two.py", tmp_path / "out"
    suite.write_text(
        PLAIN_SUITE.replace('id="t"', 'id=f"t{i}"').replace("\n    ],", " for i in (0, 1)\n    ],")
    )
    first = loaded_by("run", str(suite), "--agent", "oracle", "--out", str(out))
    assert "crabray.results.store.sink" in first
    assert not first & {"pandas", "httpx"}  # httpx: only for a task folder's service reset
    (run_dir,) = (out / "episodes").iterdir()
    run_id = run_dir.name.removeprefix("run_id=")
    infra = build_record(
        "t1", run_id=run_id, agent="oracle", attempt=1, reason=TerminationReason.ENV_ERROR
    )
    ResultSink(out, run_id).write([infra])
    resumed = loaded_by(
        "run", str(suite), "--agent", "oracle", "--out", str(out), "--resume", run_id
    )
    assert "pandas" not in resumed
    rows = raw_episode_rows(out, ["task_id", "attempt", "termination_reason"])
    assert len(list(run_dir.iterdir())) == 1  # compacted
    assert sorted(rows, key=lambda row: (row["task_id"], row["attempt"])) == [
        {"task_id": "t0", "attempt": 0, "termination_reason": "success"},
        {"task_id": "t1", "attempt": 0, "termination_reason": "success"},
        {"task_id": "t1", "attempt": 1, "termination_reason": "env_error"},
        {"task_id": "t1", "attempt": 2, "termination_reason": "success"},
    ]


def test_an_actor_worker_loads_no_chat_client_until_an_llm_agent_is_made() -> None:
    """httpx and the chat client are about 60 ms of every worker's start, for LLM agents only."""
    program = (
        "import sys, crabray.cluster.actors.environment, crabray.episode\n"
        "from crabray.agents import AgentSpec, create_agent\n"
        "create_agent(AgentSpec(name='o', kind='oracle'))\n"
        "before = sorted({'httpx', 'crabray.agents.llm_client'} & set(sys.modules))\n"
        "from crabray.agents.registry import agent_class\n"
        "print(before, agent_class('openai-planner').__name__, 'httpx' in sys.modules)"
    )
    done = subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, timeout=60, check=True
    )
    assert done.stdout.split() == ["[]", "PlannerAgent", "True"]
