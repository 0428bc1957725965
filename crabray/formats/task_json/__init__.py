"""Task-JSON suites: ``examples/<tool>/<id>/<id>.json`` task files and their sibling files.

A task file names its setup (``config``) and grading (``evaluation``, or the
older ``evaluator`` block) as registered functions with JSON arguments; the
loader validates every one before a run and turns each task into an ordinary
``Task`` whose ``scorer`` grades it once after the agent is done (scores may
be fractional). A suite adds its own functions in a Python file at its root
with the decorators exported here. See ``seeds/task-json-format.md``.
"""

from crabray.formats.task_json._loader import (
    DEFAULT_BACKEND,
    FORMAT,
    TaskDocument,
    TaskJsonFormat,
    detect,
    load,
)
from crabray.formats.task_json._registry import (
    LocalPath,
    TaskContext,
    TaskFunction,
    evaluation_function,
    getter,
    lookup,
    metric,
    registered,
    setup_function,
)
from crabray.formats.task_json._summary import summary, summary_path

__all__ = [
    "DEFAULT_BACKEND",
    "FORMAT",
    "LocalPath",
    "TaskContext",
    "TaskDocument",
    "TaskFunction",
    "TaskJsonFormat",
    "detect",
    "evaluation_function",
    "getter",
    "load",
    "lookup",
    "metric",
    "registered",
    "setup_function",
    "summary",
    "summary_path",
]
