"""``Evaluator``: an action that returns bool, combinable with ``&``, ``|`` and ``~``.

A combined evaluator is still one evaluator (one graph node), as in CRAB; it
receives the same ``env`` and, for ``require_submit``, the agent's submission.
"""

from __future__ import annotations

import typing
from collections.abc import Callable
from typing import Any

from pydantic import BaseModel, ConfigDict, create_model

from crabray.core.actions import KEPT_PARAMS, Action, build_action
from crabray.core.env import Env
from crabray.core.errors import (
    ActionError,
    ActionParameterError,
    CrabrayError,
    EvaluatorError,
    EvaluatorFaultError,
)


class Evaluator(Action):
    """An action that judges the environment's state: returns ``True`` when it holds.

    Args:
        require_submit: Only evaluate after the agent called ``submit``; the
            evaluator's ``submission`` parameter receives the submitted value.
    """

    require_submit: bool = False

    def evaluate(self, env: Env | None = None, submission: Any = None) -> bool:
        """Run the (closed) evaluator and return its verdict.

        Raises:
            EvaluatorError: It is not closed, raised, or returned a non-bool.
        """
        if not self.is_closed:
            raise EvaluatorFaultError(
                f"evaluator '{self.name}' needs arguments {self.required_parameters}; "
                f"bind them where the task declares it, e.g. {self.name}(...)"
            )
        try:
            verdict = self.invoke({"env": env, "submission": submission}, {})
        except EvaluatorError:
            raise
        except ActionParameterError as exc:
            raise refused_arguments(self, exc) from exc
        except Exception as exc:
            raise EvaluatorError(
                f"evaluator '{self.name}' raised {type(exc).__name__}: {exc}"
            ) from exc
        if not isinstance(verdict, bool):
            raise EvaluatorError(
                f"evaluator '{self.name}' returned {type(verdict).__name__} {verdict!r}, not bool"
            )
        return verdict

    def __and__(self, other: Evaluator) -> Evaluator:
        """``a & b``: passes when both pass; ``b`` is not run once ``a`` failed.

        Raises:
            ActionError: ``other`` is not an evaluator, the two run in different
                environments, or both take the same open parameter.
        """
        return _combine("&", (self, other), all)

    def __or__(self, other: Evaluator) -> Evaluator:
        """``a | b``: passes when either passes; ``b`` is not run once ``a`` passed.

        Raises:
            ActionError: ``other`` is not an evaluator, the two run in different
                environments, or both take the same open parameter.
        """
        return _combine("|", (self, other), any)

    def __invert__(self) -> Evaluator:
        """``~a``: passes when ``a`` fails."""
        inner = self

        def negated(**values: Any) -> bool:
            return not _verdict(inner, values)

        return _combined_evaluator(f"~{self.name}", negated, (self,))


def refused_arguments(action: Action, exc: ActionParameterError) -> EvaluatorError:
    """The error of an evaluator or scorer whose arguments were refused when it ran.

    The benchmark's (:class:`EvaluatorFaultError`) when the arguments the task
    binds are wrong on their own; otherwise the refusal came from inside its
    body, which the state the agent left may have caused.
    """
    if action.bound_problems():
        return EvaluatorFaultError(f"'{action.name}' is bound to arguments it refuses: {exc}")
    return EvaluatorError(f"'{action.name}' raised {type(exc).__name__}: {exc}")


def scorer_error(scorer: Action, exc: Exception) -> EvaluatorError:
    """What a scorer that raised ``exc`` is recorded as: an :class:`EvaluatorError`."""
    if isinstance(exc, ActionParameterError):
        return refused_arguments(scorer, exc)
    if isinstance(exc, EvaluatorError):
        return exc
    return EvaluatorError(str(exc) if isinstance(exc, CrabrayError) else repr(exc))


