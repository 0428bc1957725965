"""A run: one suite, its agents and options, from the command line (or Python) to rows on disk.

``settings`` holds a run's settings and the run file; ``runner`` loads and
checks the suite, opens or resumes its results and hands the episodes to the
scheduler (``run_suite``); ``api`` is the same run from Python
(``evaluate``); ``grade`` grades one task with handed-in files.
Names load on first use, so that the command line's ``--help`` does not pay
for Ray, pandas and the suite loaders.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from crabray.core.lazy import lazy_getattr

if TYPE_CHECKING:
    from crabray.run.api import evaluate
    from crabray.run.grade import Grade, ResultFile, grade_task, parse_result_file
    from crabray.run.runner import (
        RunOptions,
        RunSummary,
        check_suite,
        load_checked_suite,
        run_suite,
    )
    from crabray.run.settings import (
        DEFAULT_RESULTS,
        RunConfig,
        RunSettings,
        load_run_config,
        merge_overrides,
    )

_NAMES = {
    "evaluate": "crabray.run.api",
    "Grade": "crabray.run.grade",
    "ResultFile": "crabray.run.grade",
    "grade_task": "crabray.run.grade",
    "parse_result_file": "crabray.run.grade",
    "RunOptions": "crabray.run.runner",
    "RunSummary": "crabray.run.runner",
    "check_suite": "crabray.run.runner",
    "load_checked_suite": "crabray.run.runner",
    "run_suite": "crabray.run.runner",
    "DEFAULT_RESULTS": "crabray.run.settings",
    "RunConfig": "crabray.run.settings",
    "RunSettings": "crabray.run.settings",
    "load_run_config": "crabray.run.settings",
    "merge_overrides": "crabray.run.settings",
}
__getattr__ = lazy_getattr(__name__, _NAMES)
__all__ = [
    "DEFAULT_RESULTS",
    "Grade",
    "ResultFile",
    "RunConfig",
    "RunOptions",
    "RunSettings",
    "RunSummary",
    "check_suite",
    "evaluate",
    "grade_task",
    "load_checked_suite",
    "load_run_config",
    "merge_overrides",
    "parse_result_file",
    "run_suite",
]
