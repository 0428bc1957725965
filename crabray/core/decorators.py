"""CRAB's ``crab.core.decorators`` path: the ``action`` and ``evaluator`` decorators."""

from crabray.core.actions import action
from crabray.core.evaluators import evaluator

__all__ = ["action", "evaluator"]
