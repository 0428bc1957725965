"""The authoring model: actions, evaluators, graphs, environments, tasks, benchmarks.

Pure Python (pydantic and networkx): nothing here imports Ray or Docker.
"""

from crabray.core.action import KEPT_PARAMS, Action, action
from crabray.core.benchmark import BenchmarkConfig, BoundAction, create_benchmark
from crabray.core.environment import ROOT_ENV, Environment, EnvironmentConfig, create_environment
from crabray.core.evaluator import Evaluator, evaluator
from crabray.core.graph import GraphEvaluator, GraphProgress
from crabray.core.models.action import ClosedAction
from crabray.core.result import CheckpointScore, Score
from crabray.core.retry import RetryPolicy
from crabray.core.subtask import SubTask
from crabray.core.task import Task
from crabray.core.task_generator import TaskGenerator

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
