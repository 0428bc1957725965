"""CRAB's ``crab.core.models.config`` path: ``EnvironmentConfig`` and ``BenchmarkConfig``."""

from crabray.core.benchmark import BenchmarkConfig
from crabray.core.environment import EnvironmentConfig

__all__ = ["BenchmarkConfig", "EnvironmentConfig"]
