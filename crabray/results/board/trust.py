"""Which passes nobody can vouch for: the rows behind ``unverified_passes`` and
``unknown_trust_passes``, grouped by why.

The leaderboard counts them (``crabray.results.board._aggregate.trust_columns``);
the end of ``crabray run`` names them, task by task, with the reason each row
gives (``grader_untrusted_reason``), so that a run whose passes came from a
grader the agent could have changed says so where it is read first. Both
take a pass, its verdict and its trust by the same functions
(``arrow_board.graded``, ``arrow_board.grader_trust``), so the names printed are
exactly the passes counted.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa

from crabray.results._numpy import from_pylist, to_arrow
from crabray.results.board._aggregate import TRUSTED, UNKNOWN_TRUST, UNTRUSTED
from crabray.results.board.arrow_board import floats, graded, grader_trust
from crabray.results.board.cells import is_missing

__all__ = [
    "TRUSTED",
    "TRUST_INPUT_COLUMNS",
    "UNKNOWN_TRUST",
    "UNTRUSTED",
    "UnverifiedGroup",
    "passes_not_verified",
    "row_trust",
    "trust_text",
]

TRUST_INPUT_COLUMNS = (
    "agent",
    "task_id",
    "termination_reason",
    "attribution",
    "success",
    "grader_trusted",
    "grader_untrusted_reason",
)
"""Episode columns ``passes_not_verified`` reads (``grader_trusted`` and
``grader_untrusted_reason`` may be missing: every trust is then unknown)."""


def row_trust(grader_trusted: Any) -> int:
    """One row's ``TRUSTED``, ``UNTRUSTED`` or ``UNKNOWN_TRUST``, by ``grader_trust`` itself.

    What an episode page says of its grade is then what the leaderboard counted it
    as (a missing value: None, NaN or pandas' NA, is unknown).
    """
    value = None if is_missing(grader_trusted) else bool(grader_trusted)
    column = pa.table({"grader_trusted": from_pylist([value], pa.bool_())})
    return int(grader_trust(column)[0])


def trust_text(trust: int, reason: str | None) -> str:
    """How a grade's trust reads for a person, with the row's reason when unverified."""
    if trust == TRUSTED:
        return "verified: graded by a path the agent could not alter"
    if trust == UNTRUSTED:
        return f"unverified: {reason or 'no reason recorded'}"
    return "unknown: the row does not say how it was graded"


@dataclass
class UnverifiedGroup:
    """The passes not verified for one reason.

    Attributes:
        trusted: False for passes whose grader the agent could have altered; None
            for passes whose trust was never recorded (rows from before the column).
        reason: What the rows say made the grade unverified (``grader_untrusted_reason``,
            whitespace collapsed to one line); None when they say nothing.
        passes: How many passes (episodes, epochs included).
        episodes: The ``(agent, task_id)`` of each, once each, in row order.
    """

    trusted: bool | None
    reason: str | None
    passes: int = 0
    episodes: list[tuple[str, str]] = field(default_factory=list)


def _reasons(episodes: pa.Table) -> list[str | None]:
    if "grader_untrusted_reason" not in episodes.column_names:
        return [None] * episodes.num_rows
    return [
        (" ".join(str(text).split()) or None) if text is not None else None
        for text in episodes.column("grader_untrusted_reason").to_pylist()
    ]


def passes_not_verified(episodes: pa.Table) -> list[UnverifiedGroup]:
    """The graded passes whose grade is not verified, by (trust, reason): untrusted
    first, then unknown, each by how many passes, most first.

    Args:
        episodes: Deduplicated episode rows (``read_episode_table``) with
            ``TRUST_INPUT_COLUMNS``.
    """
    trust = grader_trust(episodes)
    rows = np.flatnonzero(graded(episodes) & (floats(episodes, "success") > 0) & (trust != TRUSTED))
    if not len(rows):
        return []
    picked = episodes.take(to_arrow(rows))  # Python values of these rows only
    agents = picked.column("agent").to_pylist()
    tasks = picked.column("task_id").to_pylist()
    reasons = _reasons(picked)
    groups: dict[tuple[bool | None, str | None], UnverifiedGroup] = {}
    seen: set[tuple[bool | None, str | None, str, str]] = set()
    for row, known in enumerate(trust[rows] != UNKNOWN_TRUST):
        trusted = False if known else None
        key = (trusted, reasons[row])
        group = groups.setdefault(key, UnverifiedGroup(trusted, reasons[row]))
        group.passes += 1
        episode = (str(agents[row]), str(tasks[row]))
        if (*key, *episode) not in seen:  # epochs of a task: named once
            seen.add((*key, *episode))
            group.episodes.append(episode)
    return sorted(groups.values(), key=lambda g: (g.trusted is None, -g.passes))
