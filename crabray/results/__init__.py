"""The results of runs: a Parquet dataset written crash-safely, read deduplicated.

::

    OUT/episodes/run_id=<RUN>/part-*.parquet   one row per episode attempt
    OUT/steps/run_id=<RUN>/part-*.parquet      one row per agent action call
    OUT/runs/<RUN>.json                        the run's manifest

Columns are described in the schemas' field metadata, from which the column
tables of ``docs/results-schema.md`` are generated. This package depends only
on ``crabray.core.result``, ``crabray.core.errors``, ``crabray.core.redact``
(the sink removes known secrets from what it writes) and ``crabray.core.install``
(the command that installs the site's missing extra).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from crabray.core.lazy import lazy_getattr

if TYPE_CHECKING:
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
    from crabray.results.store._layout import check_output_dir
    from crabray.results.store._uri import shown_uri
    from crabray.results.store.dataset import (
        INFRA_REASONS,
        UNFINISHED_REASONS,
        EpisodeKey,
        attempts_so_far,
        finished_keys,
        read_episode_table,
        read_episodes,
        read_steps,
        run_spending,
    )
    from crabray.results.store.lock import run_lock
    from crabray.results.store.remote import check_uri
    from crabray.results.store.root import ResultsRoot
    from crabray.results.store.runs import (
        RunManifest,
        RunState,
        has_results,
        latest_run,
        list_runs,
        nested_roots,
        new_run_id,
        read_manifest,
        run_log_path,
        run_state,
        write_manifest,
    )
    from crabray.results.store.schema import (
        EPISODES_SCHEMA,
        STEPS_SCHEMA,
        episodes_table,
        steps_table,
    )
    from crabray.results.store.sink import ResultSink
    from crabray.results.store.transfer import (
        RunListing,
        apply_changes,
        pack_changes,
        pack_run,
        unpack_run,
    )

_NAMES = {
    "BREAKDOWN_STATS": "crabray.results.board.leaderboard",
    "CHANGES": "crabray.results.board.compare",
    "COMPARE_STATS": "crabray.results.board.compare",
    "EPISODES_SCHEMA": "crabray.results.store.schema",
    "EpisodeKey": "crabray.results.store.dataset",
    "INFRA_REASONS": "crabray.results.store.dataset",
    "LEADERBOARD_COLUMNS": "crabray.results.board.leaderboard",
    "LEADERBOARD_INPUT_COLUMNS": "crabray.results.board.leaderboard",
    "ResultSink": "crabray.results.store.sink",
    "ResultsRoot": "crabray.results.store.root",
    "RunComparison": "crabray.results.board.compare",
    "RunManifest": "crabray.results.store.runs",
    "RunState": "crabray.results.store.runs",
    "STAT_COLUMNS": "crabray.results.board.leaderboard",
    "STEPS_SCHEMA": "crabray.results.store.schema",
    "TAG": "crabray.results.board.leaderboard",
    "UNFINISHED_REASONS": "crabray.results.store.dataset",
    "attempts_so_far": "crabray.results.store.dataset",
    "breakdown": "crabray.results.board.leaderboard",
    "breakdown_table": "crabray.results.board.arrow_board",
    "check_output_dir": "crabray.results.store._layout",
    "check_uri": "crabray.results.store.remote",
    "compare_runs": "crabray.results.board.compare",
    "compare_table": "crabray.results.board.compare",
    "episodes_table": "crabray.results.store.schema",
    "finished_keys": "crabray.results.store.dataset",
    "run_spending": "crabray.results.store.dataset",
    "has_results": "crabray.results.store.runs",
    "latest_run": "crabray.results.store.runs",
    "leaderboard": "crabray.results.board.leaderboard",
    "leaderboard_table": "crabray.results.board.arrow_board",
    "list_runs": "crabray.results.store.runs",
    "run_log_path": "crabray.results.store.runs",
    "mean_and_standard_error": "crabray.results.board.stats",
    "mean_pass_at_k": "crabray.results.board.stats",
    "nested_roots": "crabray.results.store.runs",
    "new_run_id": "crabray.results.store.runs",
    "RunListing": "crabray.results.store.transfer",
    "apply_changes": "crabray.results.store.transfer",
    "pack_changes": "crabray.results.store.transfer",
    "pack_run": "crabray.results.store.transfer",
    "pass_at_k": "crabray.results.board.stats",
    "pass_hat_k": "crabray.results.board.stats",
    "read_episode_table": "crabray.results.store.dataset",
    "read_episodes": "crabray.results.store.dataset",
    "read_manifest": "crabray.results.store.runs",
    "read_steps": "crabray.results.store.dataset",
    "render": "crabray.results.board.render",
    "run_lock": "crabray.results.store.lock",
    "run_state": "crabray.results.store.runs",
    "shown_uri": "crabray.results.store.root",
    "steps_table": "crabray.results.store.schema",
    "terminal_view": "crabray.results.board.render",
    "to_rich_table": "crabray.results.board.render",
    "unpack_run": "crabray.results.store.transfer",
    "wilson_interval": "crabray.results.board.stats",
    "write_manifest": "crabray.results.store.runs",
}
# Loaded on first use (PEP 562): a command that only parses a results root pays for no pyarrow.
__getattr__ = lazy_getattr(__name__, _NAMES)

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
    "ResultsRoot",
    "RunComparison",
    "RunListing",
    "RunManifest",
    "RunState",
    "apply_changes",
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
    "latest_run",
    "leaderboard",
    "leaderboard_table",
    "list_runs",
    "mean_and_standard_error",
    "mean_pass_at_k",
    "nested_roots",
    "new_run_id",
    "pack_changes",
    "pack_run",
    "pass_at_k",
    "pass_hat_k",
    "read_episode_table",
    "read_episodes",
    "read_manifest",
    "read_steps",
    "render",
    "run_lock",
    "run_log_path",
    "run_spending",
    "run_state",
    "shown_uri",
    "steps_table",
    "terminal_view",
    "to_rich_table",
    "unpack_run",
    "wilson_interval",
    "write_manifest",
]
