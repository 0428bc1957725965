"""How a failed command is described: the command, its exit code, the cause, the last lines.

A setup script that installs packages prints hundreds of lines, progress bars
included, and the line that says why it failed ("gnome-terminal: command not
found") is rarely the last one. The last 500 characters cut mid-word hid it.
:func:`command_failure` puts the cause on the first line, after the command and
its exit code, then the last meaningful lines of the output (blank and
progress lines left out; lines that name an error kept even when earlier).
"""

from __future__ import annotations

import re

CAUSE_PATTERN = re.compile(
    r"error|not found|no such file|permission denied|cannot|can't|could not|unable to"
    r"|failed|fatal|traceback|exception|denied|refused|missing|invalid",
    re.IGNORECASE,
)
"""Words of a line that says why a command failed."""

_PROGRESS = re.compile(
    r"^[\s\W\d]*$"  # only punctuation, digits, bars: "#####", "45%", "....", "[===>   ]"
    r"|\d{1,3}(\.\d+)?\s*%"  # a percentage
    r"|\betas?\b\s*\d|\b\d+(\.\d+)?\s*[kKmMgG]i?B/s\b",  # an ETA, a transfer rate
)
"""A line that only shows progress."""

MAX_LINES = 12
"""Output lines a description keeps."""

MAX_LINE_CHARS = 300
"""Characters of one kept line (longer ones are cut at a word, with ``...``)."""


def meaningful_lines(output: str) -> list[str]:
    """The output's lines without blank and progress lines, each as the terminal last showed it.

    A line redrawn with carriage returns (a progress bar) counts as its last state.
    """
    kept = []
    for raw in output.splitlines():
        line = raw.rsplit("\r", 1)[-1].strip() if "\r" in raw else raw.strip()
        if line and (CAUSE_PATTERN.search(line) or not _PROGRESS.search(line)):
            kept.append(line)
    return kept


def failure_cause(output: str) -> str | None:
    """The last line of ``output`` that says why a command failed, or None."""
    causes = [line for line in meaningful_lines(output) if CAUSE_PATTERN.search(line)]
    return causes[-1] if causes else None


def command_failure(
    what: str, exit_code: int, output: str, *, timed_out: bool = False, timeout_sec: float = 0.0
) -> str:
    """``{what} exited {code}: {cause}``, then its last meaningful lines of output.

    Args:
        what: The command, named for a person (``command 'apt-get install x'``).
        exit_code: Its exit status (ignored when ``timed_out``).
        output: What it printed (stdout and stderr).
        timed_out: It was killed at its timeout.
        timeout_sec: That timeout, when ``timed_out``.

    Returns:
        A message whose first line holds the command, the exit code and the cause
        (the last line that names an error, else the last line), and whose next
        lines are the last :data:`MAX_LINES` meaningful lines of the output,
        earlier lines that name an error kept first.

    Example:
        >>> output = "ok" + chr(10) + "sh: gnome-terminal: not found"
        >>> print(command_failure("command 'setup.sh'", 127, output))
        command 'setup.sh' exited 127: sh: gnome-terminal: not found
        last lines of its output:
          ok
          sh: gnome-terminal: not found
    """
    status = f"timed out after {timeout_sec:g} s" if timed_out else f"exited {exit_code}"
    lines = meaningful_lines(output)
    if not lines:
        return f"{what} {status} and printed nothing"
    cause = failure_cause(output) or lines[-1]
    head = f"{what} {status}: {_clip(cause)}"
    tail = lines[-MAX_LINES:]
    earlier = [line for line in lines[:-MAX_LINES] if CAUSE_PATTERN.search(line)]
    shown = [*earlier[-(MAX_LINES // 3) :], *(["..."] if len(lines) > MAX_LINES else []), *tail]
    return head + "\nlast lines of its output:\n" + "\n".join(f"  {_clip(line)}" for line in shown)


def _clip(line: str) -> str:
    if len(line) <= MAX_LINE_CHARS:
        return line
    cut = line[:MAX_LINE_CHARS].rsplit(" ", 1)[0]
    return cut + " ..."
