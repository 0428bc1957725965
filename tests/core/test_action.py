"""``@action`` and ``Action``: schema from signature and docstring, validation, ``>>``, ``+``."""

from __future__ import annotations

from typing import Any

import pytest

from crabray import Action, action
from crabray.core.errors import ActionError, ActionParameterError


@action
def add(a: int, b: int = 1) -> int:
    """Add two numbers.

    The sum is returned as an integer.

    Args:
        a: The first number.
        b: The second number.
    """
    return a + b


@action
def where(path: str, env: Any) -> str:
    """Say where a path is.

    Args:
        path: The path to locate.
    """
    return f"{env}:{path}"


@action
def two() -> int:
    """Give two."""
    return 2


@action
def double(x: int) -> int:
    """Double a number.

    Args:
        x: The number.
    """
    return 2 * x


@action
def shout(text: str) -> str:
    """Upper-case a text.

    Args:
        text: The text.
    """
    return text.upper()


# -- building -------------------------------------------------------------------------------


def test_bare_decorator_builds_action_named_after_function() -> None:
    assert isinstance(add, Action)
    assert add.name == "add"
    assert add.env_name is None
    assert add.local is False
    assert add.run(a=2) == 3


def test_decorator_with_options_records_them() -> None:
    @action(env_name="vm", local=True)
    def ping() -> str:
        """Ping."""
        return "pong"

    assert isinstance(ping, Action)
    assert ping.name == "ping"
    assert ping.env_name == "vm"
    assert ping.local is True
    assert ping.run() == "pong"


def test_parameters_model_follows_signature() -> None:
    fields = add.parameters.model_fields
    assert list(fields) == ["a", "b"]
    assert fields["a"].annotation is int
    assert fields["a"].is_required()
    assert fields["b"].annotation is int
    assert not fields["b"].is_required()
    assert fields["b"].default == 1
    assert add.required_parameters == ["a"]
    assert add.returns.model_fields["returns"].annotation is int


def test_descriptions_come_from_google_docstring() -> None:
    assert add.description == "Add two numbers.\n\nThe sum is returned as an integer."
    fields = add.parameters.model_fields
    assert fields["a"].description == "The first number."
    assert fields["b"].description == "The second number."


def test_action_without_docstring_has_no_description_and_schema_falls_back_to_name() -> None:
    @action
    def bare(n: int) -> int:
        return n

    assert bare.description is None
    assert bare.to_openai_tool()["function"]["description"] == "bare"


def test_kept_env_param_is_absent_from_parameters_and_injected() -> None:
    assert where.kept_params == ("env",)
    assert "env" not in where.parameters.model_fields
    assert where.required_parameters == ["path"]
    assert where.run("ENV", path="a.txt") == "ENV:a.txt"


def test_env_cannot_be_passed_as_an_argument() -> None:
    with pytest.raises(ActionParameterError, match="'env'"):
        where.run("ENV", path="a.txt", env="other")


def test_parameter_without_type_hint_takes_anything_as_in_crab() -> None:
    @action
    def untyped(x) -> int:  # type: ignore[no-untyped-def]
        return len(x)

    assert untyped.run(None, x=[1, 2]) == 2
    assert untyped.run(None, x="abc") == 3
    assert untyped.required_parameters == ["x"]
    assert "type" not in untyped.to_openai_json_schema()["parameters"]["properties"]["x"]


def test_var_args_are_refused() -> None:
    with pytest.raises(ActionError, match=r"\*args and \*\*kwargs"):

        @action
        def many(*names: str) -> int:
            return len(names)


# -- JSON schema ----------------------------------------------------------------------------


def test_openai_schema_shape() -> None:
    assert add.to_openai_tool() == _add_tool()


def _add_tool() -> dict[str, Any]:
    return {
        "type": "function",
        "function": {
            "name": "add",
            "description": "Add two numbers.\n\nThe sum is returned as an integer.",
            "parameters": {
                "type": "object",
                "properties": {
                    "a": {"type": "integer", "description": "The first number."},
                    "b": {"type": "integer", "description": "The second number.", "default": 1},
                },
                "required": ["a"],
            },
        },
    }


def test_openai_schema_leaves_out_env() -> None:
    params = where.to_openai_tool()["function"]["parameters"]
    assert set(params["properties"]) == {"path"}
    assert params["required"] == ["path"]