def _verdict(part: Evaluator, values: dict[str, Any]) -> bool:
    context = {k: values.get(k) for k in KEPT_PARAMS}
    own = {k: v for k, v in values.items() if k in part.open_parameters}
    if part.require_submit and not part.is_closed:
        raise EvaluatorError(f"evaluator '{part.name}' needs arguments {part.required_parameters}")
    verdict = part.invoke(context, own)
    if not isinstance(verdict, bool):
        raise EvaluatorError(
            f"evaluator '{part.name}' returned {type(verdict).__name__} {verdict!r}, not bool"
        )
    return verdict


def _combine(op: str, parts: tuple[Evaluator, Evaluator], reduce: Callable[..., bool]) -> Evaluator:
    for part in parts:
        if not isinstance(part, Evaluator):
            raise ActionError(f"'{op}' combines evaluators, got {type(part).__name__} {part!r}")
    clash = sorted(set(parts[0].open_parameters) & set(parts[1].open_parameters))
    if clash:
        raise ActionError(
            f"cannot combine '{parts[0].name}' {op} '{parts[1].name}': both take open "
            f"parameters {clash}; bind them first"
        )

    def combined(**values: Any) -> bool:
        return reduce(_verdict(part, values) for part in parts)

    return _combined_evaluator(f"({parts[0].name} {op} {parts[1].name})", combined, parts)


def _combined_evaluator(
    name: str, entry: Callable[..., bool], parts: tuple[Evaluator, ...]
) -> Evaluator:
    env_names = {p.env_name for p in parts if p.env_name}
    if len(env_names) > 1:
        raise ActionError(
            f"cannot combine evaluators of different environments {sorted(env_names)} into "
            f"'{name}'; put them in a graph instead"
        )
    fields: dict[str, Any] = {
        n: (f.annotation, f) for p in parts for n, f in p.open_parameters.items()
    }
    parameters: type[BaseModel] = create_model(
        "".join(ch if ch.isalnum() else "_" for ch in name) + "Parameters",
        __config__=ConfigDict(extra="forbid"),
        **fields,
    )
    combined = Evaluator(
        name=name,
        entry=entry,
        parameters=parameters,
        returns=parts[0].returns,
        description=name,
        kept_params=KEPT_PARAMS,
        env_name=next(iter(env_names), None),
        local=all(p.local for p in parts),
        require_submit=any(p.require_submit for p in parts),
    )
    combined._parts = parts
    return combined


@typing.overload
def evaluator(func: Callable[..., bool], /) -> Evaluator: ...


@typing.overload
def evaluator(
    *, env_name: str | None = None, local: bool = False, require_submit: bool = False
) -> Callable[[Callable[..., bool]], Evaluator]: ...


def evaluator(
    func: Callable[..., bool] | None = None,
    /,
    *,
    env_name: str | None = None,
    local: bool = False,
    require_submit: bool = False,
) -> Evaluator | Callable[[Callable[..., bool]], Evaluator]:
    """Decorator: turn a function returning bool into an ``Evaluator``.

    Args:
        func: The function (when used bare).
        env_name: Fix the environment it checks.
        local: Run without a sandbox; ``env`` receives the root environment.
        require_submit: Run only after the agent submitted; ``submission`` gets the value.

    Raises:
        ActionError: The function's return type is not ``bool``.
    """

    def build(f: Callable[..., bool]) -> Evaluator:
        try:
            returns = typing.get_type_hints(f).get("return")
        except Exception as exc:
            raise ActionError(f"evaluator '{f.__name__}': cannot resolve hints: {exc}") from exc
        if returns is not bool:
            declared = (
                "has no return annotation"
                if returns is None
                else f"is annotated to return {getattr(returns, '__name__', returns)!s}"
            )
            raise ActionError(
                f"evaluator '{f.__name__}' must be annotated '-> bool'; it {declared}"
            )
        built = build_action(
            f, cls=Evaluator, env_name=env_name, local=local, require_submit=require_submit
        )
        return typing.cast(Evaluator, built)

    return build(func) if func is not None else build
