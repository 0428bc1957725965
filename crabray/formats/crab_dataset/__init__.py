"""CRAB composed-task datasets: ``SubTask`` modules and task JSON files, as crab-benchmark-v0.

See ``docs/crab-datasets.md`` for the layout and how its tasks are built.
"""

from crabray.formats.crab_dataset._compose import ComposedTaskDocument, SolutionStep, SubTaskUse
from crabray.formats.crab_dataset._loader import (
    DEFAULT_ENV,
    FORMAT,
    CrabDatasetFormat,
    detect,
    load,
)
from crabray.formats.crab_dataset._missing import MissingModuleError

__all__ = [
    "DEFAULT_ENV",
    "FORMAT",
    "ComposedTaskDocument",
    "CrabDatasetFormat",
    "MissingModuleError",
    "SolutionStep",
    "SubTaskUse",
    "detect",
    "load",
]
