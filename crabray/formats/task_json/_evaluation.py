"""Shipped task-JSON evaluation functions: CSV, text, script logs, images, infeasible, and/or.

Each returns a score in [0, 1]. What the agent produced (``vm_*`` arguments,
sandbox paths) may be missing or malformed: that scores 0. What the task
brings (``local_*`` arguments, files of the task folder) must be right: a
problem there raises, and the episode records it as its evaluation error.
"""

from __future__ import annotations

import csv
import io
import re
import shlex
from pathlib import Path, PurePosixPath
from typing import Annotated, Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from crabray.core.errors import SandboxFileError
from crabray.formats.task_json._registry import (
    LocalPath,
    TaskContext,
    evaluation_function,
    lookup,
)

DEFAULT_SCRIPT_TIMEOUT_SEC = 300.0


def read_result(ctx: TaskContext, path: str) -> bytes | None:
    """The agent's file ``path`` in the sandbox, or ``None`` when it is not there."""
    try:
        return ctx.read_sandbox(path)
    except SandboxFileError:
        return None


def text_of(data: bytes) -> str:
    return data.decode("utf-8", errors="replace")


# CSV ----------------------------------------------------------------------------------------


def _rows(text: str, *, strict: bool, ignore_case: bool) -> list[list[str]]:
    rows = list(csv.reader(io.StringIO(text)))
    if not strict:
        rows = [[_loose_cell(cell) for cell in row] for row in rows]
        rows = [row for row in rows if any(row)]
    if ignore_case:
        rows = [[cell.lower() for cell in row] for row in rows]
    return rows


def _loose_cell(cell: str) -> str:
    """A cell compared loosely: trimmed, and numbers in a canonical form (``1.0`` == ``1``)."""
    cell = cell.strip()
    try:
        number = float(cell)
    except ValueError:
        return cell
    return repr(int(number)) if number.is_integer() else repr(number)


def csv_equal(
    result: str,
    expected: str,
    *,
    ignore_order: bool = False,
    ignore_case: bool = False,
    strict: bool = True,
) -> bool:
    """Whether two CSV texts hold the same table.

    Args:
        result: The CSV produced.
        expected: The CSV expected.
        ignore_order: Data rows may come in any order (the header stays first).
        ignore_case: Letter case does not matter.
        strict: Cells must match exactly; otherwise surrounding blanks, blank rows
            and number spelling (``1.0`` vs ``1``) do not matter.
    """
    got = _rows(result, strict=strict, ignore_case=ignore_case)
    want = _rows(expected, strict=strict, ignore_case=ignore_case)
    if ignore_order:
        got = got[:1] + sorted(got[1:])
        want = want[:1] + sorted(want[1:])
    return got == want


@evaluation_function
def compare_csv(
    ctx: TaskContext,
    local_expected: LocalPath,
    vm_result: str,
    ignore_order: bool = False,
    ignore_case: bool = False,
    strict: bool = True,
) -> float:
    """1 when the sandbox CSV holds the same table as the expected one (see ``csv_equal``)."""
    expected = text_of(ctx.read_local(local_expected))
    data = read_result(ctx, vm_result)
    if data is None:
        return 0.0
    same = csv_equal(
        text_of(data), expected, ignore_order=ignore_order, ignore_case=ignore_case, strict=strict
    )
    return float(same)


# Text ---------------------------------------------------------------------------------------


def text_equal(
    result: str, expected: str, *, ignore_blanks: bool = False, ignore_case: bool = False
) -> bool:
    """Whether two texts are the same; ``ignore_blanks`` compares their words only."""
    if ignore_case:
        result, expected = result.lower(), expected.lower()
    if ignore_blanks:
        return result.split() == expected.split()
    return result == expected


def _check_text_file(values: dict[str, Any], task_dir: Path) -> list[tuple[str, str]]:
    return _one_spelling(values, ("local_expected", "local_expected_file")) + _one_spelling(
        values, ("vm_result", "vm_result_file")
    )


def _one_spelling(values: dict[str, Any], names: tuple[str, str]) -> list[tuple[str, str]]:
    """A problem unless exactly one of two spellings of the same argument is given."""
    given = [name for name in names if values.get(name) is not None]
    if len(given) == 1:
        return []
    if given:
        return [(names[1], f"give '{names[0]}' or '{names[1]}', not both (they are one argument)")]
    return [(names[0], f"required (or its other spelling '{names[1]}')")]


