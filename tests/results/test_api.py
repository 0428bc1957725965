"""The public surface of crabray.results and the layering rule it obeys."""

from __future__ import annotations

import ast
from pathlib import Path

import crabray.results

ALLOWED_OUTSIDE = {
    "crabray.core.result",
    "crabray.core.errors",
    "crabray.core.redact",
    "crabray.core.lazy",
    "crabray.core.install",
    "crabray.core.words",
}
"""The result model, its errors, the redaction of known secrets the sink applies, the
loading of the package's names on first use, the command that installs a missing
extra (the site's matplotlib), and counts in words (``1 task``, ``2 tasks``)."""


def test_export_list():
    assert sorted(crabray.results.__all__) == sorted(
        [
            "check_uri",
            "ResultsRoot",
            "shown_uri",
            "BREAKDOWN_STATS",
            "CHANGES",
            "COMPARE_STATS",
            "EPISODES_SCHEMA",
            "EpisodeKey",
            "INFRA_REASONS",
            "LEADERBOARD_COLUMNS",
            "LEADERBOARD_INPUT_COLUMNS",
            "ResultSink",
            "RunComparison",
            "RunListing",
            "apply_changes",
            "pack_changes",
            "RunManifest",
            "RunState",
            "STAT_COLUMNS",
            "STEPS_SCHEMA",
            "TAG",
            "UNFINISHED_REASONS",
            "attempts_so_far",
            "breakdown_table",
            "compare_table",
            "check_output_dir",
            "has_results",
            "latest_run",
            "nested_roots",
            "breakdown",
            "compare_runs",
            "episodes_table",
            "finished_keys",
            "run_spending",
            "leaderboard",
            "leaderboard_table",
            "list_runs",
            "mean_and_standard_error",
            "mean_pass_at_k",
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
            "run_log_path",
            "run_state",
            "steps_table",
            "terminal_view",
            "to_rich_table",
            "unpack_run",
            "wilson_interval",
            "write_manifest",
        ]
    )
    for name in crabray.results.__all__:
        assert hasattr(crabray.results, name), name


def test_results_imports_only_the_result_model_and_errors():
    package = Path(crabray.results.__file__).parent
    for module in package.rglob("*.py"):
        for node in ast.walk(ast.parse(module.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            elif isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            else:
                continue
            for name in names:
                if name == "crabray" or name.startswith("crabray."):
                    assert name in ALLOWED_OUTSIDE or name.startswith("crabray.results"), (
                        f"{module.name} imports {name}"
                    )
