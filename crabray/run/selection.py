"""Which tasks of a suite a run takes: ``--task`` (ids or globs), ``--tag`` and ``--limit``.

One rule for ``crabray run`` and ``crabray tasks list/validate``, so a selection
tried with ``tasks list`` is the one a run gets. A pattern or tag that matches
nothing is an error naming it (with the closest real ids), not an empty run.
"""

from __future__ import annotations

import difflib
import fnmatch
from typing import TYPE_CHECKING

from crabray.core.errors import ConfigError

if TYPE_CHECKING:
    from crabray.formats import Suite

_GLOB = frozenset("*?[")


def select_tasks(
    suite: Suite,
    patterns: list[str] | None = None,
    tags: list[str] | None = None,
    limit: int | None = None,
) -> list[str]:
    """The ids of ``suite`` to run, in suite order: matching a pattern, carrying a tag.

    A pattern is an exact id or an ``fnmatch`` glob; a task is kept if any pattern
    matches it and, when tags are given, it carries any of them. ``limit`` keeps
    the first N of what is left.

    Raises:
        ConfigError: A pattern or tag matches no task (the message suggests close ids).
    """
    ids = suite.task_ids
    chosen = ids
    refused = {t: r for t, r in suite.unsupported.items() if patterns and t in patterns}
    if refused:
        raise ConfigError(
            "cannot run the task(s) asked for: " + "; ".join(type(suite).reasons(refused)),
            field="--task",
        )
    if patterns:
        matched = {p: _matches(p, ids) for p in patterns}
        missing = [p for p, found in matched.items() if not found]
        if missing:
            raise ConfigError(_no_match(suite.name, missing, ids), field="--task")
        wanted = {task_id for found in matched.values() for task_id in found}
        chosen = [t for t in ids if t in wanted]
    if tags:
        known = {tag for entry in suite.entries.values() for tag in entry.task.tags}
        unknown = [t for t in tags if t not in known]
        if unknown:
            raise ConfigError(
                f"no task of suite '{suite.name}' has tag {', '.join(map(repr, unknown))}"
                + _suggest(unknown[0], sorted(known), "tags"),
                field="--tag",
            )
        chosen = [t for t in chosen if set(suite.entries[t].task.tags) & set(tags)]
        if not chosen:
            raise ConfigError(
                f"no selected task of suite '{suite.name}' has tag {', '.join(map(repr, tags))}",
                field="--tag",
            )
    return chosen if limit is None else chosen[:limit]


def _matches(pattern: str, ids: list[str]) -> list[str]:
    if not _GLOB & set(pattern):
        return [pattern] if pattern in ids else []
    return [t for t in ids if fnmatch.fnmatchcase(t, pattern)]


def _no_match(suite: str, missing: list[str], ids: list[str]) -> str:
    named = ", ".join(repr(p) for p in missing)
    return f"no task of suite '{suite}' matches {named}" + _suggest(missing[0], ids, "ids")


def _suggest(word: str, candidates: list[str], what: str) -> str:
    """``; did you mean ...?`` with the closest candidates, or nothing when none is close."""
    close = difflib.get_close_matches(word, candidates, n=3, cutoff=0.5)
    if not close:
        return f" (see the {what} with `crabray tasks list`)" if what == "ids" else ""
    return "; did you mean " + " or ".join(repr(c) for c in close) + "?"
