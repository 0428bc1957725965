"""The results of runs: a Parquet dataset written crash-safely, read deduplicated.

::

    OUT/episodes/run_id=<RUN>/part-*.parquet   one row per episode attempt
    OUT/steps/run_id=<RUN>/part-*.parquet      one row per agent action call
    OUT/runs/<RUN>.json                        the run's manifest

Columns are described in the schemas' field metadata, from which the column
tables of ``docs/results-schema.md`` are generated. This package depends only
on ``crabray.core.result``, ``crabray.core.errors`` and ``crabray.core.redact``
(the sink removes known secrets from what it writes).
"""

from __future__ import annotations

from crabray.results.board.arrow_board import breakdown_table, leaderboard_table
from crabray.results.board.compare import (
    CHANGES,
    COMPARE_STATS,
    RunComparison,
    compare_runs,
    compare_table,
)
from crabray.results.board.leaderboard import (
    BREAKDOWN_STATS,
    LEADERBOARD_COLUMNS,
    LEADERBOARD_INPUT_COLUMNS,
    STAT_COLUMNS,
    TAG,
    breakdown,
    leaderboard,
)
from crabray.results.board.render import render, terminal_view, to_rich_table
from crabray.results.board.stats import (
    mean_and_standard_error,
    mean_pass_at_k,
    pass_at_k,
    pass_hat_k,
    wilson_interval,
)
from crabray.results.store._fs import local_path, shown_uri
from crabray.results.store._layout import check_output_dir
from crabray.results.store.dataset import (
    INFRA_REASONS,
    UNFINISHED_REASONS,
    EpisodeKey,
    attempts_so_far,
    finished_keys,
    read_episode_table,
    read_episodes,
    read_steps,
)
from crabray.results.store.lock import run_lock
from crabray.results.store.remote import check_uri, is_remote, staged_output
from crabray.results.store.runs import (
    RunManifest,
    RunState,
    has_results,
    latest_run,
    list_runs,
    nested_roots,
    new_run_id,
    read_manifest,
    run_state,
    write_manifest,
)
from crabray.results.store.schema import EPISODES_SCHEMA, STEPS_SCHEMA, episodes_table, steps_table
from crabray.results.store.sink import ResultSink
from crabray.results.store.transfer import pack_run, unpack_run

__all__ = [
    "BREAKDOWN_STATS",
    "CHANGES",
    "COMPARE_STATS",
    "EPISODES_SCHEMA",
    "INFRA_REASONS",
    "LEADERBOARD_COLUMNS",
    "LEADERBOARD_INPUT_COLUMNS",
    "STAT_COLUMNS",
    "STEPS_SCHEMA",
    "TAG",
    "UNFINISHED_REASONS",
    "EpisodeKey",
    "ResultSink",
    "RunComparison",
    "RunManifest",
    "RunState",
    "attempts_so_far",
    "breakdown",
    "breakdown_table",
    "check_output_dir",
    "check_uri",
    "compare_runs",
    "compare_table",
    "episodes_table",
    "finished_keys",
    "has_results",
    "is_remote",
    "latest_run",
    "leaderboard",
    "leaderboard_table",
    "list_runs",
    "local_path",
    "mean_and_standard_error",
    "mean_pass_at_k",
    "nested_roots",
    "new_run_id",
    "pack_run",
    "pass_at_k",
    "pass_hat_k",
    "read_episode_table",
    "read_episodes",
    "read_manifest",
    "read_steps",
    "render",
    "run_lock",
    "run_state",
    "shown_uri",
    "staged_output",
    "steps_table",
    "terminal_view",
    "to_rich_table",
    "unpack_run",
    "wilson_interval",
    "write_manifest",
]
