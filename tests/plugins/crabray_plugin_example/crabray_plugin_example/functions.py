"""Task-JSON functions every suite can use once this plugin is installed."""

from __future__ import annotations

from crabray.formats.task_json import TaskContext, evaluation_function


@evaluation_function
def example_file_is_nonempty(ctx: TaskContext, vm_path: str) -> bool:
    """The sandbox file ``vm_path`` holds at least one byte."""
    return bool(ctx.read_sandbox(vm_path))
