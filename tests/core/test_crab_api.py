"""CRAB's authoring API under crabray, imported only through CRAB's module paths.

What CRAB's own unit tests of actions and evaluators check (``test/core/test_action.py``,
``test_evaluator.py`` in camel-ai/crab), re-expressed, plus what a CRAB benchmark
file relies on: the module paths, ``EnvironmentConfig(reset=...)``, identifier names
of combined actions, the root actions and the in-process ``Environment``.
"""

from __future__ import annotations

import networkx as nx
import pytest
from pydantic import BaseModel, ValidationError

from crabray import BenchmarkConfig, Task, create_benchmark
from crabray.actions.crab_actions import check_submit, complete, submit, wait
from crabray.core import Action, Environment, Evaluator, GraphEvaluator, action, evaluator
from crabray.core.decorators import action as decorators_action
from crabray.core.errors import ActionParameterError
from crabray.core.models import ClosedAction, EnvironmentConfig, SubTask
from crabray.core.models.action import _check_no_param


@action
def increment(a: int, b: str = "unused") -> int:
    """
    Add one to a number.

    Args:
        a (int): The number.
        b (str, optional): Ignored. Defaults to "unused".

    Returns:
        int: a + 1.
    """
    return a + 1


@action
def plus(a: int, b: int = 1) -> int:
    return a + b


@action
def times(a: int, b: int = 1) -> int:
    return a * b


@action
def offset_by_env(a: int, env: int) -> int:
    """
    Add the environment (a number here) to a.

    Args:
        a (int): The number.
        env (int): Injected; never part of the schema.
    """
    return a + env


# -- actions --------------------------------------------------------------------------------


def test_module_paths_are_crabs() -> None:
    assert decorators_action is action
    assert isinstance(increment, Action)
    assert issubclass(SubTask, BaseModel)


def test_openai_json_schema_has_crabs_shape() -> None:
    schema = increment.to_openai_json_schema()
    assert set(schema) == {"name", "description", "parameters"}
    assert schema["name"] == "increment"
    assert schema["description"] == "Add one to a number."
    parameters = schema["parameters"]
    assert parameters["properties"]["a"]["type"] == "integer"
    assert parameters["properties"]["b"] == {
        "type": "string",
        "default": "unused",
        "description": 'Ignored. Defaults to "unused".',
    }
    assert parameters["required"] == ["a"]
    assert "env" not in offset_by_env.to_openai_json_schema()["parameters"]["properties"]


def test_tool_form_wraps_the_crab_schema() -> None:
    assert increment.to_openai_tool() == {
        "type": "function",
        "function": increment.to_openai_json_schema(),
    }


def test_function_becomes_an_action_with_its_docstring() -> None:
    assert increment.name == "increment"
    assert increment.description == "Add one to a number."
    assert set(increment.parameters.model_fields) == {"a", "b"}
    assert offset_by_env.kept_params == ("env",)


def test_pipe_entry_runs_left_to_right() -> None:
    twice = increment >> increment
    assert twice.entry(1) == 3
    assert twice.name == "increment_pipe_increment"


def test_positional_binding_closes_the_action() -> None:
    closed = plus(5)
    assert closed.entry() == 6
    assert _check_no_param(closed) is closed
    with pytest.raises(ValueError, match="needs arguments"):
        _check_no_param(plus)


def test_positional_binding_offers_nothing_and_says_its_input_in_the_description() -> None:
    closed = increment(5)
    schema = closed.to_openai_json_schema()
    assert schema["parameters"]["properties"] == {}
    assert schema["description"] == "Add one to a number. Input: (5,) {}"
    assert closed.run() == 6
    with pytest.raises(ActionParameterError, match="parameter 'b': is fixed by the task"):
        closed.run(b="x")


def test_keyword_binding_says_its_input_in_the_description() -> None:
    partly = increment(b="kept")
    assert partly.description == "Add one to a number. Input: () {'b': 'kept'}"
    assert list(partly.to_openai_json_schema()["parameters"]["properties"]) == ["a"]
    assert increment.description == "Add one to a number."


