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
    ClosedAction,
    Environment,
    EnvironmentConfig,
    Evaluator,
    GraphEvaluator,
    SubTask,
    Task,
    TaskGenerator,
    action,
    create_benchmark,
    create_environment,
    evaluator,
)
from crabray.core.errors import CrabrayError

# One version source: the installed package's metadata, from pyproject.toml.
__version__ = _version("crabray")

__all__ = [
    "Action",
    "BenchmarkConfig",
    "ClosedAction",
    "CrabrayError",
    "Environment",
    "EnvironmentConfig",
    "Evaluator",
    "GraphEvaluator",
    "SubTask",
    "Task",
    "TaskGenerator",
    "__version__",
    "action",
    "create_benchmark",
    "create_environment",
    "evaluator",
]
