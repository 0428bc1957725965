"""The Ray layer: environment actors, pools, the episode job, the scheduler, the runner."""

from crabray.cluster.progress import SweepProgress
from crabray.cluster.runner import RunOptions, RunSummary, run_suite

__all__ = ["RunOptions", "RunSummary", "SweepProgress", "run_suite"]
