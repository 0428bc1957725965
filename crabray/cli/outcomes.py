"""The end of ``crabray run``: what was not the agent's doing, by cause, and the exit code.

A run exits 0 only when every episode is attributed to the agent; episodes that
are the benchmark's or the infrastructure's fault are printed here, grouped by
cause with their count and the first full message, with where to look, and the
run exits 1 (``EXIT_NOT_THE_AGENTS``).
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from pathlib import Path

from rich.markup import escape

from crabray.cli.terminal import console
from crabray.core.result import Attribution
from crabray.run.outcomes import Cause
from crabray.run.settings import DEFAULT_RESULTS

EXIT_NOT_THE_AGENTS = 1
"""Exit code of a run that left benchmark or infrastructure errors (bad input exits 2)."""

_WHAT = {
    Attribution.BENCHMARK: (
        "benchmark errors",
        "the suite's own fault (setup, evaluator, sandbox configuration, no solution): fix "
        "the suite; not retried, not counted against the agent",
    ),
    Attribution.INFRASTRUCTURE: (
        "infrastructure errors",
        "outside the sandbox (engine, node, worker, host, model API), after their retries: "
        "fix it, then resume the run; not counted against the agent",
    ),
}


def print_causes(causes: Sequence[Cause], out: Path | str, run_id: str, prog: str) -> int:
    """Print what was not the agent's doing and return the run's exit code (0 if nothing).

    Args:
        causes: The run's non-agent outcomes by cause (``RunSummary.not_the_agents``).
        out: The results root, as the user gave it.
        run_id: The run.
        prog: How the user types ``crabray``.
    """
    if not causes:
        return 0
    where = "" if out == DEFAULT_RESULTS else f" {shlex.quote(str(out))}"
    for whom in (Attribution.BENCHMARK, Attribution.INFRASTRUCTURE):
        mine = [cause for cause in causes if cause.attribution is whom]
        if not mine:
            continue
        title, meaning = _WHAT[whom]
        total = sum(cause.episodes for cause in mine)
        console.print(f"[bold magenta]{total} {title}[/]: {escape(meaning)}", highlight=False)
        for cause in mine:
            console.print(
                f"  {cause.episodes} x {escape(cause.label)}, first in task "
                f"{escape(cause.first_task)} (agent {escape(cause.first_agent)}):",
                highlight=False,
            )
            message = cause.first_error or "(no message recorded)"
            for line in message.splitlines() or [message]:
                console.print(f"    {escape(line)}", highlight=False, soft_wrap=True)
    console.print(
        "where to look: "
        + escape(f"{prog} leaderboard{where} --run {run_id} --by termination_reason")
        + "; every row, with its error: "
        + escape(f"{prog} view{where} --run {run_id}"),
        highlight=False,
        soft_wrap=True,
    )
    if any(cause.attribution is Attribution.INFRASTRUCTURE for cause in causes):
        console.print(
            "once fixed, resuming the run tries its infrastructure errors again: "
            + escape(f"{prog} run ... --resume {run_id}"),
            highlight=False,
            soft_wrap=True,
        )
    return EXIT_NOT_THE_AGENTS
