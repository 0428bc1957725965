"""CRAB's ``crab.core.graph_evaluator`` path: ``GraphEvaluator`` and ``Evaluator``."""

from crabray.core.evaluators import Evaluator
from crabray.core.graph import GraphEvaluator

__all__ = ["Evaluator", "GraphEvaluator"]
