"""The authoring model: actions, evaluators, graphs, environments, tasks, benchmarks.

Pure Python (pydantic and networkx): nothing here imports Ray or Docker.
"""

from crabray.core.action import KEPT_PARAMS, Action, action
from crabray.core.benchmark import BenchmarkConfig, BoundAction
from crabray.core.environment import ROOT_ENV, EnvironmentConfig
from crabray.core.evaluator import Evaluator, evaluator
from crabray.core.graph import GraphEvaluator, GraphProgress
from crabray.core.result import CheckpointScore, Score
from crabray.core.retry import RetryPolicy
from crabray.core.task import Task

__all__ = [
    "KEPT_PARAMS",
    "ROOT_ENV",
    "Action",
    "BenchmarkConfig",
    "BoundAction",
    "CheckpointScore",
    "EnvironmentConfig",
    "Evaluator",
    "GraphEvaluator",
    "GraphProgress",
    "RetryPolicy",
    "Score",
    "Task",
    "action",
    "evaluator",
]
