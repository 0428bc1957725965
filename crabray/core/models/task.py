"""CRAB's ``crab.core.models.task`` path: ``Task`` and ``SubTask``."""

from crabray.core.subtask import SubTask
from crabray.core.task import Task

__all__ = ["SubTask", "Task"]
