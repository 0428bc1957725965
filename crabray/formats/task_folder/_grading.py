"""Grading a task folder: run its ``evaluator.py`` in the sandbox, as the original format does.

After the agent is done, the scorer writes the trajectory to
``/outputs/trajectory.json``, puts ``evaluator.py`` (kept out until now) and
fresh copies of the sandbox modules (so edits the agent made to them do not
count) into ``/utils``, and runs ``eval.py``, which writes the checkpoints and
the final score as JSON. The host turns that into a ``Score``:
0.5 x result/total + 0.5 if every point was earned.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from crabray.core import Action
from crabray.core.env import Env
from crabray.core.errors import EvaluatorError, SandboxFileError
from crabray.core.result import CheckpointScore, Score
from crabray.formats.steps import closed_action
from crabray.formats.task_folder._checks import EVALUATOR, GRADER_FUNCTION
from crabray.formats.task_folder._sandbox import UTILS_DIR, put_sandbox_modules
from crabray.formats.task_folder._services import output_tail

TRAJECTORY_PATH = "/outputs/trajectory.json"
RESULT_PATH = "/outputs/eval_result.json"
EVAL_COMMAND = (
    f"cd {UTILS_DIR} && python3 {UTILS_DIR}/eval.py "
    f"--trajectory_path {TRAJECTORY_PATH} --result_path {RESULT_PATH}"
)
EVAL_TIMEOUT_SEC = 900.0
LLM_VARS = ("LITELLM_BASE_URL", "LITELLM_API_KEY", "LITELLM_MODEL")
"""The LLM judge's settings, forwarded from the worker's environment to eval.py when set."""

EVAL_MESSAGE_PREFIX = "eval.py: "


class EvalResult(BaseModel):
    """The JSON ``eval.py`` writes."""

    model_config = ConfigDict(extra="forbid")

    checkpoints: list[CheckpointScore] = Field(min_length=1)
    final_score: CheckpointScore


def checkpoint_score(final: CheckpointScore) -> float:
    """The format's score: half for the share of points, half for earning them all.

    Raises:
        EvaluatorError: The final score is worth no points.
    """
    if final.total == 0:
        raise EvaluatorError("eval.py reported a final score out of 0 points")
    return 0.5 * final.result / final.total + 0.5 * (1.0 if final.result == final.total else 0.0)


def grading_action(folder: Path) -> Action:
    """The task's scorer: runs ``eval.py`` on ``folder``'s ``evaluator.py`` in the sandbox."""

    def entry(env: Env, trajectory: str | None) -> Score:
        if trajectory is None:
            raise EvaluatorError(
                "no trajectory was passed to the scorer: crabray's episode passes it as the "
                "kept parameter 'trajectory'"
            )
        return grade(env, folder, trajectory)

    return closed_action(
        GRADER_FUNCTION,
        f"grade with {folder / EVALUATOR} through eval.py in the sandbox",
        entry,
        kept=("env", "trajectory"),
    )


def grade(env: Env, folder: Path, trajectory: str) -> Score:
    """Run ``eval.py`` in ``env`` on the trajectory and read the score it wrote.

    Raises:
        EvaluatorError: eval.py failed (its ``eval.py: ...`` line is the message) or
            wrote no readable result.
        SandboxError: The sandbox itself failed.
    """
    env.exec(["rm", "-f", RESULT_PATH], timeout_sec=60)
    env.put_file(TRAJECTORY_PATH, trajectory.encode())
    put_sandbox_modules(env)
    env.put_file(f"{UTILS_DIR}/{EVALUATOR}", (folder / EVALUATOR).read_bytes())
    llm = {name: os.environ[name] for name in LLM_VARS if os.environ.get(name)}
    done = env.exec(EVAL_COMMAND, timeout_sec=EVAL_TIMEOUT_SEC, env=llm)
    if done.timed_out:
        raise EvaluatorError(f"eval.py did not finish within {EVAL_TIMEOUT_SEC:g} s")
    if done.exit_code != 0:
        raise EvaluatorError(_failure(done.exit_code, done.stdout, done.stderr))
    result = _read_result(env)
    final = result.final_score
    return Score(
        value=checkpoint_score(final),
        checkpoints=result.checkpoints,
        explanation=f"{final.result}/{final.total} points; checkpoints "
        + ", ".join(f"{c.result}/{c.total}" for c in result.checkpoints),
    )


def _failure(code: int, stdout: str, stderr: str) -> str:
    """eval.py's own one-line explanation, else its exit code and output tail."""
    lines = [line for line in stderr.splitlines() if line.startswith(EVAL_MESSAGE_PREFIX)]
    if lines:
        return lines[-1].strip()
    return f"eval.py exited {code} without an explanation{output_tail(stdout + stderr)}"


def _read_result(env: Env) -> EvalResult:
    try:
        raw = env.get_file(RESULT_PATH)
    except SandboxFileError as exc:
        raise EvaluatorError(f"eval.py exited 0 but wrote no {RESULT_PATH}: {exc}") from exc
    try:
        return EvalResult.model_validate(json.loads(raw))
    except (ValueError, ValidationError) as exc:
        raise EvaluatorError(f"eval.py wrote an invalid {RESULT_PATH}: {exc}") from exc
