"""A task folder's setup, solution and grading, run in a real task-base container.

These drive the loaded task's actions directly against a docker sandbox of
``crabray/task-base`` (built from ``envs/task-base`` on first use), so they
check the sandbox side of the format: files in /utils and /instruction, init
scripts in order, eval.py's verdicts turned into a ``Score``.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from crabray.backends import create_backend
from crabray.backends.environment import AgentSignals, Environment
from crabray.core import EnvironmentConfig, Task
from crabray.core.errors import ActionError, EvaluatorError
from crabray.core.result import CheckpointScore, Score
from crabray.formats import load_suite, resolve_suite
from tests.backends.docker.dockerd import require_env_image
from tests.formats.conftest import write_task_folder

pytestmark = pytest.mark.slow

TRAJECTORY = json.dumps(
    [
        {
            "step": 0,
            "env": "sandbox",
            "action": "run_command",
            "arguments": {"command": "echo hello > /workspace/answer.txt"},
            "result": "exit code 0",
            "error": None,
            "agent_message": None,
        }
    ]
)


@pytest.fixture(scope="module")
def sandbox() -> Iterator[Environment]:
    """A task-base container, reset before each use by the ``env`` fixture."""
    require_env_image("task-base")
    config = EnvironmentConfig(
        name="sandbox",
        backend="docker",
        backend_settings={"build": "task-base", "workdir": "/workspace", "warm_spare": False},
    )
    backend = create_backend(config)
    backend.start()
    try:
        yield Environment("sandbox", backend, AgentSignals())
    finally:
        backend.close()


@pytest.fixture
def env(sandbox: Environment) -> Environment:
    sandbox.backend.reset()
    return sandbox


def load_task(folder: Path) -> Task:
    return load_suite(resolve_suite(folder)).entry(folder.name).task


def set_up(task: Task, env: Environment) -> None:
    for step in task.setup:
        step.run(env)


def score(task: Task, env: Environment, trajectory: str = "[]") -> Score:
    assert task.scorer is not None
    return task.scorer.invoke({"env": env, "trajectory": trajectory}, {})


def test_setup_puts_the_files_and_runs_init_scripts_in_order(
    tmp_path: Path, env: Environment
) -> None:
    task = load_task(write_task_folder(tmp_path / "hello"))
    set_up(task, env)
    assert env.get_file("/instruction/task.md") == (tmp_path / "hello" / "task.md").read_bytes()
    assert env.get_file("/workspace/order.txt") == b"pre\npopulate\npost\n"
    listed = env.exec("ls /utils").stdout.split()
    assert set(listed) == {
        "scoring.py",
        "common.py",
        "eval.py",
        "dependencies.yml",
        "pre_init.py",
        "populate_data.py",
        "post_init.py",
    }  # not evaluator.py: the agent must not read the rubric
    assert env.exec("test -d /outputs").ok


def test_solution_earns_every_point(tmp_path: Path, env: Environment) -> None:
    task = load_task(write_task_folder(tmp_path / "hello"))
    set_up(task, env)
    for step in task.solution:
        step.run(env)
    result = score(task, env, TRAJECTORY)
    assert result.value == 1.0
    assert result.checkpoints == [
        CheckpointScore(total=1, result=1),
        CheckpointScore(total=1, result=1),
        CheckpointScore(total=2, result=2),
    ]
    assert env.get_file("/outputs/trajectory.json").decode() == TRAJECTORY


def test_doing_nothing_earns_partial_credit(tmp_path: Path, env: Environment) -> None:
    task = load_task(write_task_folder(tmp_path / "hello"))
    set_up(task, env)
    result = score(task, env)
    assert [(c.total, c.result) for c in result.checkpoints] == [(1, 1), (1, 0), (2, 0)]
    assert result.value == pytest.approx(0.5 * 1 / 4)
    assert result.explanation == "1/4 points; checkpoints 1/1, 0/1, 0/2"


def test_agent_edits_to_the_grading_modules_do_not_count(tmp_path: Path, env: Environment) -> None:
    task = load_task(write_task_folder(tmp_path / "hello"))
    set_up(task, env)
    env.put_file("/utils/scoring.py", b"raise SystemExit('tampered')\n")
    env.put_file("/outputs/eval_result.json", b'{"checkpoints": [], "final_score": {}}')
    assert score(task, env).value == pytest.approx(0.125)


def test_evaluator_that_raises_gives_eval_py_message(tmp_path: Path, env: Environment) -> None:
    evaluator = "def grade_checkpoints(trajectory=''):\n    raise RuntimeError('rubric broke')\n"
    task = load_task(write_task_folder(tmp_path / "raises", files={"evaluator.py": evaluator}))
    set_up(task, env)
    with pytest.raises(EvaluatorError) as caught:
        score(task, env)
    assert str(caught.value) == "eval.py: grade_checkpoints raised RuntimeError: rubric broke"


def test_empty_checkpoint_list_is_malformed(tmp_path: Path, env: Environment) -> None:
    evaluator = (
        "from scoring import Result\n\ndef grade_checkpoints(trajectory=''):\n"
        "    return Result([])\n"
    )
    task = load_task(write_task_folder(tmp_path / "empty", files={"evaluator.py": evaluator}))
    set_up(task, env)
    with pytest.raises(EvaluatorError, match=r"^eval\.py: .*no checkpoints"):
        score(task, env)


def test_failing_init_script_names_it(tmp_path: Path, env: Environment) -> None:
    failing = "import sys\nprint('seeding')\nsys.exit('database seed missing')\n"
    task = load_task(write_task_folder(tmp_path / "bad", files={"populate_data.py": failing}))
    with pytest.raises(ActionError) as caught:
        set_up(task, env)
    assert str(caught.value) == (
        "init script populate_data.py exited 1: database seed missing\n"
        "last lines of its output:\n  seeding\n  database seed missing"
    )


def test_llm_judge_settings_reach_eval_py(
    tmp_path: Path, env: Environment, monkeypatch: pytest.MonkeyPatch
) -> None:
    evaluator = (
        "import os\nfrom scoring import Checkpoint, Result\n\n"
        "def grade_checkpoints(trajectory=''):\n"
        "    settings = [os.environ.get(n) for n in "
        "('LITELLM_BASE_URL', 'LITELLM_API_KEY', 'LITELLM_MODEL')]\n"
        "    return Result([Checkpoint(1, int(settings == ['http://judge', 'sk-x', 'm1']))])\n"
    )
    task = load_task(write_task_folder(tmp_path / "llm", files={"evaluator.py": evaluator}))
    set_up(task, env)
    assert score(task, env).value == 0.0
    monkeypatch.setenv("LITELLM_BASE_URL", "http://judge")
    monkeypatch.setenv("LITELLM_API_KEY", "sk-x")
    monkeypatch.setenv("LITELLM_MODEL", "m1")
    assert score(task, env).value == 1.0


def test_base_image_option_builds_on_the_given_image(tmp_path: Path) -> None:
    require_env_image("task-base")
    dockerfile = "FROM registry.invalid/none:1\nRUN echo built > /built.txt\n"
    folder = write_task_folder(tmp_path / "rebased", files={"Dockerfile": dockerfile})
    entry = load_suite(resolve_suite(folder, base_image="crabray/task-base:latest")).entry(
        "rebased"
    )
    [config] = entry.benchmark.task_environments(entry.task)
    backend = create_backend(config)
    backend.start()
    try:
        env = Environment("sandbox", backend, AgentSignals())
        assert env.get_file("/built.txt") == b"built\n"
        assert env.exec("pwd").stdout.strip() == "/workspace"
        set_up(entry.task, env)
        assert score(entry.task, env).value == pytest.approx(0.125)
    finally:
        backend.close()
