"""The end of ``crabray run``: what was not the agent's doing, by cause, and the exit code.

A run exits 0 only when every episode is attributed to the agent; episodes that
are the benchmark's or the infrastructure's fault are printed here, grouped by
cause with their count and the first full message, with where to look, and the
run exits 1 (``EXIT_NOT_THE_AGENTS``).

Passes nobody can vouch for (graded by a path the agent could alter, or of
unknown trust) are named here too, by reason. They leave the exit code as it
is: the exit code says whether the agent was measured on the whole suite,
which it was; how far its passes can be trusted is a figure of the board
(``verified_success_rate``, ``--verified-only``).
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence

from rich.markup import escape

from crabray.cli.terminal import console, safe_text
from crabray.core.result import Attribution
from crabray.core.words import counted
from crabray.results.board.trust import UnverifiedGroup
from crabray.results.store.root import ResultsRoot
from crabray.run.outcomes import Cause
from crabray.run.spec import is_default_root

EXIT_NOT_THE_AGENTS = 1
"""Exit code of a run that left benchmark or infrastructure errors (bad input exits 2)."""

_WHAT = {
    Attribution.BENCHMARK: (
        "benchmark error",
        "the suite's own fault (setup, evaluator, sandbox configuration, no solution): fix "
        "the suite; not retried, not counted against the agent",
    ),
    Attribution.INFRASTRUCTURE: (
        "infrastructure error",
        "outside the sandbox (engine, node, worker, host, model API), after their retries: "
        "fix it, then resume the run; not counted against the agent",
    ),
}


SHOWN_EPISODES = 5
"""Tasks named per reason of passes not verified; the rest are counted."""
SHOWN_REASONS = 5
"""Reasons of passes not verified shown, one line each; the rest are counted."""

_NOT_VERIFIED = {
    False: "unverified (graded by a path the agent could alter)",
    None: "of unknown trust (no grader_trusted recorded)",
}


def print_unverified(
    groups: Sequence[UnverifiedGroup], *, verified_only: bool, several_agents: bool
) -> None:
    """Name the passes that are not verified: how many, which tasks, and why.

    A block per kind (unverified, then unknown trust) with a line per reason
    naming its first ``SHOWN_EPISODES`` tasks; nothing when every pass is
    verified. Row text (task ids, agents, reasons) may hold anything: it goes
    through ``safe_text``.

    Args:
        groups: ``passes_not_verified`` of the run's rows.
        verified_only: Whether the leaderboard above counted them as failures.
        several_agents: Whether the run had several agents: each task is then named
            with its agent.
    """
    how = (
        "counted as failures above (--verified-only)"
        if verified_only
        else "counted as successes above (not with --verified-only)"
    )
    for trusted, what in _NOT_VERIFIED.items():
        mine = [group for group in groups if group.trusted is trusted]
        if not mine:
            continue
        total = sum(group.passes for group in mine)
        console.print(
            f"[bold yellow]{counted(total, 'pass', 'passes')} {what}[/], {how}:",
            highlight=False,
            soft_wrap=True,
        )
        for group in mine[:SHOWN_REASONS]:
            line = _reason_line(group, several_agents)
            console.print(f"  {line}", highlight=False, soft_wrap=True)
        if len(mine) > SHOWN_REASONS:
            more = counted(len(mine) - SHOWN_REASONS, "more reason")
            console.print(f"  and {more}", highlight=False)


def _reason_line(group: UnverifiedGroup, several: bool) -> str:
    """One reason's line, markup-safe: its passes, first tasks (with their agent when
    the run had several), how many more, and the reason the rows give (passes of
    unknown trust have none to give)."""
    names = [
        f"{task} ({agent})" if several else task for agent, task in group.episodes[:SHOWN_EPISODES]
    ]
    more = len(group.episodes) - SHOWN_EPISODES
    line = f"{group.passes} x " + safe_text(
        ", ".join(names) + (f" and {more} more" if more > 0 else "")
    )
    if group.trusted is None and group.reason is None:
        return line
    return f"{line}: {safe_text(group.reason or 'no reason recorded')}"


def print_causes(
    causes: Sequence[Cause], root: ResultsRoot, run_id: str, prog: str, resume: str | None
) -> int:
    """Print what was not the agent's doing and return the run's exit code (0 if nothing).

    Args:
        causes: The run's non-agent outcomes by cause (``RunSummary.not_the_agents``).
        root: The run's results root (left out of the commands printed when the default).
        run_id: The run.
        prog: How the user types ``crabray``.
        resume: The command that resumes the run, to type as it is; None where it is not
            known (a submitted run's machine: the one that submitted it prints it).
    """
    if not causes:
        return 0
    where = "" if is_default_root(root) else f" {shlex.quote(root.shown)}"
    for whom in (Attribution.BENCHMARK, Attribution.INFRASTRUCTURE):
        mine = [cause for cause in causes if cause.attribution is whom]
        if not mine:
            continue
        title, meaning = _WHAT[whom]
        total = sum(cause.episodes for cause in mine)
        console.print(
            f"[bold magenta]{counted(total, title)}[/]: {escape(meaning)}", highlight=False
        )
        for cause in mine:
            console.print(
                f"  {cause.episodes} x {safe_text(cause.label)}, first in task "
                f"{safe_text(cause.first_task)} (agent {safe_text(cause.first_agent)}):",
                highlight=False,
            )
            message = cause.first_error or "(no message recorded)"
            for line in message.splitlines() or [message]:
                console.print(f"    {safe_text(line)}", highlight=False, soft_wrap=True)
    console.print(
        "where to look: "
        + escape(f"{prog} leaderboard{where} --run {run_id} --by termination_reason")
        + "; every row, with its error: "
        + escape(f"{prog} view{where} --run {run_id}"),
        highlight=False,
        soft_wrap=True,
    )
    if any(cause.attribution is Attribution.INFRASTRUCTURE for cause in causes):
        how = (
            escape(resume)
            if resume is not None
            else f"--resume {run_id} from the machine that submitted it (it prints the command)"
        )
        console.print(
            f"once fixed, resuming the run tries its infrastructure errors again: {how}",
            highlight=False,
            soft_wrap=True,
        )
    return EXIT_NOT_THE_AGENTS
