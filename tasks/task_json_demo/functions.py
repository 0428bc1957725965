"""The demo suite's own evaluation function, registered beside its tasks.

crabray imports every Python file at a task-JSON suite's root before it
validates the tasks, so ``word_count_score`` is as known as a shipped function.
"""

from __future__ import annotations

from crabray.core.errors import SandboxFileError
from crabray.formats.task_json import TaskContext, evaluation_function


@evaluation_function
def word_count_score(ctx: TaskContext, vm_result: str, words: int) -> float:
    """Partial credit: the share of ``words`` the sandbox text file has, at most 1.

    Args:
        vm_result: The text file in the sandbox.
        words: How many words earn full marks.
    """
    try:
        text = ctx.read_sandbox_text(vm_result)
    except SandboxFileError:
        return 0.0
    return min(1.0, len(text.split()) / words)
