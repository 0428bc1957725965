"""``Task``, ``EnvironmentConfig``, ``BenchmarkConfig``, naming, and the public exports."""

from __future__ import annotations

from typing import Any

import networkx as nx
import pytest
from pydantic import ValidationError

import crabray
from crabray import (
    BenchmarkConfig,
    EnvironmentConfig,
    Evaluator,
    GraphEvaluator,
    Task,
    action,
    evaluator,
)
from crabray.core.naming import QUALIFIER, check_identifier, qualify, split_qualified


@evaluator
def holds(key: str, env: Any) -> bool:
    """The key is in the state.

    Args:
        key: The key.
    """
    return key in env


@action
def touch(path: str, env: Any) -> str:
    """Touch a file.

    Args:
        path: The file.
    """
    return path


@action
def look(env: Any) -> str:
    """Look around."""
    return "seen"


@action(env_name="root")
def done(env: Any) -> str:
    """Declare done."""
    return "done"


def task(task_id: str = "t", **fields: Any) -> Task:
    fields.setdefault("evaluator", holds(key="x"))
    return Task(id=task_id, description="do it", **fields)


def env(name: str, *actions: Any) -> EnvironmentConfig:
    return EnvironmentConfig(name=name, action_space=list(actions))


def messages(info: pytest.ExceptionInfo[ValidationError]) -> str:
    return " | ".join(
        f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in info.value.errors()
    )


# -- public API -----------------------------------------------------------------------------


def test_public_exports_are_exactly_the_authoring_api_and_evaluate_with_its_types() -> None:
    assert sorted(crabray.__all__) == sorted(
        [
            "Action",
            "Benchmark",
            "BenchmarkConfig",
            "ClosedAction",
            "CrabrayError",
            "Env",
            "Environment",
            "EnvironmentConfig",
            "Evaluator",
            "GraphEvaluator",
            "RunSpec",
            "RunSummary",
            "SubTask",
            "Task",
            "TaskGenerator",
            "__version__",
            "action",
            "create_benchmark",
            "create_environment",
            "evaluate",
            "evaluator",
        ]
    )
    for name in crabray.__all__:
        assert getattr(crabray, name) is not None
    assert isinstance(crabray.__version__, str)


# -- naming ---------------------------------------------------------------------------------


@pytest.mark.parametrize(("env_name", "action_name"), [("vm", "click"), ("a_1", "_x"), ("E", "y")])
def test_qualify_split_round_trip(env_name: str, action_name: str) -> None:
    name = qualify(env_name, action_name)
    assert name == f"{env_name}{QUALIFIER}{action_name}"
    assert split_qualified(name) == (env_name, action_name)


def test_unqualified_name_splits_to_no_env() -> None:
    assert split_qualified("click") == (None, "click")


@pytest.mark.parametrize("bad", ["", "1abc", "a-b", "a b", "x" * 65, "é"])
def test_check_identifier_refuses_bad_names(bad: str) -> None:
    with pytest.raises(ValueError, match="must be a Python identifier"):
        check_identifier(bad, "environment name")


def test_check_identifier_accepts_64_chars() -> None:
    assert check_identifier("x" * 64, "action name") == "x" * 64


# -- Task -----------------------------------------------------------------------------------


def test_task_accepts_crab_aliases() -> None:
    t = Task(
        id="t",
        description="d",
        evaluator=holds(key="x"),
        setup_action=[touch(path="a")],
        teardown_action=[touch(path="b")],
        extra_action=[look],
    )
    assert [a.bound for a in t.setup] == [{"path": "a"}]
    assert [a.bound for a in t.teardown] == [{"path": "b"}]
    assert t.extra_actions == [look]


def test_task_accepts_field_names_and_single_actions() -> None:
    t = task(setup=touch(path="a"), extra_actions=look)
    assert len(t.setup) == 1
    assert t.extra_actions == [look]


