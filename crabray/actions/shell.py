"""Shell actions: run a command in the environment's sandbox."""

from __future__ import annotations

from crabray.actions.limits import TimeoutSec
from crabray.core import action
from crabray.core.env import Env

DEFAULT_TIMEOUT_SEC = 60.0
_MAX_OUTPUT_CHARS = 10_000


@action
def run_command(command: str, env: Env, timeout_sec: TimeoutSec = DEFAULT_TIMEOUT_SEC) -> str:
    """Run a shell command in the sandbox and return its exit code and output.

    Args:
        command: The command line, run by `sh -c` in the sandbox's working directory.
        timeout_sec: Seconds before the command is killed; at most 300.
        env: The sandbox the action runs in, injected at run time (not part of the schema).
    """
    result = env.exec(command, timeout_sec=timeout_sec)
    status = "timed out" if result.timed_out else f"exit code {result.exit_code}"
    parts = [status]
    if result.stdout:
        parts.append(f"stdout:\n{_clip(result.stdout)}")
    if result.stderr:
        parts.append(f"stderr:\n{_clip(result.stderr)}")
    return "\n".join(parts)


def _clip(text: str) -> str:
    if len(text) <= _MAX_OUTPUT_CHARS:
        return text
    return text[:_MAX_OUTPUT_CHARS] + f"\n[... {len(text) - _MAX_OUTPUT_CHARS} more characters]"