def test_a_positional_call_leaves_an_unbound_required_parameter_open() -> None:
    @action
    def between(low: int, high: int, step: int = 1) -> int:
        return (high - low) // step

    half = between(2)
    assert half.required_parameters == ["high"]
    assert list(half.to_openai_json_schema()["parameters"]["properties"]) == ["high"]
    assert half.run(high=8) == 6


def test_keyword_binding_leaves_the_rest_open() -> None:
    partly = plus(b=6)
    assert partly.entry(1) == 7
    assert partly.run(a=1) == 7
    assert "b" not in partly.to_openai_json_schema()["parameters"]["properties"]


def test_chains_of_bound_actions() -> None:
    assert (plus(b=10) >> times(b=10) >> plus()).entry(0) == 101
    assert (plus(a=1, b=10) >> times(b=10) >> plus()).entry() == 111
    assert (plus(1, b=10) >> times(b=10) >> plus()).entry() == 111


def test_set_kept_param_fixes_env() -> None:
    fixed = offset_by_env.set_kept_param(env=10)
    assert fixed.run(a=10) == 20
    assert fixed.kept_params == ()
    assert offset_by_env.kept_params == ("env",)


def test_closed_action_is_a_field_type() -> None:
    class Holder(BaseModel):
        step: ClosedAction

    assert Holder(step=plus(1)).step.entry() == 2
    with pytest.raises(ValidationError, match="needs arguments"):
        Holder(step=plus)


@pytest.mark.parametrize(
    ("combined", "name"),
    [(plus >> times, "plus_pipe_times"), (plus(1, 2) + times(3), "plus_then_times")],
)
def test_combined_names_validate_in_an_action_space(combined: Action, name: str) -> None:
    assert combined.name == name
    env = EnvironmentConfig(name="box", action_space=[combined])
    assert env.action(name) is combined


# -- evaluators -----------------------------------------------------------------------------

state = {"a": 0}


@evaluator
def positive() -> bool:
    return state["a"] > 0


@evaluator
def below_two() -> bool:
    return state["a"] < 2


@evaluator
def always() -> bool:
    return True


@pytest.mark.parametrize(
    ("a", "both", "either"), [(1, True, True), (-1, False, True), (3, False, True)]
)
def test_and_or_not(a: int, both: bool, either: bool) -> None:
    state["a"] = a
    assert isinstance(positive, Evaluator)
    assert (positive & below_two).entry() is both
    assert (positive | below_two).entry() is either
    assert (~positive).entry() is (a <= 0)


def test_graph_evaluator_steps_in_an_environment_crabs_way() -> None:
    root = Environment(name="root", action_space=[], observation_space=[], description="root")
    graph = GraphEvaluator(nx.path_graph([positive, below_two, always], create_using=nx.DiGraph))
    graph.reset()
    assert graph.count == 0
    assert [graph.G.nodes[n]["remaining_predecessors"] for n in (positive, below_two, always)] == [
        0,
        1,
        1,
    ]
    state["a"] = 3
    graph.step({"root": root})
    assert graph.count == 1
    assert graph.G.nodes[positive]["passing_count"] == 0
    assert graph.G.nodes[below_two]["remaining_predecessors"] == 0
    assert graph.G.nodes[below_two]["passing_count"] is None
    graph.step({"root": root})
    assert graph.count == 2
    assert not graph.is_complete()
    state["a"] = -1
    graph.step({"root": root})
    assert graph.count == 3
    assert graph.G.nodes[below_two]["passing_count"] == 2
    assert graph.is_complete()
    assert graph.stat()["completeness"] == 1.0


# -- environments, root actions, benchmarks -------------------------------------------------


@action
def set_flag(value: bool, env: Environment) -> None:
    """Set the flag.

    Args:
        value: The new flag.
    """
    env.flag = value  # type: ignore[attr-defined]


