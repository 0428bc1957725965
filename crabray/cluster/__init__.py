"""The Ray layer: environment actors, pools, the episode call, the scheduler.

What a run does from a suite path to rows on disk (``run_suite``) lives one
layer up, in ``crabray.run``: this package knows nothing of the results dataset.

The names below load on first use: importing ``crabray.cluster.nodes`` must
not import Ray, because Ray reads ``RAY_AUTH_MODE`` once, when it is
imported, and ``token_auth.use_token_auth`` has to set it first.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from crabray.core.lazy import lazy_getattr

if TYPE_CHECKING:
    from crabray.cluster.progress import SweepProgress

_LAZY = {"SweepProgress": "crabray.cluster.progress"}


__getattr__ = lazy_getattr(__name__, _LAZY)


__all__ = ["SweepProgress"]
