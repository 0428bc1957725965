"""Shipped action libraries, written only against the backend interface."""

from crabray.actions.checks import (
    command_output_contains,
    command_succeeds,
    file_contains,
    file_equals,
    path_exists,
    submission_equals,
)
from crabray.actions.files import file_exists, list_files, read_file, write_file
from crabray.actions.root import ROOT_ACTIONS, complete, fail, submit
from crabray.actions.shell import run_command

SHELL_ACTIONS = (run_command,)
FILE_ACTIONS = (read_file, write_file, list_files, file_exists)

__all__ = [
    "FILE_ACTIONS",
    "ROOT_ACTIONS",
    "SHELL_ACTIONS",
    "command_output_contains",
    "command_succeeds",
    "complete",
    "fail",
    "file_contains",
    "file_equals",
    "file_exists",
    "list_files",
    "path_exists",
    "read_file",
    "run_command",
    "submission_equals",
    "submit",
    "write_file",
]
