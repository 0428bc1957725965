"""The Ray layer: environment actors, pools, the episode job, the scheduler.

What a run does from a suite path to rows on disk (``run_suite``) lives one
layer up, in ``crabray.run``: this package knows nothing of the results dataset.
"""

from crabray.cluster.scheduler import SweepProgress

__all__ = ["SweepProgress"]
