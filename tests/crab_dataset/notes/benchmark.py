"""The dataset's environment: ``ubuntu`` as a local sandbox with the shell and file actions.

Without this module, ``ubuntu`` would be CRAB's Ubuntu desktop on the crab-desktop image.
"""

from crabray import BenchmarkConfig, EnvironmentConfig
from crabray.actions import FILE_ACTIONS, SHELL_ACTIONS

ubuntu = EnvironmentConfig(
    name="ubuntu",
    backend="local",
    description="A Linux machine (crabray's local sandbox).",
    action_space=[*SHELL_ACTIONS, *FILE_ACTIONS],
)
benchmark = BenchmarkConfig(name="notes", tasks=[], environments=[ubuntu])
