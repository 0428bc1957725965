"""CRAB's ``crab.core.decorators`` path: the ``action`` and ``evaluator`` decorators."""

from crabray.core.action import action
from crabray.core.evaluator import evaluator

__all__ = ["action", "evaluator"]
