"""Which episodes a default report counts: per task, those of the latest run that ran it.

A results root collects runs: the same suite run again after a fix, other agents
run on it later, other suites beside it. Summing them all would count a task
twice when a command is run twice, and mix suites in one row. A report without
``--run`` therefore counts, per ``(suite, agent, model, task)``, only the
episodes of the latest run that has that task for that agent and model (run ids
sort by start time): a re-run *replaces* the earlier result, while agents and
suites run separately still appear side by side. Whole tasks are replaced, not
single epochs, so a task's epochs always come from one run (pass@k and the
clustered intervals treat them as attempts of one configuration). The rows are
then summarised per suite: different suites are never summed into one row.

The rule keeps the latest run's rows whatever they hold (infrastructure
failures included: they show in ``infra_errors``), so what a report counts is
always what the latest run recorded.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyarrow as pa

from crabray.results._numpy import to_arrow
from crabray.results.board._aggregate import combine
from crabray.results.board.arrow_board import codes, dictionary_indices, labels

LATEST_KEY = ("suite", "agent", "model", "task_id")
"""Per value of these columns, only the latest run's episodes count in a default report."""


def latest_mask(episodes: pa.Table) -> np.ndarray:
    """True for the rows of the latest run per ``LATEST_KEY`` (rows need those and ``run_id``)."""
    if episodes.num_rows == 0:
        return np.zeros(0, bool)
    episodes = episodes.select(["run_id", *LATEST_KEY]).unify_dictionaries()
    ids, first = combine([codes(episodes.column(name)) for name in LATEST_KEY], episodes.num_rows)
    dictionary, indices = dictionary_indices(episodes.column("run_id"))
    order = np.argsort(np.array(dictionary.to_pylist(), dtype=object), kind="stable")
    rank = np.empty(len(order), np.int64)
    rank[order] = np.arange(len(order))
    row_rank: np.ndarray = rank[indices]
    best = np.full(len(first), -1, np.int64)
    np.maximum.at(best, ids, row_rank)
    latest: np.ndarray = row_rank == best[ids]
    return latest


def latest_per_task(episodes: pa.Table) -> pa.Table:
    """The rows a default report counts: per ``LATEST_KEY``, the latest run's (module doc)."""
    return episodes.filter(to_arrow(latest_mask(episodes)))


def runs_per_suite(episodes: pa.Table) -> dict[str | None, list[str]]:
    """The runs with rows in ``episodes`` per suite, suites sorted (a null suite last),
    runs newest first."""
    found: dict[str | None, list[str]] = {}
    if episodes.num_rows == 0:
        return found
    pairs = episodes.select(["suite", "run_id"]).unify_dictionaries()
    names = ("suite", "run_id")
    _, first = combine([codes(pairs.column(name)) for name in names], pairs.num_rows)
    suites, runs = (labels(pairs.column(name), first).to_pylist() for name in names)
    for suite, run in zip(suites, runs, strict=True):
        found.setdefault(suite, []).append(str(run))
    ordered = sorted(found, key=lambda suite: (suite is None, suite or ""))
    return {suite: sorted(found[suite], reverse=True) for suite in ordered}


def describe_runs(runs: Sequence[str], created: dict[str, str]) -> str:
    """``runs: R2 (created 2026-11-23 07:53 UTC), R1 (...)``: the runs a report counts.

    Args:
        runs: Run ids, in the order to name them.
        created: When each run was created, as text; a run without one is said to
            have no manifest.
    """
    return "runs: " + ", ".join(
        f"{run} (created {created[run]})" if run in created else f"{run} (no manifest)"
        for run in runs
    )
