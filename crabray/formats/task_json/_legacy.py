"""The older task-JSON variant: ``{"type", "parameters"}`` steps and an ``evaluator`` block.

::

    "evaluator": {
      "postconfig": [{"type": "execute", "parameters": {...}}],
      "func": "compare_table" | ["exact_match", "check_include_exclude"],
      "result": {"type": "vm_file", "path": "..."} | [...],
      "expected": {"type": "rule", "rules": {...}} | [...],
      "options": {...} | [...],
      "conj": "and" | "or"
    }

Getters produce the values (a sandbox file's text, a sandbox command's
output, a rule, a task-folder file's text); metrics compare them and return a
score. ``and`` is 0 when any metric is 0 and their mean otherwise; ``or`` is
the best. ``"func": "infeasible"`` scores 1 only when the agent's last action
was ``fail``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from crabray.core.errors import SandboxFileError
from crabray.formats.task_json._evaluation import csv_equal, text_equal
from crabray.formats.task_json._registry import (
    LocalPath,
    TaskContext,
    TaskFunction,
    getter,
    lookup,
    metric,
)

INFEASIBLE = "infeasible"


class LegacyStep(BaseModel):
    """A ``{"type", "parameters"}`` setup or postconfig step."""

    model_config = ConfigDict(extra="forbid")

    type: str
    parameters: dict[str, Any] = Field(default_factory=dict)


class GetterSpec(BaseModel):
    """A ``result``/``expected`` getter: its ``type`` and its parameters beside it."""

    model_config = ConfigDict(extra="allow")

    type: str


class LegacyEvaluator(BaseModel):
    """The ``evaluator`` block of the older variant."""

    model_config = ConfigDict(extra="forbid")

    func: str | list[str]
    result: GetterSpec | list[GetterSpec] | None = None
    expected: GetterSpec | list[GetterSpec] | None = None
    options: dict[str, Any] | list[dict[str, Any]] = Field(default_factory=dict)
    conj: Literal["and", "or"] = "and"
    postconfig: list[LegacyStep] = Field(default_factory=list)


# Getters ------------------------------------------------------------------------------------


@getter("vm_file")
def vm_file(ctx: TaskContext, path: str, dest: str | None = None) -> str | None:
    """The text of a sandbox file, ``None`` when missing (``dest`` is accepted, unused)."""
    try:
        return ctx.read_sandbox_text(path)
    except SandboxFileError:
        return None


@getter("vm_command_line")
def vm_command_line(
    ctx: TaskContext, command: str | list[str], shell: bool = True, timeout_sec: float = 120.0
) -> str:
    """The standard output of a command run in the sandbox."""
    output: str = ctx.env.exec(command, timeout_sec=timeout_sec).stdout
    return output


@getter("rule")
def rule(ctx: TaskContext, rules: Any) -> Any:
    """The rules themselves, for metrics such as ``exact_match`` and ``check_include_exclude``."""
    return rules


@getter("local_file")
def local_file(ctx: TaskContext, path: LocalPath) -> str:
    """The text of a file of the task folder."""
    return ctx.read_local(path).decode("utf-8", errors="replace")


# Metrics ------------------------------------------------------------------------------------


def _expected_value(expected: Any) -> Any:
    return expected.get("expected") if isinstance(expected, dict) else expected


@metric
def exact_match(result: Any, expected: Any) -> float:
    """1 when the result equals ``expected`` (a value or ``{"expected": value}``); strings
    are compared without surrounding blanks."""
    want = _expected_value(expected)
    if isinstance(result, str) and isinstance(want, str):
        return float(result.strip() == want.strip())
    return float(result is not None and result == want)


@metric
def check_include_exclude(result: Any, expected: Any, regex: bool = False) -> float:
    """1 when the result contains every ``include`` and no ``exclude`` of the rules."""
    if result is None:
        return 0.0
    rules = expected if isinstance(expected, dict) else {}
    text = str(result)

    def found(pattern: str) -> bool:
        return re.search(pattern, text, re.MULTILINE) is not None if regex else pattern in text

    include_ok = all(found(p) for p in rules.get("include", []))
    return float(include_ok and not any(found(p) for p in rules.get("exclude", [])))


@metric(aliases=("compare_csv",))
def compare_table(
    result: Any,
    expected: Any,
    ignore_order: bool = False,
    ignore_case: bool = False,
    strict: bool = True,
) -> float:
    """1 when two CSV texts hold the same table (see ``csv_equal``)."""
    if result is None or expected is None:
        return 0.0
    same = csv_equal(
        str(result),
        str(expected),
        ignore_order=ignore_order,
        ignore_case=ignore_case,
        strict=strict,
    )
    return float(same)


@metric(name="compare_text_file")
def compare_text(
    result: Any, expected: Any, ignore_blanks: bool = False, ignore_case: bool = False
) -> float:
    """1 when two texts are the same (see ``text_equal``)."""
    if result is None or expected is None:
        return 0.0
    return float(
        text_equal(str(result), str(expected), ignore_blanks=ignore_blanks, ignore_case=ignore_case)
    )


# Plan: validated at load time, run by the scorer ---------------------------------------------


@dataclass(frozen=True)
class _Get:
    function: TaskFunction
    arguments: dict[str, Any]


@dataclass(frozen=True)
class _Measure:
    metric: TaskFunction
    options: dict[str, Any]
    result: _Get | None
    expected: _Get | None


def _as_list(value: Any, count: int) -> list[Any]:
    if isinstance(value, list):
        return value
    return [value] * count


def plan_evaluator(
    block: LegacyEvaluator, task_dir: Path
) -> tuple[list[_Measure], list[tuple[str, str]]]:
    """Look up and validate every getter, metric and option; problems as (field, message)."""
    funcs = block.func if isinstance(block.func, list) else [block.func]
    if funcs == [INFEASIBLE]:
        return [], []
    problems: list[tuple[str, str]] = []
    results = _as_list(block.result, len(funcs))
    expecteds = _as_list(block.expected, len(funcs))
    options = _as_list(block.options, len(funcs))
    for name, values in (("result", results), ("expected", expecteds), ("options", options)):
        if len(values) != len(funcs):
            problems.append((name, f"has {len(values)} entries for {len(funcs)} functions"))
    if problems:
        return [], problems
    multi = isinstance(block.func, list)
    plan: list[_Measure] = []
    for i, name in enumerate(funcs):

        def at(field: str, i: int = i) -> str:
            return f"{field}.{i}" if multi else field

        try:
            function = lookup("metric", name)
        except Exception as exc:
            problems.append((at("func"), str(exc)))
            continue
        opts, bad = function.validate(options[i] or {}, task_dir)
        problems += [(f"{at('options')}.{f}".rstrip("."), m) for f, m in bad]
        getters: list[_Get | None] = []
        for role, spec in (("result", results[i]), ("expected", expecteds[i])):
            if spec is None:
                getters.append(None)
                continue
            try:
                get = lookup("getter", spec.type)
            except Exception as exc:
                problems.append((f"{at(role)}.type", str(exc)))
                getters.append(None)
                continue
            params = {k: v for k, v in spec.model_dump().items() if k != "type"}
            arguments, bad = get.validate(params, task_dir)
            problems += [(f"{at(role)}.{f}".rstrip("."), m) for f, m in bad]
            getters.append(_Get(get, arguments))
        plan.append(_Measure(function, opts, getters[0], getters[1]))
    return plan, problems


def score_plan(ctx: TaskContext, plan: list[_Measure], conj: str) -> float:
    """Run the getters and metrics of a plan and combine their scores with ``conj``.

    An empty plan is the ``infeasible`` evaluator.
    """
    if not plan:
        return float(ctx.agent_failed)
    scores = []
    for measure in plan:
        result = _value(ctx, measure.result)
        expected = _value(ctx, measure.expected)
        scores.append(float(measure.metric.func(result, expected, **measure.options)))
        if conj == "and" and scores[-1] == 0.0:
            return 0.0
    return sum(scores) / len(scores) if conj == "and" else max(scores)


def _value(ctx: TaskContext, get: _Get | None) -> Any:
    return None if get is None else get.function.func(ctx, **get.arguments)