def test_openai_schema_leaves_out_bound_parameters() -> None:
    params = add(a=5).to_openai_tool()["function"]["parameters"]
    assert set(params["properties"]) == {"b"}
    assert "required" not in params


def test_openai_schema_of_closed_action_has_no_properties() -> None:
    params = two.to_openai_tool()["function"]["parameters"]
    assert params == {"type": "object", "properties": {}}


def test_openai_schema_is_a_fresh_copy_each_time() -> None:
    """The model's schema is made once; a caller editing its copy changes no other."""
    first = add.to_openai_tool()
    first["function"]["parameters"]["properties"]["a"]["description"] = "edited"
    del first["function"]["parameters"]["properties"]["b"]
    assert add.to_openai_tool() == _add_tool()
    assert set(add(a=5).to_openai_tool()["function"]["parameters"]["properties"]) == {"b"}


# -- validation on every call ---------------------------------------------------------------


def test_bad_type_names_action_and_parameter() -> None:
    with pytest.raises(ActionParameterError) as info:
        add.run(a="not a number")
    message = str(info.value)
    assert "action 'add'" in message
    assert "parameter 'a'" in message
    assert "integer" in message
    assert info.value.action == "add"
    assert [p for p, _ in info.value.problems] == ["a"]


def test_missing_parameter_names_action_and_parameter() -> None:
    with pytest.raises(ActionParameterError) as info:
        add.run(b=3)
    assert "action 'add'" in str(info.value)
    assert "parameter 'a'" in str(info.value)
    assert "required" in str(info.value).lower()


def test_unknown_parameter_names_action_and_parameter() -> None:
    with pytest.raises(ActionParameterError) as info:
        add.run(a=1, c=2)
    assert "action 'add'" in str(info.value)
    assert "parameter 'c'" in str(info.value)


def test_every_call_is_validated_not_just_the_first() -> None:
    assert add.run(a=1) == 2
    with pytest.raises(ActionParameterError):
        add.run(a="x")
    assert add.run(a="3") == 4  # lax pydantic coercion of a numeric string still applies


def test_every_problem_is_reported() -> None:
    with pytest.raises(ActionParameterError) as info:
        add.run(a="x", b="y")
    assert sorted(p for p, _ in info.value.problems) == ["a", "b"]


# -- binding by calling ---------------------------------------------------------------------


def test_calling_binds_and_runs_nothing() -> None:
    ran: list[int] = []

    @action
    def record(n: int) -> int:
        """Record n.

        Args:
            n: The number.
        """
        ran.append(n)
        return n

    bound = record(n=4)
    assert ran == []
    assert isinstance(bound, Action)
    assert bound.is_closed
    assert not record.is_closed
    assert bound.bound == {"n": 4}
    assert bound.run() == 4
    assert ran == [4]


def test_binding_returns_a_copy_leaving_the_original_open() -> None:
    bound = add(a=10)
    assert add.bound == {}
    assert add.required_parameters == ["a"]
    assert bound.run() == 11
    assert bound.run(b=5) == 15


def test_positional_binding_follows_open_parameter_order() -> None:
    assert add(7).bound == {"a": 7}
    assert add(7, 8).run() == 15
    assert add(b=2)(5).bound == {"a": 5, "b": 2}


def test_binding_too_many_positional_arguments_errors() -> None:
    with pytest.raises(ActionParameterError, match=r"action 'add'.*3 positional arguments"):
        add(1, 2, 3)


def test_binding_unknown_parameter_errors_naming_it() -> None:
    with pytest.raises(ActionParameterError) as info:
        add(c=1)
    assert "action 'add'" in str(info.value)
    assert "parameter 'c'" in str(info.value)
    assert "no such open parameter" in str(info.value)


def test_binding_a_parameter_twice_errors() -> None:
    with pytest.raises(ActionParameterError, match=r"parameter 'a': given twice"):
        add(1, a=2)


def test_bound_parameters_cannot_be_overridden_at_call_time() -> None:
    with pytest.raises(ActionParameterError, match=r"parameter 'a': is fixed by the task"):
        add(a=1).run(a=2)


def test_bad_bound_value_fails_when_run() -> None:
    bound = add(a="x")
    with pytest.raises(ActionParameterError, match=r"action 'add'.*parameter 'a'"):
        bound.run()


