"""Shipped action libraries, written only against the backend interface."""

from crabray.actions.checks import (
    command_output_contains,
    command_succeeds,
    file_contains,
    file_equals,
    path_exists,
    submission_equals,
)
from crabray.actions.desktop import (
    DESKTOP_ACTIONS,
    DESKTOP_OBSERVATIONS,
    click,
    double_click,
    drag,
    hotkey,
    key_press,
    launch_app,
    mouse_move,
    pointer_within,
    right_click,
    screenshot,
    scroll,
    type_text,
    window_exists,
)
from crabray.actions.files import file_exists, list_files, read_file, write_file
from crabray.actions.root import ROOT_ACTIONS, complete, fail, submit
from crabray.actions.shell import run_command

SHELL_ACTIONS = (run_command,)
FILE_ACTIONS = (read_file, write_file, list_files, file_exists)

__all__ = [
    "DESKTOP_ACTIONS",
    "DESKTOP_OBSERVATIONS",
    "FILE_ACTIONS",
    "ROOT_ACTIONS",
    "SHELL_ACTIONS",
    "click",
    "command_output_contains",
    "command_succeeds",
    "complete",
    "double_click",
    "drag",
    "fail",
    "file_contains",
    "file_equals",
    "file_exists",
    "hotkey",
    "key_press",
    "launch_app",
    "list_files",
    "mouse_move",
    "path_exists",
    "pointer_within",
    "read_file",
    "right_click",
    "run_command",
    "screenshot",
    "scroll",
    "submission_equals",
    "submit",
    "type_text",
    "window_exists",
    "write_file",
]
