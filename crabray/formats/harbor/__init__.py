"""Harbor suites: Terminal-Bench 2.0's task format, loaded as shipped.

A task folder holds ``task.toml`` (limits and resources), ``instruction.md``
(what the agent is told), ``environment/Dockerfile`` (its container),
``tests/test.sh`` (the verifier, which writes ``/logs/verifier/reward.txt``
or ``reward.json`` after the agent is done) and ``solution/solve.sh`` (what
the oracle runs). See ``docs/harbor.md`` for what maps onto what.
"""

from crabray.formats.harbor._checks import HarborTask, is_harbor_task
from crabray.formats.harbor._config import HarborTaskConfig, read_task_toml
from crabray.formats.harbor._loader import (
    BACKENDS,
    DEFAULT_BACKEND,
    FORMAT,
    HarborFormat,
    check_backend,
    detect,
    load,
)
from crabray.formats.harbor._verifier import REWARD_JSON, REWARD_TXT, verify

__all__ = [
    "BACKENDS",
    "DEFAULT_BACKEND",
    "FORMAT",
    "REWARD_JSON",
    "REWARD_TXT",
    "HarborFormat",
    "HarborTask",
    "HarborTaskConfig",
    "check_backend",
    "detect",
    "is_harbor_task",
    "load",
    "read_task_toml",
    "verify",
]