def test_unbound_setup_action_is_rejected_naming_the_item() -> None:
    with pytest.raises(ValidationError) as info:
        task(setup_action=[touch(path="ok"), touch])
    text = messages(info)
    assert "setup_action" in text
    assert "item 1 ('touch') needs arguments ['path']" in text
    assert "touch(path=...)" in text


@pytest.mark.parametrize("field", ["teardown", "solution"])
def test_unbound_teardown_and_solution_are_rejected(field: str) -> None:
    with pytest.raises(ValidationError, match=r"item 0 \('touch'\) needs arguments"):
        task(**{field: [touch]})


def test_extra_actions_may_be_open() -> None:
    assert task(extra_actions=[touch]).extra_actions == [touch]


def test_evaluator_single() -> None:
    node = holds(key="x")
    t = task(evaluator=node)
    assert isinstance(t.evaluator, GraphEvaluator)
    assert t.evaluators == [node]


def test_evaluator_list_is_a_chain() -> None:
    a, b = holds(key="a"), holds(key="b")
    t = task(evaluator=[a, b])
    assert t.evaluators == [a, b]
    assert t.evaluator.sink is b


def test_evaluator_digraph() -> None:
    a, b, c = holds(key="a"), holds(key="b"), holds(key="c")
    graph = nx.DiGraph()
    graph.add_edges_from([(a, c), (b, c)])
    t = task(evaluator=graph)
    assert set(t.evaluators) == {a, b, c}
    assert t.evaluator.sink is c


def test_evaluator_graph_evaluator_is_kept() -> None:
    graph = GraphEvaluator(holds(key="x"))
    assert task(evaluator=graph).evaluator is graph


def test_evaluator_of_wrong_type_is_rejected() -> None:
    with pytest.raises(ValidationError) as info:
        task(evaluator="file exists")
    assert "evaluator: " in messages(info)
    assert "not str" in messages(info)


def test_evaluator_left_without_its_arguments_is_rejected() -> None:
    with pytest.raises(ValidationError) as info:
        task(evaluator=[holds(key="a"), holds])
    assert "evaluator 'holds' needs arguments ['key']" in messages(info)
    assert "holds(key=...)" in messages(info)


def test_invalid_graph_is_a_validation_error_with_the_reason() -> None:
    graph = nx.DiGraph()
    graph.add_nodes_from([holds(key="a"), holds(key="b")])
    with pytest.raises(ValidationError) as info:
        task(evaluator=graph)
    assert "exactly one sink" in messages(info)
    assert "holds(key='a')" in messages(info), "same-named nodes are told apart"


def test_task_requires_id_description_and_evaluator() -> None:
    with pytest.raises(ValidationError) as info:
        Task(id="", description="")  # type: ignore[call-arg]
    locs = {e["loc"][0] for e in info.value.errors()}
    assert locs == {"id", "description", "evaluator"}


def test_task_limits_must_be_positive() -> None:
    with pytest.raises(ValidationError, match="max_steps"):
        task(max_steps=0)
    with pytest.raises(ValidationError, match="time_limit_sec"):
        task(time_limit_sec=-1)


def test_requires_submit() -> None:
    @evaluator(require_submit=True)
    def answer(submission: Any) -> bool:
        return submission == "x"

    assert not task().requires_submit
    assert task(evaluator=[holds(key="a"), answer]).requires_submit


# -- EnvironmentConfig ----------------------------------------------------------------------


@pytest.mark.parametrize("name", ["my-env", "1env", "has space", ""])
def test_environment_name_must_be_identifier(name: str) -> None:
    with pytest.raises(ValidationError) as info:
        EnvironmentConfig(name=name)
    assert "must be a Python identifier" in messages(info)
    assert messages(info).startswith("name:")


def test_root_environment_name_is_reserved() -> None:
    with pytest.raises(ValidationError, match="'root' is reserved"):
        EnvironmentConfig(name="root")