def test_environment_steps_record_the_trajectory_and_reset_runs_its_action() -> None:
    env = Environment(
        name="box",
        action_space=[set_flag],
        observation_space=[],
        reset=set_flag(False),
        extra_attributes={"flag": None},
    )
    assert env.flag is None  # type: ignore[attr-defined]
    env.reset()
    assert env.flag is False  # type: ignore[attr-defined]
    env.step("set_flag", {"value": True})
    assert env.flag is True  # type: ignore[attr-defined]
    assert env.trajectory == [("set_flag", {"value": True}, None)]
    with pytest.raises(Exception, match="has no action 'nope'"):
        env.step("nope")


@pytest.mark.parametrize("reset", [None, set_flag(False), [set_flag(False), set_flag(True)]])
def test_environment_config_reset_is_one_action_none_or_a_list(reset: object) -> None:
    config = EnvironmentConfig(name="box", action_space=[set_flag], reset=reset)
    expected = 0 if reset is None else 1 if isinstance(reset, Action) else 2
    assert len(config.reset) == expected


def test_check_submit_reads_the_root_trajectory() -> None:
    root = Environment(name="root", action_space=[submit, complete], observation_space=[])
    assert not check_submit("apple").run(root)
    root.trajectory.append(("submit", {"content": "an apple"}, "submitted"))
    assert check_submit("apple").run(root)
    root.trajectory.append(("complete", {}, "completed"))
    assert not check_submit("apple").run(root)


def test_root_action_space_replaces_crabrays_defaults_of_the_same_name() -> None:
    task = Task(
        id="0", description="submit apple", evaluator=check_submit("apple"), extra_action=[submit]
    )
    config = BenchmarkConfig(
        name="b",
        environments=[EnvironmentConfig(name="box", reset=set_flag(False))],
        tasks=[task],
        root_action_space=[complete, wait],
    )
    assert create_benchmark(config).config is config
    names = [b.call_name for b in config.action_space(task, [complete.model_copy()])]
    assert sorted(names) == ["complete", "submit", "wait"]


def test_reset_of_each_environment_runs_there_in_a_multi_environment_task() -> None:
    envs = [EnvironmentConfig(name=n, reset=set_flag(False)) for n in ("one", "two")]
    task = Task(id="0", description="d", evaluator=check_submit("x"), environments=["one", "two"])
    config = BenchmarkConfig(name="b", environments=envs, tasks=[task])
    assert [config.reset_env(a, e) for e in envs for a in e.reset] == ["one", "two"]


def test_reset_naming_an_environment_the_task_lacks_is_rejected() -> None:
    envs = [
        EnvironmentConfig(name="one", reset=set_flag(False).on("two")),
        EnvironmentConfig(name="two"),
    ]
    task = Task(id="0", description="d", evaluator=check_submit("x"), environments=["one"])
    with pytest.raises(ValidationError, match="reset 'set_flag' of environment 'one' runs in"):
        BenchmarkConfig(name="b", environments=envs, tasks=[task])


def test_a_local_evaluator_naming_an_environment_gets_that_environment() -> None:
    @evaluator(env_name="box", local=True)
    def typed_in_box(env: Environment) -> bool:
        return bool(env.trajectory)

    task = Task(id="0", description="d", evaluator=typed_in_box)
    config = BenchmarkConfig(name="b", environments=[EnvironmentConfig(name="box")], tasks=[task])
    assert config.resolve_env(typed_in_box, task) == "box"
    assert config.resolve_env(wait, task) == "root"


def test_crab_fields_crabray_does_not_support_are_refused_by_name() -> None:
    with pytest.raises(ValidationError, match=r"remote_url\n.*crabray does not use"):
        EnvironmentConfig(name="box", remote_url="http://192.168.0.2:8000")
    with pytest.raises(ValidationError, match=r"prompting_tools\n.*not supported"):
        BenchmarkConfig(
            name="b",
            environments=[EnvironmentConfig(name="box")],
            tasks=[Task(id="0", description="d", evaluator=check_submit("x"))],
            prompting_tools={"box": {"current_state": plus}},
        )
