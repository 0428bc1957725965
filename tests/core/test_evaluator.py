"""``@evaluator`` and ``Evaluator``: bool-only, ``&``/``|``/``~``, errors, submissions."""

from __future__ import annotations

from typing import Any

import pytest

from crabray import Action, Evaluator, action, evaluator
from crabray.core.errors import ActionError, EvaluatorError


def make_constant(name: str, value: bool, calls: list[str]) -> Evaluator:
    """An evaluator called ``name`` that records its call and returns ``value``."""

    def entry(env: Any) -> bool:
        calls.append(name)
        return value

    entry.__name__ = name
    return evaluator(entry)


@evaluator
def has_key(key: str, env: Any) -> bool:
    """The environment (a set here) holds the key.

    Args:
        key: The key to look for.
    """
    return key in env


# -- decoration -----------------------------------------------------------------------------


def test_evaluator_is_an_action_with_bool_return() -> None:
    assert isinstance(has_key, Evaluator)
    assert isinstance(has_key, Action)
    assert has_key.name == "has_key"
    assert has_key.require_submit is False
    assert "env" not in has_key.parameters.model_fields
    assert has_key(key="a").evaluate({"a"}) is True
    assert has_key(key="b").evaluate({"a"}) is False


def test_non_bool_return_annotation_is_refused_at_decoration() -> None:
    with pytest.raises(ActionError, match=r"evaluator 'counts' must be annotated '-> bool'.*int"):

        @evaluator
        def counts() -> int:
            return 1


def test_missing_return_annotation_is_refused_at_decoration() -> None:
    with pytest.raises(ActionError, match=r"evaluator 'vague' must be annotated '-> bool'"):

        @evaluator
        def vague():  # type: ignore[no-untyped-def]
            return True


def test_decorator_options() -> None:
    @evaluator(env_name="vm", local=True, require_submit=True)
    def judged(submission: Any) -> bool:
        return bool(submission)

    assert judged.env_name == "vm"
    assert judged.local is True
    assert judged.require_submit is True
    assert judged.kept_params == ("submission",)


# -- evaluate -------------------------------------------------------------------------------


def test_evaluator_returning_non_bool_is_an_evaluator_error() -> None:
    @evaluator
    def liar() -> bool:
        return 1  # type: ignore[return-value]

    with pytest.raises(EvaluatorError, match=r"evaluator 'liar' returned int 1, not bool"):
        liar.evaluate()


def test_evaluator_raising_is_an_evaluator_error_with_the_original_message() -> None:
    @evaluator
    def broken() -> bool:
        raise RuntimeError("disk on fire")

    with pytest.raises(EvaluatorError) as info:
        broken.evaluate()
    assert str(info.value) == "evaluator 'broken' raised RuntimeError: disk on fire"
    assert isinstance(info.value.__cause__, RuntimeError)


def test_open_evaluator_cannot_be_evaluated() -> None:
    with pytest.raises(EvaluatorError, match=r"evaluator 'has_key' needs arguments \['key'\]"):
        has_key.evaluate({"a"})


def test_bad_bound_argument_is_an_evaluator_error_naming_parameter() -> None:
    with pytest.raises(EvaluatorError, match=r"parameter 'key'"):
        has_key(key=["not", "a", "string"]).evaluate(set())


# -- &, |, ~ --------------------------------------------------------------------------------

TRUTH = [(True, True), (True, False), (False, True), (False, False)]


@pytest.mark.parametrize(("left", "right"), TRUTH)
def test_and_truth_table(left: bool, right: bool) -> None:
    calls: list[str] = []
    combined = make_constant("p", left, calls) & make_constant("q", right, calls)
    assert combined.evaluate() is (left and right)


@pytest.mark.parametrize(("left", "right"), TRUTH)
def test_or_truth_table(left: bool, right: bool) -> None:
    calls: list[str] = []
    combined = make_constant("p", left, calls) | make_constant("q", right, calls)
    assert combined.evaluate() is (left or right)


@pytest.mark.parametrize("value", [True, False])
def test_not_truth_table(value: bool) -> None:
    calls: list[str] = []
    assert (~make_constant("p", value, calls)).evaluate() is (not value)
    assert calls == ["p"]


def test_and_short_circuits_on_false() -> None:
    calls: list[str] = []
    combined = make_constant("p", False, calls) & make_constant("q", True, calls)
    assert combined.evaluate() is False
    assert calls == ["p"]


def test_or_short_circuits_on_true() -> None:
    calls: list[str] = []
    combined = make_constant("p", True, calls) | make_constant("q", False, calls)
    assert combined.evaluate() is True
    assert calls == ["p"]


