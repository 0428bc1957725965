"""The Ray layer: environment actors, pools, the episode job, the scheduler, the runner.

The names below load on first use: importing ``crabray.cluster.nodes`` must
not import Ray, because Ray reads ``RAY_AUTH_MODE`` once, when it is
imported, and ``nodes.use_token_auth`` has to set it first.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from crabray.cluster.progress import SweepProgress
    from crabray.cluster.runner import RunOptions, RunSummary, run_suite

_LAZY = {
    "RunOptions": "crabray.cluster.runner",
    "RunSummary": "crabray.cluster.runner",
    "run_suite": "crabray.cluster.runner",
    "SweepProgress": "crabray.cluster.progress",
}


def __getattr__(name: str) -> Any:
    if name not in _LAZY:
        raise AttributeError(f"module 'crabray.cluster' has no attribute '{name}'")
    return getattr(importlib.import_module(_LAZY[name]), name)


__all__ = ["RunOptions", "RunSummary", "SweepProgress", "run_suite"]
