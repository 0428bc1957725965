"""Task-folder suites: a folder per task with ``task.md``, ``evaluator.py`` and a Dockerfile.

Each task runs in a container built from its own Dockerfile (the original
base image is replaced by ``crabray/task-base``, or by ``--base-image``); the
services it names in ``dependencies.yml`` are reset through crabray's service
registry (``services.yml``) before it starts, and its ``evaluator.py`` grades
checkpoints in the sandbox after the agent is done, with crabray's own
``scoring`` and ``common`` modules. See ``seeds/task-folder-format.md``.
"""

from crabray.formats.task_folder._checks import CRABRAY_BASE_IMAGE, TaskFiles, from_lines
from crabray.formats.task_folder._grading import EvalResult, checkpoint_score
from crabray.formats.task_folder._loader import (
    BACKENDS,
    DEFAULT_BACKEND,
    FORMAT,
    TaskFolderFormat,
    check_backend,
    detect,
    load,
)
from crabray.formats.task_folder._services import (
    REGISTRY_FILE,
    Service,
    ServiceRegistry,
    load_registry,
    lock_service,
    prepare_service,
    stop_services,
    unlock_service,
)

__all__ = [
    "BACKENDS",
    "CRABRAY_BASE_IMAGE",
    "DEFAULT_BACKEND",
    "FORMAT",
    "REGISTRY_FILE",
    "EvalResult",
    "Service",
    "ServiceRegistry",
    "TaskFiles",
    "TaskFolderFormat",
    "check_backend",
    "checkpoint_score",
    "detect",
    "from_lines",
    "load",
    "load_registry",
    "lock_service",
    "prepare_service",
    "stop_services",
    "unlock_service",
]