def test_on_fixes_environment_in_a_copy() -> None:
    moved = where(path="p").on("server")
    assert moved.env_name == "server"
    assert where.env_name is None
    assert moved.bound == {"path": "p"}


def test_actions_compare_by_identity() -> None:
    assert add(a=1) != add(a=1)
    first = add(a=1)
    assert first == first
    assert len({first, add(a=1)}) == 2


# -- pipe >> --------------------------------------------------------------------------------


def test_pipe_feeds_return_value_to_the_one_required_parameter() -> None:
    piped = two >> double
    assert isinstance(piped, Action)
    assert piped.name == "two_pipe_double"
    assert piped.run() == 4
    assert (piped >> double).run() == 8


def test_pipe_keeps_the_first_actions_open_parameters() -> None:
    piped = add >> double
    assert piped.required_parameters == ["a"]
    assert piped.run(a=3, b=2) == 10
    with pytest.raises(ActionParameterError, match="parameter 'a'"):
        piped.run()


def test_pipe_target_with_optional_extra_params_is_fine() -> None:
    assert (two >> add).run() == 3


def test_pipe_into_action_with_no_required_parameter_errors() -> None:
    with pytest.raises(ActionError) as info:
        two >> add(a=1)
    message = str(info.value)
    assert "cannot pipe 'two' into 'add'" in message
    assert "exactly one required open parameter" in message
    assert "none" in message


def test_pipe_into_action_with_two_required_parameters_errors() -> None:
    @action
    def pair(x: int, y: int) -> int:
        """Pair."""
        return x + y

    with pytest.raises(ActionError) as info:
        two >> pair
    assert "exactly one required open parameter" in str(info.value)
    assert "['x', 'y']" in str(info.value)


def test_pipe_with_mismatched_types_says_why() -> None:
    with pytest.raises(ActionError) as info:
        two >> shout
    assert str(info.value) == (
        "cannot pipe 'two' into 'shout': 'two' returns int but parameter 'text' takes str"
    )


def test_pipe_int_into_float_is_compatible() -> None:
    @action
    def half(x: float) -> float:
        """Half."""
        return x / 2

    assert (two >> half).run() == 1.0


def test_pipe_into_optional_parameter_type() -> None:
    @action
    def maybe(x: int | None) -> str:
        """Maybe."""
        return repr(x)

    assert (two >> maybe).run() == "2"


def test_pipe_passes_env_to_both_sides() -> None:
    @action
    def here(env: Any) -> str:
        """Here."""
        return f"here:{env}"

    assert (here >> where).run("E") == "E:here:E"


def test_pipe_of_actions_fixed_to_different_envs_errors() -> None:
    with pytest.raises(ActionError, match=r"different environments \['a', 'b'\]"):
        two.on("a") >> double.on("b")


# -- sequence + -----------------------------------------------------------------------------


def test_sequence_runs_both_in_order_and_returns_the_second_result() -> None:
    order: list[str] = []

    @action
    def first(a: int, env: Any) -> str:
        """First."""
        order.append(f"first {a} {env}")
        return "one"

    @action
    def second(b: str, env: Any) -> str:
        """Second."""
        order.append(f"second {b} {env}")
        return "two"

    seq = first + second
    assert seq.name == "first_then_second"
    assert set(seq.parameters.model_fields) == {"a", "b"}
    assert seq.required_parameters == ["a", "b"]
    assert seq.run("E", a=1, b="x") == "two"
    assert order == ["first 1 E", "second x E"]
    assert seq.description == "First. then Second."


def test_sequence_of_bound_actions_is_closed() -> None:
    seq = add(a=1) + double(x=5)
    assert seq.is_closed
    assert seq.run() == 10


def test_sequence_with_clashing_open_params_errors() -> None:
    with pytest.raises(ActionError) as info:
        double + double
    message = str(info.value)
    assert "cannot sequence 'double' + 'double'" in message
    assert "['x']" in message
    assert "double(x=...)" in message


def test_sequence_clash_goes_away_once_bound() -> None:
    assert (double(x=1) + double).run(x=3) == 6


def test_sequence_validates_each_part() -> None:
    seq = add + double
    with pytest.raises(ActionParameterError, match="parameter 'x'"):
        seq.run(a=1, x="nope")