def test_environment_duplicate_actions_rejected() -> None:
    @action
    def look_again(env: Any) -> str:
        return ""

    with pytest.raises(ValidationError, match="duplicate action names: look"):
        env("e", look, touch, look)
    assert env("e", look, look_again).action("look_again") is look_again


def test_environment_action_lookup() -> None:
    e = env("e", look, touch)
    assert e.action("touch") is touch
    assert e.action("missing") is None
    assert e.backend == "local"


# -- BenchmarkConfig ------------------------------------------------------------------------


def test_duplicate_task_ids_rejected() -> None:
    with pytest.raises(ValidationError, match="duplicate task ids: t"):
        BenchmarkConfig(name="b", tasks=[task("t"), task("t")], environments=[env("e")])


def test_duplicate_environment_names_rejected() -> None:
    with pytest.raises(ValidationError, match="duplicate environment names: e"):
        BenchmarkConfig(name="b", tasks=[task()], environments=[env("e"), env("e")])


def test_unknown_default_env_rejected() -> None:
    with pytest.raises(ValidationError, match=r"default_env 'zz' is not one of \['e'\]"):
        BenchmarkConfig(name="b", tasks=[task()], environments=[env("e")], default_env="zz")


def test_task_naming_undeclared_environment_rejected() -> None:
    with pytest.raises(ValidationError) as info:
        BenchmarkConfig(
            name="b", tasks=[task("ok"), task("t2", environments=["zz"])], environments=[env("e")]
        )
    text = messages(info)
    assert "tasks.1 (id 't2')" in text
    assert "environments ['zz'] are not declared" in text
    assert "known: ['e']" in text


def test_benchmark_without_environments_rejects_tasks() -> None:
    with pytest.raises(ValidationError, match="declares no environment"):
        BenchmarkConfig(name="b", tasks=[task()])


def test_evaluator_in_unused_environment_rejected() -> None:
    t = task(evaluator=holds(key="x").on("b"), environments=["a"])
    with pytest.raises(ValidationError) as info:
        BenchmarkConfig(name="b", tasks=[t], environments=[env("a"), env("b")])
    assert "evaluator 'holds' runs in environment 'b', which the task does not use" in (
        messages(info)
    )


def test_unplaced_evaluator_in_multi_env_task_rejected() -> None:
    t = task(environments=["a", "b"])
    with pytest.raises(ValidationError, match=r"action 'holds' must say where it runs"):
        BenchmarkConfig(name="b", tasks=[t], environments=[env("a"), env("b")])


def test_task_environments_defaults() -> None:
    a, b = env("a"), env("b")
    t = task()
    assert BenchmarkConfig(name="x", tasks=[t], environments=[a, b]).task_environments(t) == [a]
    with_default = BenchmarkConfig(name="x", tasks=[t], environments=[a, b], default_env="b")
    assert with_default.task_environments(t) == [b]
    t_multi = task(evaluator=holds(key="x").on("a"))
    multi = BenchmarkConfig(name="x", tasks=[t_multi], environments=[a, b], multienv=True)
    assert multi.task_environments(t_multi) == [a, b]


def test_limits_fall_back_to_the_benchmark() -> None:
    own, inherited = task("own", max_steps=3, time_limit_sec=2.0), task("inherited")
    bench = BenchmarkConfig(
        name="b", tasks=[own, inherited], environments=[env("e")], step_limit=7, time_limit_sec=9
    )
    assert bench.step_limit_of(own) == 3
    assert bench.step_limit_of(inherited) == 7
    assert bench.time_limit_of(own) == 2.0
    assert bench.time_limit_of(inherited) == 9
    assert BenchmarkConfig(name="b", tasks=[inherited], environments=[env("e")]).step_limit == 30


def test_action_space_single_env_is_unqualified() -> None:
    t = task(extra_actions=[touch])
    bench = BenchmarkConfig(name="b", tasks=[t], environments=[env("e", look)])
    space = bench.action_space(t, [done])
    assert [(s.call_name, s.env) for s in space] == [
        ("look", "e"),
        ("touch", "e"),
        ("done", "root"),
    ]
    assert space[0].action is look


