"""The authoring model: actions, evaluators, graphs, environments, tasks, benchmarks.

Pure Python (pydantic and networkx): nothing here imports Ray or Docker.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

# Eager: the functions ``action`` and ``evaluator`` share their names with their
# submodules, which would otherwise shadow them once imported.
from crabray.core.action import KEPT_PARAMS, Action, action
from crabray.core.evaluator import Evaluator, evaluator

if TYPE_CHECKING:
    from crabray.core.benchmark import BenchmarkConfig, BoundAction, create_benchmark
    from crabray.core.environment import (
        ROOT_ENV,
        Environment,
        EnvironmentConfig,
        create_environment,
    )
    from crabray.core.graph import GraphEvaluator, GraphProgress
    from crabray.core.models.action import ClosedAction
    from crabray.core.result import CheckpointScore, Score
    from crabray.core.retry import RetryPolicy
    from crabray.core.subtask import SubTask
    from crabray.core.task import Task
    from crabray.core.task_generator import TaskGenerator

# Loaded on first use (PEP 562): importing one module of the package (errors,
# result) does not import every other one and networkx with them.
_LAZY = {
    "BenchmarkConfig": "crabray.core.benchmark",
    "BoundAction": "crabray.core.benchmark",
    "create_benchmark": "crabray.core.benchmark",
    "ROOT_ENV": "crabray.core.environment",
    "Environment": "crabray.core.environment",
    "EnvironmentConfig": "crabray.core.environment",
    "create_environment": "crabray.core.environment",
    "GraphEvaluator": "crabray.core.graph",
    "GraphProgress": "crabray.core.graph",
    "ClosedAction": "crabray.core.models.action",
    "CheckpointScore": "crabray.core.result",
    "Score": "crabray.core.result",
    "RetryPolicy": "crabray.core.retry",
    "SubTask": "crabray.core.subtask",
    "Task": "crabray.core.task",
    "TaskGenerator": "crabray.core.task_generator",
}


def __getattr__(name: str) -> Any:
    if name not in _LAZY:
        raise AttributeError(f"module 'crabray.core' has no attribute {name!r}")
    value = getattr(importlib.import_module(_LAZY[name]), name)
    globals()[name] = value
    return value


__all__ = [
    "KEPT_PARAMS",
    "ROOT_ENV",
    "Action",
    "BenchmarkConfig",
    "BoundAction",
    "CheckpointScore",
    "ClosedAction",
    "Environment",
    "EnvironmentConfig",
    "Evaluator",
    "GraphEvaluator",
    "GraphProgress",
    "RetryPolicy",
    "Score",
    "SubTask",
    "Task",
    "TaskGenerator",
    "action",
    "create_benchmark",
    "create_environment",
    "evaluator",
]
