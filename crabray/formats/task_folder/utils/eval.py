"""Grade a task-folder task inside its container: run ``evaluator.py``, write the result JSON.

crabray runs, after the agent finished and the trajectory was written::

    cd /utils && python3 /utils/eval.py --trajectory_path /outputs/trajectory.json \\
        --result_path /outputs/eval_result.json

This imports ``evaluator`` from this file's folder, calls
``grade_checkpoints(trajectory=<the trajectory file's text>)`` (without an
argument when it takes none), checks the ``scoring.Result`` it returns and
writes ``{"checkpoints": [{"total", "result"}, ...], "final_score": {"total",
"result"}}`` to the result path. Standard library only: crabray is not
installed in the container.

Exit codes, each failure ending with ONE stderr line starting ``eval.py: ``
(after any traceback), which crabray reports as the evaluator error:

- 0: graded, the result file is written;
- 1: ``grade_checkpoints`` raised;
- 2: ``evaluator.py`` is malformed: it does not import, defines no
  ``grade_checkpoints``, returns something other than a ``Result``, an empty or
  invalid checkpoint list, or its scoring strategy fails;
- 3: eval.py was misused: bad arguments, unreadable trajectory, unwritable result.
"""

from __future__ import annotations

import argparse
import importlib
import inspect
import json
import logging
import os
import sys
import traceback
from collections.abc import Callable
from typing import Any, NoReturn

HERE = os.path.dirname(os.path.abspath(__file__))
if sys.path[0] != HERE:
    sys.path.insert(0, HERE)

import scoring  # noqa: E402  (must come after the path insert, from this folder)

RAISED = 1
MALFORMED = 2
MISUSED = 3

logger = logging.getLogger("eval")


