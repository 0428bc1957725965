"""CRAB's ``crab.core.models`` path: the authoring models, re-exported."""

from crabray.core.models.action import Action, ClosedAction
from crabray.core.models.config import BenchmarkConfig, EnvironmentConfig
from crabray.core.models.evaluator import Evaluator
from crabray.core.models.task import SubTask, Task
from crabray.core.session import StepResult

__all__ = [
    "Action",
    "BenchmarkConfig",
    "ClosedAction",
    "EnvironmentConfig",
    "Evaluator",
    "StepResult",
    "SubTask",
    "Task",
]