def test_and_evaluates_left_then_right() -> None:
    calls: list[str] = []
    combined = make_constant("p", True, calls) & make_constant("q", True, calls)
    assert combined.evaluate() is True
    assert calls == ["p", "q"]


def test_combined_name_is_readable() -> None:
    calls: list[str] = []
    a = make_constant("a", True, calls)
    b = make_constant("b", False, calls)
    c = make_constant("c", True, calls)
    assert (a & ~b).name == "(a & ~b)"
    assert (a | b).name == "(a | b)"
    assert ((a | b) & ~c).name == "((a | b) & ~c)"
    assert (~(a & b)).name == "~(a & b)"


def test_combined_evaluator_is_one_evaluator_and_passes_env_to_every_part() -> None:
    combined = has_key(key="a") & ~has_key(key="z")
    assert isinstance(combined, Evaluator)
    assert combined.is_closed
    assert combined.evaluate({"a"}) is True
    assert combined.evaluate({"a", "z"}) is False
    assert combined.evaluate(set()) is False


def test_combined_env_is_the_same_object_for_every_part() -> None:
    seen: list[Any] = []

    @evaluator
    def first(env: Any) -> bool:
        seen.append(env)
        return True

    @evaluator
    def second(env: Any) -> bool:
        seen.append(env)
        return False

    marker = object()
    assert (first & ~second).evaluate(marker) is True
    assert seen == [marker, marker]


def test_combined_part_returning_non_bool_is_an_evaluator_error() -> None:
    calls: list[str] = []

    @evaluator
    def sloppy() -> bool:
        return "yes"  # type: ignore[return-value]

    with pytest.raises(EvaluatorError, match=r"'sloppy' returned str 'yes', not bool"):
        (make_constant("p", True, calls) & sloppy).evaluate()


def test_combined_part_raising_keeps_the_original_message() -> None:
    calls: list[str] = []

    @evaluator
    def broken() -> bool:
        raise ValueError("no such file: notes.txt")

    with pytest.raises(EvaluatorError, match=r"raised ValueError: no such file: notes.txt"):
        (make_constant("p", True, calls) & broken).evaluate()


def test_combining_with_a_plain_action_errors() -> None:
    @action
    def plain() -> bool:
        return True

    calls: list[str] = []
    with pytest.raises(ActionError, match=r"'&' combines evaluators, got Action"):
        make_constant("p", True, calls) & plain  # type: ignore[operator]


def test_combining_open_evaluators_with_clashing_parameters_errors() -> None:
    with pytest.raises(ActionError, match=r"both take open parameters \['key'\]"):
        has_key & has_key


def test_combined_open_evaluator_can_be_bound_afterwards() -> None:
    @evaluator
    def has_other(other: str, env: Any) -> bool:
        return other in env

    combined = has_key & has_other
    assert combined.required_parameters == ["key", "other"]
    assert combined(key="a", other="b").evaluate({"a", "b"}) is True
    assert combined(key="a", other="b").evaluate({"a"}) is False


def test_combining_evaluators_fixed_to_different_environments_errors() -> None:
    left = has_key(key="a").on("workstation")
    right = has_key(key="b").on("server")
    with pytest.raises(ActionError) as info:
        left & right
    assert "different environments ['server', 'workstation']" in str(info.value)
    assert "graph" in str(info.value)
    with pytest.raises(ActionError, match="different environments"):
        left | right


def test_combining_evaluators_of_the_same_environment_keeps_it() -> None:
    combined = has_key(key="a").on("vm") & has_key(key="b")
    assert combined.env_name == "vm"
    assert (~has_key(key="a").on("vm")).env_name == "vm"


# -- require_submit -------------------------------------------------------------------------


@evaluator(require_submit=True)
def answer_is(expected: str, submission: Any) -> bool:
    """The submission equals the expected answer.

    Args:
        expected: The right answer.
    """
    return submission == expected


def test_require_submit_receives_the_submission() -> None:
    check = answer_is(expected="42")
    assert check.require_submit is True
    assert "submission" not in check.parameters.model_fields
    assert check.evaluate(None, "42") is True
    assert check.evaluate(None, "41") is False
    assert check.evaluate(None) is False


def test_submission_is_absent_from_the_schema() -> None:
    params = answer_is.to_openai_tool()["function"]["parameters"]
    assert set(params["properties"]) == {"expected"}


def test_combination_requires_submit_when_any_part_does() -> None:
    combined = has_key(key="a") & answer_is(expected="x")
    assert combined.require_submit is True
    assert (~answer_is(expected="x")).require_submit is True
    assert (has_key(key="a") | has_key(key="b")).require_submit is False
    assert combined.evaluate({"a"}, "x") is True
    assert combined.evaluate({"a"}, "y") is False
