"""CRAB's ``crab.core.models.evaluator`` path: ``Evaluator``."""

from crabray.core.evaluator import Evaluator

__all__ = ["Evaluator"]
