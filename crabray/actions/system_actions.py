"""CRAB's system actions under their CRAB names (``crab.actions.system_actions``).

Plain Python functions: they run where their environment is, inside its
sandbox (docs/guides/authoring.md, Actions).
"""

from __future__ import annotations

import subprocess
import time

from crabray.core import action


@action
def delay(time: float) -> None:
    """Wait for the given number of seconds.

    Args:
        time: Seconds to wait.
    """
    _sleep(time)


def _sleep(seconds: float) -> None:
    time.sleep(seconds)


@action
def run_bash_command(command: str) -> str:
    """Run a command with the bash shell. You can use it to open any application by its name.

    Args:
        command: The command to run.

    Returns:
        Its standard output and standard error.
    """
    done = subprocess.run(["bash", "-c", command], capture_output=True, text=True, check=False)
    return f'stdout: "{done.stdout}"\nstderr: "{done.stderr}"'


__all__ = ["delay", "run_bash_command"]
