"""The authoring model: actions, evaluators, graphs, environments, tasks, benchmarks.

Pure Python (pydantic and networkx): nothing here imports Ray or Docker.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from crabray.core.lazy import lazy_getattr

if TYPE_CHECKING:
    from crabray.core.actions import KEPT_PARAMS, Action, action
    from crabray.core.benchmark import BenchmarkConfig, BoundAction
    from crabray.core.env import AgentSignals, Env
    from crabray.core.environment import (
        ROOT_ENV,
        Environment,
        EnvironmentConfig,
        create_environment,
    )
    from crabray.core.evaluators import Evaluator, evaluator
    from crabray.core.graph import GraphEvaluator, GraphProgress
    from crabray.core.models.action import ClosedAction
    from crabray.core.result import CheckpointScore, Score
    from crabray.core.retry import RetryPolicy
    from crabray.core.session import Benchmark, StepResult, create_benchmark
    from crabray.core.subtask import SubTask
    from crabray.core.task import Task
    from crabray.core.task_generator import TaskGenerator

# Loaded on first use (PEP 562): importing one module of the package (errors,
# result, retry: every ``crabray`` command does) does not import the authoring
# model, pydantic's schemas of it, docstring_parser and networkx with it.
_LAZY = {
    "KEPT_PARAMS": "crabray.core.actions",
    "Action": "crabray.core.actions",
    "action": "crabray.core.actions",
    "Evaluator": "crabray.core.evaluators",
    "evaluator": "crabray.core.evaluators",
    "Benchmark": "crabray.core.session",
    "StepResult": "crabray.core.session",
    "BenchmarkConfig": "crabray.core.benchmark",
    "BoundAction": "crabray.core.benchmark",
    "create_benchmark": "crabray.core.session",
    "AgentSignals": "crabray.core.env",
    "Env": "crabray.core.env",
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


__getattr__ = lazy_getattr(__name__, _LAZY)


__all__ = [
    "KEPT_PARAMS",
    "ROOT_ENV",
    "Action",
    "AgentSignals",
    "Benchmark",
    "BenchmarkConfig",
    "BoundAction",
    "CheckpointScore",
    "ClosedAction",
    "Env",
    "Environment",
    "EnvironmentConfig",
    "Evaluator",
    "GraphEvaluator",
    "GraphProgress",
    "RetryPolicy",
    "Score",
    "StepResult",
    "SubTask",
    "Task",
    "TaskGenerator",
    "action",
    "create_benchmark",
    "create_environment",
    "evaluator",
]