@evaluation_function(check=_check_text_file)
def compare_text_file(
    ctx: TaskContext,
    local_expected: LocalPath | None = None,
    vm_result: str | None = None,
    ignore_blanks: bool = False,
    ignore_case: bool = False,
    local_expected_file: LocalPath | None = None,
    vm_result_file: str | None = None,
) -> float:
    """1 when the sandbox text file equals the expected one (see ``text_equal``).

    ``local_expected_file`` and ``vm_result_file`` are the GUI-OS repository's
    spellings of ``local_expected`` and ``vm_result``; either is accepted.
    """
    expected_path = local_expected if local_expected is not None else local_expected_file
    result_path = vm_result if vm_result is not None else vm_result_file
    if expected_path is None or result_path is None:
        raise ValueError("compare_text_file needs local_expected and vm_result")
    expected = text_of(ctx.read_local(expected_path))
    data = read_result(ctx, result_path)
    if data is None:
        return 0.0
    return float(
        text_equal(text_of(data), expected, ignore_blanks=ignore_blanks, ignore_case=ignore_case)
    )


# Script logs --------------------------------------------------------------------------------


def log_matches(
    log: str,
    include: list[str] | None = None,
    exclude: list[str] | None = None,
    *,
    regex: bool = False,
    expected_lines: list[str] | None = None,
) -> bool:
    """Whether a log contains every ``include``, no ``exclude`` (substrings, or regular
    expressions with ``regex``), and, when given, exactly the expected non-blank lines."""

    def found(pattern: str) -> bool:
        return re.search(pattern, log, re.MULTILINE) is not None if regex else pattern in log

    if not all(found(p) for p in include or []):
        return False
    if any(found(p) for p in exclude or []):
        return False
    if expected_lines is not None:
        got = [line.strip() for line in log.splitlines() if line.strip()]
        want = [line.strip() for line in expected_lines if line.strip()]
        return got == want
    return True


class LogRules(BaseModel):
    """The GUI-OS repository's ``rules`` of ``compare_script_logs``: substrings of the log."""

    model_config = ConfigDict(extra="forbid")

    include: list[str] = Field(default_factory=list)
    exclude: list[str] = Field(default_factory=list)


def _check_script_logs(values: dict[str, Any], task_dir: Path) -> list[tuple[str, str]]:
    problems = _one_spelling(values, ("local_script", "eval_script"))
    if values.get("rules") is not None and (
        values.get("include") is not None or values.get("exclude") is not None
    ):
        problems.append(("rules", "give 'rules' or 'include'/'exclude', not both"))
    return problems


@evaluation_function(check=_check_script_logs)
def compare_script_logs(
    ctx: TaskContext,
    local_script: LocalPath | None = None,
    remote_path: str | None = None,
    interpreter: str = "bash",
    include: list[str] | None = None,
    exclude: list[str] | None = None,
    regex: bool = False,
    local_expected_log: LocalPath | None = None,
    expected_exit_code: int | None = None,
    timeout_sec: float = DEFAULT_SCRIPT_TIMEOUT_SEC,
    eval_script: LocalPath | None = None,
    vm_eval_logs: str | None = None,
    rules: LogRules | None = None,
) -> float:
    """Run a script of the task folder in the sandbox and grade its log.

    The log is the script's output (stdout + stderr), or, with ``vm_eval_logs``,
    the file the script wrote there (missing: 0). The GUI-OS repository's
    spelling ``eval_script``/``vm_eval_logs``/``rules`` grades as that
    repository does: the file's text must hold every ``rules.include`` and no
    ``rules.exclude``, and empty rules score 0.

    Args:
        local_script: The script, relative to the task folder (or ``eval_script``).
        remote_path: Where it is copied in the sandbox before it runs (in its folder);
            ``.crabray-eval/<script name>`` under the working directory by default.
        interpreter: The program that runs it.
        include: Text the log must contain (all of it).
        exclude: Text the log must not contain (any of it).
        regex: ``include``/``exclude`` are regular expressions.
        local_expected_log: A file of the task folder the log's non-blank lines must equal.
        expected_exit_code: The exit code the script must end with, if any.
        timeout_sec: Seconds before the script is killed (a timeout scores 0).
        eval_script: The GUI-OS spelling of ``local_script``.
        vm_eval_logs: The sandbox file holding the log, written by the script.
        rules: The GUI-OS spelling of ``include``/``exclude``.
    """
    script = local_script if local_script is not None else eval_script
    if script is None:
        raise ValueError("compare_script_logs needs local_script (or eval_script)")
    if rules is not None:
        if not rules.include and not rules.exclude:
            return 0.0
        include, exclude = rules.include, rules.exclude
    remote_path = remote_path or f".crabray-eval/{PurePosixPath(script).name}"
    ctx.env.put_file(remote_path, ctx.read_local(script))
    expected_lines = (
        text_of(ctx.read_local(local_expected_log)).splitlines()
        if local_expected_log is not None
        else None
    )
    where = PurePosixPath(remote_path)
    command = (
        f"cd {shlex.quote(str(where.parent))} && "
        f"{shlex.quote(interpreter)} {shlex.quote('./' + where.name)}"
    )
    result = ctx.env.exec(command, timeout_sec=timeout_sec)
    if result.timed_out:
        return 0.0
    if expected_exit_code is not None and result.exit_code != expected_exit_code:
        return 0.0
    if vm_eval_logs is not None:
        data = read_result(ctx, vm_eval_logs)
        if data is None:
            return 0.0
        log = text_of(data)
    else:
        log = result.stdout + result.stderr
    return float(log_matches(log, include, exclude, regex=regex, expected_lines=expected_lines))


