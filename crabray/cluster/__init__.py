"""The Ray layer, in three layers: the sweep over the actors over Ray itself.

- ``sweep``: what schedules a run's episodes (the scheduler, its settings,
  adaptive concurrency, progress, the status board);
- ``actors``: environment actors, their pools and pipelines, the episode call;
- ``runtime``: Ray itself (the connection or local instance, token auth, nodes,
  placement, jobs submitted to a head, the end of a run on every node).

Each imports only the ones below it (the ``cluster-layers`` contract in
``pyproject.toml``). What a run does from a suite path to rows on disk
(``run_suite``) lives one layer up, in ``crabray.run``: this package knows
nothing of the results dataset.

The names below load on first use: importing ``crabray.cluster.runtime.nodes``
must not import Ray, because Ray reads ``RAY_AUTH_MODE`` once, when it is
imported, and ``token_auth.use_token_auth`` has to set it first.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from crabray.core.lazy import lazy_getattr

if TYPE_CHECKING:
    from crabray.cluster.sweep.progress import SweepProgress

_LAZY = {"SweepProgress": "crabray.cluster.sweep.progress"}


__getattr__ = lazy_getattr(__name__, _LAZY)


__all__ = ["SweepProgress"]
