"""A run: one suite, its agents and options, from the command line (or Python) to rows on disk.

``spec`` holds the one description of a run (``RunSpec``) and the run file;
``resume`` completes a resume's from the run's manifest; ``runner`` loads and
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
        RunSummary,
        check_suite,
        load_checked_suite,
        run_suite,
    )
    from crabray.run.spec import (
        DEFAULT_RESULTS,
        AgentsToRun,
        ResultsTo,
        RunLimits,
        RunSpec,
        WhatToRun,
        load_run_spec,
    )

_NAMES = {
    "evaluate": "crabray.run.api",
    "Grade": "crabray.run.grade",
    "ResultFile": "crabray.run.grade",
    "grade_task": "crabray.run.grade",
    "parse_result_file": "crabray.run.grade",
    "RunSummary": "crabray.run.runner",
    "check_suite": "crabray.run.runner",
    "load_checked_suite": "crabray.run.runner",
    "run_suite": "crabray.run.runner",
    "DEFAULT_RESULTS": "crabray.run.spec",
    "AgentsToRun": "crabray.run.spec",
    "ResultsTo": "crabray.run.spec",
    "RunLimits": "crabray.run.spec",
    "RunSpec": "crabray.run.spec",
    "WhatToRun": "crabray.run.spec",
    "load_run_spec": "crabray.run.spec",
}
__getattr__ = lazy_getattr(__name__, _NAMES)
__all__ = [
    "DEFAULT_RESULTS",
    "AgentsToRun",
    "Grade",
    "ResultFile",
    "ResultsTo",
    "RunLimits",
    "RunSpec",
    "RunSummary",
    "WhatToRun",
    "check_suite",
    "evaluate",
    "grade_task",
    "load_checked_suite",
    "load_run_spec",
    "parse_result_file",
    "run_suite",
]
