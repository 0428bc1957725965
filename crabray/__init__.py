"""crabray: benchmarks for computer-using AI agents, authored in the CRAB style, run on Ray.

The authoring API is importable from here, CRAB-compatible: a CRAB benchmark
ports by changing its imports.

Example:
    >>> from crabray import BenchmarkConfig, EnvironmentConfig, Task, action, evaluator
"""

from importlib.metadata import version as _version

from crabray.core import (
    Action,
    BenchmarkConfig,
    EnvironmentConfig,
    Evaluator,
    GraphEvaluator,
    Task,
    action,
    evaluator,
)
from crabray.core.errors import CrabrayError

# One version source: the installed package's metadata, from pyproject.toml.
__version__ = _version("crabray")

__all__ = [
    "Action",
    "BenchmarkConfig",
    "CrabrayError",
    "EnvironmentConfig",
    "Evaluator",
    "GraphEvaluator",
    "Task",
    "__version__",
    "action",
    "evaluator",
]
