"""Grading a Harbor task: its tests run in the sandbox after the agent, and write the reward.

As Harbor's verifier does, the scorer copies the task's ``tests/`` into
``/tests`` (the agent never saw them), runs ``/tests/test.sh`` with its
output in ``/logs/verifier/test-stdout.txt``, and reads the reward the tests
wrote: ``/logs/verifier/reward.json`` (its ``reward`` key) if present, else
``/logs/verifier/reward.txt`` (one number). The reward is the score.

What the agent may have left there counts for nothing: ``/tests`` and
``/logs/verifier`` are removed and made anew just before the tests run (a
link put in their place is removed, not followed), so a reward the agent
wrote beforehand, or a ``test.sh`` it planted, is gone. What the tests run
(``bash``, ``python3``) comes from the container, which an agent running as
root may have replaced; crabray's docker backend then marks the grade
untrusted (``grader_trusted``), as for every command an evaluator runs.
"""

from __future__ import annotations

import json
import math
import shlex
from pathlib import Path

from crabray.core import Action
from crabray.core.env import Env
from crabray.core.errors import EvaluatorError, SandboxFileError
from crabray.core.result import Score
from crabray.formats.harbor._checks import TEST_SCRIPT
from crabray.formats.harbor._config import resolve_env
from crabray.formats.steps import closed_action
from crabray.formats.task_folder._services import output_tail

TESTS_PATH = "/tests"
LOGS_PATH = "/logs"
VERIFIER_PATH = f"{LOGS_PATH}/verifier"
REWARD_TXT = f"{VERIFIER_PATH}/reward.txt"
REWARD_JSON = f"{VERIFIER_PATH}/reward.json"
TEST_OUTPUT = f"{VERIFIER_PATH}/test-stdout.txt"
REWARD_KEY = "reward"
MAX_REWARD_BYTES = 1 << 20
PREPARE_TIMEOUT_SEC = 120.0

PREPARE = (
    # A link in place of /logs or /tests (or of verifier/) is removed, never followed.
    f"for p in {LOGS_PATH} {VERIFIER_PATH} {TESTS_PATH}; do "
    'if [ -L "$p" ]; then rm -f "$p" || exit 1; fi; done; '
    f"rm -rf {VERIFIER_PATH} {TESTS_PATH} && "
    f"mkdir -p {VERIFIER_PATH} {TESTS_PATH} && chmod 777 {VERIFIER_PATH}"
)
"""Run before the tests are copied in: nothing of the agent's stays where the verifier looks."""


def verifier_action(tests: Path, timeout_sec: float, env_vars: dict[str, str]) -> Action:
    """The task's scorer: Harbor's verifier, run on the sandbox after the agent is done.

    Args:
        tests: The task's ``tests/`` folder on the host.
        timeout_sec: ``verifier.timeout_sec`` of ``task.toml``.
        env_vars: ``verifier.env`` of ``task.toml`` (``${VAR}`` filled at grading).
    """

    def entry(env: Env) -> Score:
        return verify(env, tests, timeout_sec, env_vars)

    return closed_action(
        "harbor_verifier",
        f"copy {tests} to {TESTS_PATH}, run {TESTS_PATH}/{TEST_SCRIPT} and read the reward it "
        f"writes to {VERIFIER_PATH}",
        entry,
    )


def verify(env: Env, tests: Path, timeout_sec: float, env_vars: dict[str, str]) -> Score:
    """Run the tests in ``env`` and turn the reward they wrote into a ``Score``.

    Raises:
        EvaluatorError: The tests timed out, wrote no reward, or an unreadable one.
        SandboxError: The sandbox itself failed.
    """
    variables = resolve_env(env_vars, "verifier.env")
    _prepare(env, tests)
    script = f"{TESTS_PATH}/{TEST_SCRIPT}"
    command = f"{shlex.quote(script)} > {TEST_OUTPUT} 2>&1"
    done = env.exec(command, timeout_sec=timeout_sec, env=variables)
    if done.timed_out:
        raise EvaluatorError(f"the tests ({script}) did not finish within {timeout_sec:g} s")
    reward, source = _read_reward(env, done.exit_code)
    if not 0.0 <= reward <= 1.0:
        raise EvaluatorError(
            f"the tests wrote the reward {reward:g} to {source}; crabray scores in [0, 1]"
        )
    return Score(
        value=reward,
        explanation=f"reward {reward:g} from {source} (test.sh exited {done.exit_code})",
    )


def _prepare(env: Env, tests: Path) -> None:
    """Fresh ``/tests`` and ``/logs/verifier``, the task's tests copied in."""
    made = env.exec(PREPARE, timeout_sec=PREPARE_TIMEOUT_SEC)
    if not made.ok:
        raise EvaluatorError(
            f"cannot make {TESTS_PATH} and {VERIFIER_PATH} afresh in the sandbox "
            f"(exit {made.exit_code}){output_tail(made.stdout + made.stderr)}"
        )
    for file in sorted(p for p in tests.rglob("*") if p.is_file()):
        env.put_file(f"{TESTS_PATH}/{file.relative_to(tests).as_posix()}", file.read_bytes())
    executable = env.exec(["chmod", "+x", f"{TESTS_PATH}/{TEST_SCRIPT}"], timeout_sec=60)
    if not executable.ok:
        raise EvaluatorError(
            f"cannot make {TESTS_PATH}/{TEST_SCRIPT} executable "
            f"(exit {executable.exit_code}){output_tail(executable.stderr)}"
        )


def _read(env: Env, path: str) -> str | None:
    try:
        return env.get_file(path, max_bytes=MAX_REWARD_BYTES).decode("utf-8", errors="replace")
    except SandboxFileError:
        return None


def _read_reward(env: Env, exit_code: int) -> tuple[float, str]:
    """The reward and the file it came from: reward.json first, as Harbor reads them."""
    text = _read(env, REWARD_JSON)
    if text is not None:
        return _json_reward(text), REWARD_JSON
    text = _read(env, REWARD_TXT)
    if text is not None:
        return _number(text.strip(), REWARD_TXT), REWARD_TXT
    output = _read(env, TEST_OUTPUT) or ""
    raise EvaluatorError(
        f"the tests (exit {exit_code}) wrote no reward: neither {REWARD_TXT} nor {REWARD_JSON} "
        f"exists{output_tail(output)}"
    )


def _json_reward(text: str) -> float:
    try:
        parsed = json.loads(text)
    except ValueError as exc:
        raise EvaluatorError(f"{REWARD_JSON} is not valid JSON: {exc}") from exc
    if not isinstance(parsed, dict):
        raise EvaluatorError(f"{REWARD_JSON} must hold a JSON object, got {text[:80]!r}")
    numbers = {
        key: value
        for key, value in parsed.items()
        if isinstance(value, int | float) and not isinstance(value, bool)
    }
    if REWARD_KEY in numbers:
        return _number(numbers[REWARD_KEY], REWARD_JSON)
    if len(numbers) == 1:
        return _number(next(iter(numbers.values())), REWARD_JSON)
    raise EvaluatorError(
        f"{REWARD_JSON} has no numeric '{REWARD_KEY}' key (numeric keys: {sorted(numbers)}): "
        "crabray needs one score per episode"
    )


def _number(value: object, source: str) -> float:
    try:
        number = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError) as exc:
        raise EvaluatorError(f"{source} must hold a number, got {str(value)[:80]!r}") from exc
    if math.isnan(number):
        raise EvaluatorError(f"{source} holds NaN, not a reward")
    return number
