"""CRAB's ``crab.core.models.evaluator`` path: ``Evaluator``."""

from crabray.core.evaluators import Evaluator

__all__ = ["Evaluator"]
