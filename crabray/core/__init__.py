"""The authoring model: actions, evaluators, graphs, environments, tasks, benchmarks.

Pure Python (pydantic and networkx): nothing here imports Ray or Docker.
"""

from __future__ import annotations

import sys
import types
from typing import TYPE_CHECKING, Any

from crabray.core.lazy import lazy_getattr

if TYPE_CHECKING:
    from crabray.core.action import KEPT_PARAMS, Action, action
    from crabray.core.benchmark import BenchmarkConfig, BoundAction, create_benchmark
    from crabray.core.environment import (
        ROOT_ENV,
        Environment,
        EnvironmentConfig,
        create_environment,
    )
    from crabray.core.evaluator import Evaluator, evaluator
    from crabray.core.graph import GraphEvaluator, GraphProgress
    from crabray.core.models.action import ClosedAction
    from crabray.core.result import CheckpointScore, Score
    from crabray.core.retry import RetryPolicy
    from crabray.core.subtask import SubTask
    from crabray.core.task import Task
    from crabray.core.task_generator import TaskGenerator

# Loaded on first use (PEP 562): importing one module of the package (errors,
# result, retry: every ``crabray`` command does) does not import the authoring
# model, pydantic's schemas of it, docstring_parser and networkx with it.
_LAZY = {
    "KEPT_PARAMS": "crabray.core.action",
    "Action": "crabray.core.action",
    "action": "crabray.core.action",
    "Evaluator": "crabray.core.evaluator",
    "evaluator": "crabray.core.evaluator",
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


_SHADOWED = frozenset({"action", "evaluator"})
"""Functions named like the submodule that defines them."""


class _Package(types.ModuleType):
    """This package's module type: the decorators ``action`` and ``evaluator`` keep their names.

    Importing a submodule binds it as an attribute of its package, so once
    ``crabray.core.action`` is imported (by ``crabray.core.benchmark``, say),
    ``from crabray.core import action`` would give the module instead of the
    decorator. The binding of those two submodules is dropped here: they stay
    reachable under ``sys.modules`` (``from crabray.core.action import ...``).
    """

    def __setattr__(self, name: str, value: Any) -> None:
        if name in _SHADOWED and isinstance(value, types.ModuleType):
            return
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package


__getattr__ = lazy_getattr(__name__, _LAZY)


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