def test_action_space_two_envs_is_qualified_and_root_actions_bare() -> None:
    t = task(evaluator=holds(key="x").on("a"), environments=["a", "b"], extra_actions=[done])
    bench = BenchmarkConfig(
        name="b", tasks=[t], environments=[env("a", look, touch), env("b", look)]
    )
    space = bench.action_space(t)
    assert [(s.call_name, s.env) for s in space] == [
        ("a-look", "a"),
        ("a-touch", "a"),
        ("b-look", "b"),
        ("done", "root"),
    ]
    for bound in space:
        env_part, name = split_qualified(bound.call_name)
        assert name == bound.action.name
        assert env_part in (bound.env, None)


def test_action_space_local_extra_action_is_root() -> None:
    @action(local=True)
    def note(text: str, env: Any) -> str:
        return text

    t = task(evaluator=holds(key="x").on("a"), environments=["a", "b"], extra_actions=[note])
    bench = BenchmarkConfig(name="b", tasks=[t], environments=[env("a"), env("b")])
    assert [(s.call_name, s.env) for s in bench.action_space(t)] == [("note", "root")]


def test_action_space_extra_action_placed_in_env_is_qualified() -> None:
    t = task(
        evaluator=holds(key="x").on("a"), environments=["a", "b"], extra_actions=[touch.on("b")]
    )
    bench = BenchmarkConfig(name="b", tasks=[t], environments=[env("a"), env("b")])
    assert [(s.call_name, s.env) for s in bench.action_space(t)] == [("b-touch", "b")]


def test_action_space_name_collision_errors() -> None:
    t = task(extra_actions=[look])
    with pytest.raises(ValidationError, match=r"tasks\.0 .*duplicate action names: look"):
        BenchmarkConfig(name="b", tasks=[t], environments=[env("e", look)])


def test_suite_root_action_replaces_the_default_of_its_name() -> None:
    default_done = done.model_copy()
    t = task()
    bench = BenchmarkConfig(name="b", tasks=[t], environments=[env("e")], root_action_space=[done])
    space = bench.action_space(t, [default_done])
    assert [b.action for b in space if b.call_name == "done"] == [done]


def test_task_extra_action_replaces_the_benchmark_root_action_of_its_name() -> None:
    own_done = done.model_copy()
    t = task(extra_actions=[own_done])
    bench = BenchmarkConfig(name="b", tasks=[t], environments=[env("e")], root_action_space=[done])
    assert [b.action for b in bench.action_space(t) if b.call_name == "done"] == [own_done]


def test_two_suite_root_actions_of_one_name_are_rejected() -> None:
    with pytest.raises(ValueError, match="duplicate action names: done"):
        BenchmarkConfig(
            name="b",
            tasks=[task()],
            environments=[env("e")],
            root_action_space=[done, done.model_copy()],
        )


def test_lookups_by_name() -> None:
    t = task("t1")
    e = env("e")
    bench = BenchmarkConfig(name="b", tasks=[t], environments=[e])
    assert bench.task("t1") is t
    assert bench.environment("e") is e
    with pytest.raises(KeyError):
        bench.task("nope")
    with pytest.raises(KeyError):
        bench.environment("nope")


def test_resolve_env_of_setup_and_evaluators() -> None:
    t = task(
        evaluator=holds(key="x").on("b"), environments=["a", "b"], setup=[touch(path="p").on("a")]
    )
    bench = BenchmarkConfig(name="b", tasks=[t], environments=[env("a"), env("b")])
    assert bench.resolve_env(t.setup[0], t) == "a"
    assert bench.resolve_env(t.evaluators[0], t) == "b"
    assert bench.resolve_env(done, t) == "root"


def test_evaluator_export_is_the_class() -> None:
    assert isinstance(holds, Evaluator)