class EvalFailure(Exception):
    """Grading cannot produce a result; ``code`` is the exit status."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        # argparse exits 2 by default, which would read as "malformed evaluator".
        self.print_usage(sys.stderr)
        raise EvalFailure(MISUSED, f"bad arguments: {message}")


def _parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = _Parser(prog="eval.py", description="Grade a task with its evaluator.py.")
    parser.add_argument("--trajectory_path", required=True, help="The agent's trajectory file.")
    parser.add_argument("--result_path", required=True, help="Where to write the result JSON.")
    return parser.parse_args(argv)


def _read_trajectory(path: str) -> str:
    try:
        with open(path, encoding="utf-8") as handle:
            return handle.read()
    except OSError as exc:
        raise EvalFailure(MISUSED, f"cannot read the trajectory {path}: {exc}") from exc


def _load_grade_checkpoints() -> Callable[..., Any]:
    if not os.path.isfile(os.path.join(HERE, "evaluator.py")):
        raise EvalFailure(MALFORMED, f"no evaluator.py in {HERE}")
    try:
        module = importlib.import_module("evaluator")
    except Exception as exc:
        traceback.print_exc()
        raise EvalFailure(
            MALFORMED, f"importing evaluator.py failed: {type(exc).__name__}: {exc}"
        ) from exc
    function: object = getattr(module, "grade_checkpoints", None)
    if function is None:
        raise EvalFailure(MALFORMED, "evaluator.py defines no grade_checkpoints function")
    if not callable(function):
        raise EvalFailure(
            MALFORMED,
            f"evaluator.py's grade_checkpoints is a {type(function).__name__}, not a function",
        )
    return function


def _call(function: Callable[..., Any], trajectory: str) -> Any:
    """Call ``grade_checkpoints`` the way its signature accepts the trajectory."""
    try:
        parameters = inspect.signature(function).parameters
    except (TypeError, ValueError):
        parameters = None
    try:
        positional = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
        if parameters is None:
            return function(trajectory=trajectory)
        named = parameters.get("trajectory")
        if named is not None and named.kind != inspect.Parameter.POSITIONAL_ONLY:
            return function(trajectory=trajectory)
        kinds = [p.kind for p in parameters.values()]
        if named is None and inspect.Parameter.VAR_KEYWORD in kinds:
            return function(trajectory=trajectory)
        if any(kind in positional or kind == inspect.Parameter.VAR_POSITIONAL for kind in kinds):
            return function(trajectory)
        return function()
    except (Exception, SystemExit) as exc:
        traceback.print_exc()
        if isinstance(exc, scoring.CheckpointError):
            raise EvalFailure(
                MALFORMED, f"evaluator.py built an invalid checkpoint: {exc}"
            ) from exc
        raise EvalFailure(RAISED, f"grade_checkpoints raised {type(exc).__name__}: {exc}") from exc


def _check_checkpoints(result: scoring.Result) -> list[dict[str, int]]:
    checkpoints = result.checkpoints
    if not isinstance(checkpoints, list):
        raise EvalFailure(
            MALFORMED, f"Result.checkpoints is a {type(checkpoints).__name__}, not a list"
        )
    if not checkpoints:
        raise EvalFailure(MALFORMED, "grade_checkpoints returned a Result with no checkpoints")
    rows = []
    for index, checkpoint in enumerate(checkpoints, start=1):
        if not isinstance(checkpoint, scoring.Checkpoint):
            raise EvalFailure(
                MALFORMED,
                f"checkpoint {index} is a {type(checkpoint).__name__}, not a scoring.Checkpoint",
            )
        try:  # fields may have been changed after construction
            scoring.Checkpoint(checkpoint.total, checkpoint.result)
        except scoring.CheckpointError as exc:
            raise EvalFailure(MALFORMED, f"checkpoint {index} is invalid: {exc}") from exc
        rows.append({"total": checkpoint.total, "result": checkpoint.result})
    return rows


def _is_count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _final_score(result: scoring.Result) -> dict[str, int]:
    try:
        final = result.final_score
    except Exception as exc:
        traceback.print_exc()
        raise EvalFailure(
            MALFORMED, f"the scoring strategy raised {type(exc).__name__}: {exc}"
        ) from exc
    if not isinstance(final, dict) or not all(_is_count(final.get(k)) for k in ("total", "result")):
        raise EvalFailure(
            MALFORMED,
            f"the scoring strategy returned {final!r}, not {{'total': int, 'result': int}} "
            "with non-negative values",
        )
    if final["total"] == 0 or final["result"] > final["total"]:
        raise EvalFailure(
            MALFORMED,
            f"the final score {final['result']}/{final['total']} is invalid: the total must be "
            "positive and the result at most the total",
        )
    return {"total": final["total"], "result": final["result"]}


def grade(trajectory: str) -> dict[str, Any]:
    """Run the evaluator on ``trajectory`` and return the checked result document."""
    result = _call(_load_grade_checkpoints(), trajectory)
    if not isinstance(result, scoring.Result):
        raise EvalFailure(
            MALFORMED,
            f"grade_checkpoints returned {type(result).__name__} {result!r:.100}, "
            "not a scoring.Result",
        )
    return {"checkpoints": _check_checkpoints(result), "final_score": _final_score(result)}


def _write(path: str, document: dict[str, Any]) -> None:
    try:
        folder = os.path.dirname(os.path.abspath(path))
        os.makedirs(folder, exist_ok=True)
        with open(path, "w", encoding="utf-8") as handle:
            json.dump(document, handle)
    except OSError as exc:
        raise EvalFailure(MISUSED, f"cannot write the result {path}: {exc}") from exc


def main(argv: list[str] | None = None) -> int:
    """Grade and write the result; on failure print the ``eval.py: `` line and return its code."""
    logging.basicConfig(
        level=logging.INFO, stream=sys.stderr, format="%(levelname)s %(name)s: %(message)s"
    )
    try:
        args = _parse_args(argv)
        document = grade(_read_trajectory(args.trajectory_path))
        _write(args.result_path, document)
    except EvalFailure as failure:
        sys.stdout.flush()
        line = " ".join(str(failure).split())
        print(f"eval.py: {line}", file=sys.stderr, flush=True)
        return failure.code
    final = document["final_score"]
    logger.info(
        "graded: %d/%d points, written to %s", final["result"], final["total"], args.result_path
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
