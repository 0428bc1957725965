"""Episodes whose actions and evaluators are plain functions, as CRAB's seed writes them.

They run inside the task's sandbox (through its guest), not in the episode:
the seed's ``check_file_exist('/home/user/made.txt')`` sees the file a
command made in the confined local sandbox, and an exception inside comes back
as the action's error with the guest's traceback.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from crabray import BenchmarkConfig, EnvironmentConfig, Task
from crabray.actions import SHELL_ACTIONS, run_command
from crabray.agents import AgentSpec, NoopAgent, OracleAgent
from crabray.backends import Backend, create_backend
from crabray.backends.local import _bwrap
from crabray.core.result import EpisodeRecord, TerminationReason
from crabray.episode import EpisodeSettings, run_episode
from crabray.results import read_episodes
from tests.backends.guest_fixtures.seed_actions import check_file_exist, divide
from tests.conftest import crabray
from tests.episode.test_episode import ScriptAgent, call


@pytest.fixture
def bench(tmp_path: Path) -> BenchmarkConfig:
    usable, why = _bwrap.probe()
    if not usable:
        pytest.skip(f"bubblewrap does not work here ({why}): {_bwrap.INSTALL_HINT}")
    env = EnvironmentConfig(
        name="box",
        action_space=[*SHELL_ACTIONS, divide],
        backend="local",
        backend_settings={"root_dir": str(tmp_path), "isolation": "bwrap"},
    )
    task = Task(
        id="made",
        description="Make /home/user/made.txt.",
        evaluator=check_file_exist(file_path="/home/user/made.txt"),
        solution=[run_command(command="touch /home/user/made.txt")],
    )
    return BenchmarkConfig(name="seed", tasks=[task], environments=[env])


@pytest.fixture
def backends() -> Iterator[dict[str, Backend]]:
    made: dict[str, Backend] = {}
    yield made
    for backend in made.values():
        backend.close()


def _run(bench: BenchmarkConfig, agent: object, made: dict[str, Backend]) -> EpisodeRecord:
    task = bench.tasks[0]
    for env in bench.task_environments(task):
        made[env.name] = create_backend(env)
        made[env.name].start()
    settings = EpisodeSettings(run_id="r", suite="seed", agent="a")
    return run_episode(bench, task, agent, made, settings)  # type: ignore[arg-type]


def test_the_seed_evaluator_checks_the_sandbox_not_the_worker(
    bench: BenchmarkConfig, backends: dict[str, Backend]
) -> None:
    assert not Path("/home/user/made.txt").exists()
    record = _run(bench, OracleAgent(AgentSpec(name="oracle", kind="oracle")), backends)
    assert record.result.termination_reason is TerminationReason.SUCCESS
    assert record.result.score == 1.0
    assert not Path("/home/user/made.txt").exists()  # it was made in the sandbox only


def test_without_the_command_the_seed_evaluator_fails(
    bench: BenchmarkConfig, backends: dict[str, Backend]
) -> None:
    record = _run(bench, NoopAgent(AgentSpec(name="noop", kind="noop")), backends)
    assert record.result.success is False
    assert record.result.score == 0.0


def test_a_plain_action_raising_is_the_calls_error_with_the_guest_traceback(
    bench: BenchmarkConfig, backends: dict[str, Backend]
) -> None:
    record = _run(bench, ScriptAgent([call("divide", a=1, b=0)]), backends)
    error = record.steps[0].error or ""
    assert error.startswith("GuestCallError: action 'divide' raised ZeroDivisionError")
    assert "return a / b" in error
    assert record.result.action_errors == 1


SEED_SUITE = """
import os

from crabray import BenchmarkConfig, EnvironmentConfig, Task, evaluator
from crabray.actions import SHELL_ACTIONS, run_command


@evaluator
def check_file_exist(file_path: str) -> bool:
    return os.path.isfile(file_path)


seed = BenchmarkConfig(
    name="seed",
    environments=[
        EnvironmentConfig(
            name="box",
            action_space=SHELL_ACTIONS,
            backend="local",
            backend_settings={"isolation": "bwrap"},
        )
    ],
    tasks=[
        Task(
            id="made",
            description="Make /home/user/made.txt.",
            evaluator=check_file_exist("/home/user/made.txt"),
            solution=[run_command(command="touch /home/user/made.txt")],
        )
    ],
)
"""


@pytest.mark.ray
@pytest.mark.slow
def test_crabray_run_scores_the_seed_suite_in_its_sandbox(
    bench: BenchmarkConfig, tmp_path: Path
) -> None:
    """The issue's example, end to end: ``crabray run`` on Ray, the evaluator in the sandbox."""
    suite = tmp_path / "seed_suite.py"
    suite.write_text(SEED_SUITE)
    out = tmp_path / "out"
    done = crabray("run", str(suite), "--agent", "oracle", "--agent", "noop", "--out", str(out))
    assert done.returncode == 0, done.stderr
    episodes = read_episodes(out)
    assert episodes.set_index("agent")["score"].to_dict() == {"oracle": 1.0, "noop": 0.0}
