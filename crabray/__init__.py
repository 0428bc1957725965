"""crabray: benchmarks for computer-using AI agents, authored in the CRAB style, run on Ray.

The authoring API is importable from here, CRAB-compatible: a CRAB benchmark
ports by changing its imports.

Example:
    >>> from crabray import BenchmarkConfig, EnvironmentConfig, Task, action, evaluator
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from crabray.core.lazy import lazy_getattr

if TYPE_CHECKING:
    from crabray.core import (
        Action,
        Benchmark,
        BenchmarkConfig,
        ClosedAction,
        Env,
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
    from crabray.run import RunSpec, RunSummary, evaluate

    __version__: str


def __getattr__(name: str) -> Any:
    """Load the authoring API on first use (PEP 562).

    A command that needs none of it, such as `crabray leaderboard`, does not pay
    for networkx and the core models.
    """
    if name != "__version__":
        return _authoring(name)
    # One version source: the installed package's metadata, from pyproject.toml.
    from importlib.metadata import version

    globals()[name] = value = version("crabray")
    return value


__all__ = [
    "Action",
    "Benchmark",
    "BenchmarkConfig",
    "ClosedAction",
    "CrabrayError",
    "Env",
    "Environment",
    "EnvironmentConfig",
    "Evaluator",
    "GraphEvaluator",
    "RunSpec",
    "RunSummary",
    "SubTask",
    "Task",
    "TaskGenerator",
    "__version__",
    "action",
    "create_benchmark",
    "create_environment",
    "evaluate",
    "evaluator",
]

_ELSEWHERE = {
    "CrabrayError": "crabray.core.errors",
    "evaluate": "crabray.run.api",
    "RunSpec": "crabray.run.spec",
    "RunSummary": "crabray.run.runner",
}
_authoring = lazy_getattr(
    __name__,
    {name: "crabray.core" for name in __all__ if name not in (*_ELSEWHERE, "__version__")}
    | _ELSEWHERE,
)