# Images -------------------------------------------------------------------------------------


def histogram_similarity(first: bytes, second: bytes) -> float:
    """Correlation of the grey-level histograms of two images, in [-1, 1].

    The larger image is first scaled down to the smaller one's size, as the
    original suite did; identical flat histograms count as 1.

    Raises:
        ValueError: A file is not an image Pillow can read.
    """
    from PIL import Image, UnidentifiedImageError

    try:
        a = Image.open(io.BytesIO(first)).convert("L")
        b = Image.open(io.BytesIO(second)).convert("L")
    except UnidentifiedImageError as exc:
        raise ValueError(f"not a readable image: {exc}") from exc
    if a.width * a.height > b.width * b.height:
        a = a.resize(b.size, Image.Resampling.BOX)
    elif a.size != b.size:
        b = b.resize(a.size, Image.Resampling.BOX)
    ha = _normalized_histogram(a)
    hb = _normalized_histogram(b)
    da, db = ha - ha.mean(), hb - hb.mean()
    denominator = float(np.sqrt((da * da).sum() * (db * db).sum()))
    if denominator == 0.0:
        return 1.0 if np.array_equal(ha, hb) else 0.0
    return float((da * db).sum() / denominator)


def _normalized_histogram(image: Any) -> np.ndarray:
    hist = np.asarray(image.histogram()[:256], dtype=np.float64)
    low, high = hist.min(), hist.max()
    return (hist - low) / (high - low) if high > low else np.zeros_like(hist)


@evaluation_function
def compare_jupyterlab_images(
    ctx: TaskContext,
    local_expected_image: LocalPath,
    vm_result_image: str,
    similarity_threshold: Annotated[float, Field(ge=-1.0, le=1.0)] = 0.95,
) -> float:
    """1 when the sandbox image's grey-level histogram correlates with the expected one's
    at least ``similarity_threshold`` (see ``histogram_similarity``)."""
    expected = ctx.read_local(local_expected_image)
    data = read_result(ctx, vm_result_image)
    if data is None:
        return 0.0
    try:
        similarity = histogram_similarity(data, expected)
    except ValueError:
        histogram_similarity(expected, expected)  # the task's own image must be readable
        return 0.0
    return float(similarity >= similarity_threshold)


# Infeasible and combinations ----------------------------------------------------------------


@evaluation_function
def infeasible(ctx: TaskContext) -> float:
    """1 only when the agent's last action was ``fail``: the task cannot be done."""
    return float(ctx.agent_failed)


class Comparison(BaseModel):
    """One nested evaluation of ``evaluate_multiple_notebooks``."""

    model_config = ConfigDict(extra="forbid")

    func: str
    arguments: dict[str, Any] = Field(default_factory=dict)


def _check_comparisons(values: dict[str, Any], task_dir: Path) -> list[tuple[str, str]]:
    problems: list[tuple[str, str]] = []
    for index, comparison in enumerate(values["comparisons"]):
        where = f"comparisons.{index}"
        try:
            function = lookup("evaluation", comparison.func)
        except Exception as exc:
            problems.append((f"{where}.func", str(exc)))
            continue
        _, nested = function.validate(comparison.arguments, task_dir)
        problems += [(f"{where}.arguments.{f}".rstrip("."), m) for f, m in nested]
    if not values["comparisons"]:
        problems.append(("comparisons", "give at least one comparison"))
    return problems


@evaluation_function(check=_check_comparisons)
def evaluate_multiple_notebooks(
    ctx: TaskContext, operator: Literal["and", "or"], comparisons: list[Comparison]
) -> float:
    """Combine nested evaluations: ``and`` is 1 when all score 1, ``or`` when any does.

    Args:
        operator: ``and`` or ``or``.
        comparisons: Nested ``{"func", "arguments"}`` evaluations.
    """
    scores = []
    for comparison in comparisons:
        function = lookup("evaluation", comparison.func)
        arguments, _ = function.validate(comparison.arguments, ctx.task_dir)
        scores.append(float(function.func(ctx, **arguments)))
    passed = [score >= 1.0 for score in scores]
    return float(all(passed) if operator == "and" else any(passed))
