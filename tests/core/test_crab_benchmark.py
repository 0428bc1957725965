"""CRAB's ``Benchmark`` under crabray: episodes driven one step at a time, in this process.

What CRAB's ``test/core/test_benchmark.py`` checks (a multi-environment task
whose evaluator graph completes a quarter per step, prompting tools), re-expressed
on a fixture of our own (a lamp in each room), plus how a step ends a task and
that a suite loader finds a benchmark bound as ``create_benchmark(config)``.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import networkx as nx
import pytest

from crabray import Benchmark, BenchmarkConfig, EnvironmentConfig, Task, action, create_benchmark
from crabray.core import Environment, evaluator
from crabray.formats import python as python_format
from crabray.results import read_episodes
from tests.conftest import ROOT, crabray

EXAMPLE = ROOT / "examples" / "crab_step_loop.py"


@action
def switch(on: bool, env: Environment) -> str:
    """Switch the lamp.

    Args:
        on: True to light it.
    """
    env.lit = on  # type: ignore[attr-defined]
    return f"lamp {'on' if on else 'off'}"


@action
def lamp(env: Environment) -> bool:
    """Whether the lamp is lit."""
    return bool(env.lit)  # type: ignore[attr-defined]


@action
def explode(env: Environment) -> None:
    """Break the room."""
    raise RuntimeError("the lamp exploded")


@action(env_name="root")
def answer(text: str) -> str:
    """Hand in the answer.

    Args:
        text: The answer.
    """
    return "noted"


@evaluator
def lit(env: Environment) -> bool:
    return bool(env.lit)  # type: ignore[attr-defined]


@evaluator(env_name="root")
def answered_yes(env: Environment) -> bool:
    return any(name == "answer" and args == {"text": "yes"} for name, args, _ in env.trajectory)


@evaluator
def lamp_is_broken(env: Environment) -> bool:
    raise OSError("cannot look at the lamp")


@action
def shout(value: bool) -> str:
    return f"THE LAMP IS {'ON' if value else 'OFF'}"


ROOM = EnvironmentConfig(
    name="room",
    action_space=[switch, explode],
    observation_space=[lamp],
    reset=switch(False),
)
ROOMS = [ROOM.model_copy(update={"name": f"room{i}"}) for i in range(3)]

graph = nx.DiGraph()
for index in range(3):
    graph.add_edge(lit.on(f"room{index}"), answered_yes)

SINGLE = BenchmarkConfig(
    name="lamp",
    environments=[ROOM],
    tasks=[
        Task(id="light", description="Light the lamp.", evaluator=lit, max_steps=3),
        Task(id="say", description="Say yes.", evaluator=answered_yes, extra_action=[answer]),
        Task(id="broken", description="Look.", evaluator=lamp_is_broken),
    ],
)
MULTI = BenchmarkConfig(
    name="lamps",
    environments=ROOMS,
    tasks=[Task(id="all", description="Light all three, then say yes.", evaluator=graph)],
    root_action_space=[answer],
    multienv=True,
)


@pytest.fixture
def single() -> Benchmark:
    return create_benchmark(SINGLE)


def test_multi_environment_task_completes_node_by_node() -> None:
    bench = create_benchmark(MULTI)
    task, actions = bench.start_task("all")
    assert bench.current_task is task
    assert sorted(actions) == ["room0", "room1", "room2", "root"]
    assert [a.name for a in actions["root"]] == ["answer"]
    completeness = []
    for index in range(3):
        result = bench.step("switch", {"on": True}, env_name=f"room{index}")
        assert not result.terminated
        completeness.append(result.evaluation_results["completeness"])
    assert completeness == [0.25, 0.5, 0.75]
    result = bench.step("answer", {"text": "yes"}, env_name="root")
    assert result.terminated and result.success
    assert result.info == {"terminate_reason": "success"}
    assert result.evaluation_results["complete_nodes"] == 4
    assert bench.current_task is None


def test_multi_environment_step_takes_the_qualified_name_crabray_run_gives_agents() -> None:
    bench = create_benchmark(MULTI)
    bench.start_task("all")
    result = bench.step("room1-switch", {"on": True})
    assert result.action_returns == "lamp on"
    assert result.evaluation_results["complete_nodes"] == 1
    assert bench.environment_map["room1"].lit  # type: ignore[attr-defined]


def test_single_environment_merges_spaces_and_observations(single: Benchmark) -> None:
    _, actions = single.start_task("say")
    assert sorted(a.name for a in actions["room"]) == ["answer", "explode", "switch"]
    assert single.observe() == {"room": {"lamp": False}}
    result = single.step("switch", {"on": True})
    assert result.action_returns == "lamp on" and not result.terminated
    assert single.observe() == {"room": {"lamp": True}}
    result = single.step("answer", {"text": "yes"})
    assert result.terminated and result.success


def test_prompting_tools_render_observations(single: Benchmark) -> None:
    single.prompting_tools = {"room": {"lamp": shout}}
    single.start_task("light")
    observations, prompts = single.observe_with_prompt()
    assert observations["room"]["lamp"] is False
    assert prompts["room"]["lamp"] == "THE LAMP IS OFF"
    single.close_task()


def test_step_budget_ends_the_task(single: Benchmark) -> None:
    single.start_task("light")
    reasons = [single.step("switch", {"on": False}).info.get("terminate_reason") for _ in range(3)]
    assert reasons == [None, None, "reach_max_step"]
    assert single.current_task is None


def test_complete_ends_the_task_as_it_stands(single: Benchmark) -> None:
    single.start_task("light")
    result = single.step("complete")
    assert result.terminated and not result.success
    assert result.info == {"terminate_reason": "agent_complete"}
    assert result.evaluation_results["completeness"] == 0.0


@pytest.mark.parametrize(
    ("action_name", "parameters", "reason", "detail"),
    [
        ("fly", {}, "action_format_error", "KeyError"),
        ("explode", {}, "env_exception", "the lamp exploded"),
        ("switch", {"on": "maybe"}, "env_exception", "on"),
    ],
)
def test_a_failing_step_ends_the_task_with_crabs_reason_and_the_traceback(
    single: Benchmark, action_name: str, parameters: dict[str, object], reason: str, detail: str
) -> None:
    single.start_task("light")
    result = single.step(action_name, parameters)
    assert result.terminated
    assert result.info["terminate_reason"] == reason
    assert detail in result.info["exception_detail"]
    assert single.current_task is None


def test_an_evaluator_that_raises_ends_the_task(single: Benchmark) -> None:
    single.start_task("broken")
    result = single.step("switch", {"on": True})
    assert result.info["terminate_reason"] == "evaluator_exception"
    assert "cannot look at the lamp" in result.info["exception_detail"]
    assert result.action_returns == "lamp on"


def test_each_task_starts_from_a_reset_environment_and_an_empty_trajectory(
    single: Benchmark,
) -> None:
    single.start_task("say")
    assert single.step("answer", {"text": "yes"}).success
    single.start_task("say")
    assert single.environment_map["root"].trajectory == []
    assert not single.step("switch", {"on": True}).terminated
    single.close_task()
    single.start_task("light")
    assert single.observe() == {"room": {"lamp": False}}
    assert "answer" not in [a.name for a in single.export_action_space()["room"]]


def test_evaluate_reports_progress_without_a_step(single: Benchmark) -> None:
    single.start_task("light")
    single.environment_map["room"].take_action(switch(True))
    assert single.evaluate()["completeness"] == 1.0


def test_task_misuse_is_refused_with_what_to_do(single: Benchmark) -> None:
    with pytest.raises(RuntimeError, match="call start_task"):
        single.step("switch", {"on": True})
    with pytest.raises(KeyError, match="has no task 'nope'; its tasks"):
        single.start_task("nope")
    single.start_task("light")
    with pytest.raises(RuntimeError, match="call close_task"):
        single.start_task("say")


def test_a_suite_module_binding_only_the_benchmark_object_loads(tmp_path: Path) -> None:
    suite = tmp_path / "lamp_suite.py"
    suite.write_text(
        "from crabray import BenchmarkConfig, EnvironmentConfig, Task, create_benchmark\n"
        "from crabray.actions import path_exists\n"
        "benchmark = create_benchmark(BenchmarkConfig(\n"
        "    name='bound', environments=[EnvironmentConfig(name='box')],\n"
        "    tasks=[Task(id='t', description='d', evaluator=path_exists('x'))]))\n"
    )
    loaded = python_format.load(suite)
    assert list(loaded.entries) == ["t"]
    assert loaded.entries["t"].benchmark.name == "bound"


def test_the_example_loop_solves_both_tasks() -> None:
    done = subprocess.run(
        [sys.executable, str(EXAMPLE)], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.count("success: success") == 2
    assert "machine1.set_state({'value': True}) -> completeness 0.67" in done.stdout


@pytest.mark.ray
@pytest.mark.slow
def test_the_example_scores_the_same_under_crabray_run(tmp_path: Path) -> None:
    out = tmp_path / "out"
    done = crabray("run", str(EXAMPLE), "--agent", "oracle", "--agent", "noop", "--out", str(out))
    assert done.returncode == 0, done.stderr
    episodes = read_episodes(out)
    scores = episodes.set_index(["agent", "task_id"]).score.to_dict()
    assert scores == {
        ("oracle", "set"): 1.0,
        ("oracle", "set_both"): 1.0,
        ("noop", "set"): 0.0,
        ("noop", "set_both"): 0.0,
    }
