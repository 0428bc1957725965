"""Shipped setup functions for task-JSON ``config`` entries (and the older ``type`` steps).

Local paths are relative to the task folder; remote paths are in the sandbox
(absolute ones such as ``/home/user/Desktop/x`` go to the backend as they are).
A command that exits non-zero fails the setup step, and the episode ends as
``setup_error`` naming the step.
"""

from __future__ import annotations

import shlex
import time
from pathlib import PurePosixPath
from typing import Any

from pydantic import BaseModel, ConfigDict

from crabray.core.commands import command_failure
from crabray.core.errors import CrabrayError
from crabray.core.words import counted
from crabray.formats.task_json._registry import LocalPath, TaskContext, setup_function

DEFAULT_TIMEOUT_SEC = 300.0
MAX_SLEEP_SEC = 600.0


class SetupCommandError(CrabrayError):
    """A setup command ran but failed."""


def _check(result: Any, what: str, timeout_sec: float = 0.0) -> str:
    """The command's stdout, or an error naming it, its exit code, the cause and last lines."""
    if result.timed_out or result.exit_code != 0:
        raise SetupCommandError(
            command_failure(
                what,
                result.exit_code,
                f"{result.stdout}\n{result.stderr}",
                timed_out=result.timed_out,
                timeout_sec=timeout_sec,
            )
        )
    output: str = result.stdout
    return output


@setup_function
def upload_file_to_vm(ctx: TaskContext, local_path: LocalPath, remote_path: str) -> str:
    """Copy a file of the task folder into the sandbox.

    Args:
        local_path: The file, relative to the task folder.
        remote_path: Where it goes in the sandbox.
    """
    ctx.env.put_file(remote_path, ctx.read_local(local_path))
    return f"uploaded {local_path} to {remote_path}"


@setup_function(aliases=("upload_file",))
def download_file(ctx: TaskContext, local_path: LocalPath, path: str) -> str:
    """Put a file of the task folder at ``path`` in the sandbox (no network: the folder is
    the only source).

    Args:
        local_path: The file, relative to the task folder.
        path: Where it goes in the sandbox.
    """
    ctx.env.put_file(path, ctx.read_local(local_path))
    return f"placed {local_path} at {path}"


class DownloadItem(BaseModel):
    """One file of the older ``download`` step: ``url`` names a file of the task folder."""

    model_config = ConfigDict(extra="forbid")

    url: str
    path: str


@setup_function(name="download")
def download_files(ctx: TaskContext, files: list[DownloadItem]) -> str:
    """The older variant's ``download`` step: each ``url`` is a file of the task folder.

    Args:
        files: The files, each ``{"url": <task-folder file>, "path": <sandbox path>}``.
    """
    for item in files:
        ctx.env.put_file(item.path, ctx.read_local(item.url))
    return f"placed {counted(len(files), 'file')}"


DEFAULT_SCRIPT_FOLDER = "/home/user/Desktop"
"""Where ``upload_script_and_execute`` puts a script by default, as the GUI-OS repository does."""


def script_destination(local_path: str, remote_path: str) -> PurePosixPath:
    """Where a script goes: ``remote_path`` itself when it ends with the script's name,
    else the folder ``remote_path`` (the GUI-OS repository's meaning of the argument)."""
    name = PurePosixPath(local_path).name
    where = PurePosixPath(remote_path)
    return where if where.name == name else where / name


@setup_function
def upload_script_and_execute(
    ctx: TaskContext,
    local_path: LocalPath,
    remote_path: str = DEFAULT_SCRIPT_FOLDER,
    interpreter: str = "bash",
    timeout_sec: float = DEFAULT_TIMEOUT_SEC,
) -> str:
    """Copy a script of the task folder into the sandbox and run it there, in its folder.

    Args:
        local_path: The script, relative to the task folder.
        remote_path: The script's path in the sandbox when it ends with the script's
            name, else the folder it goes into (``/home/user/Desktop`` by default).
        interpreter: The program that runs it.
        timeout_sec: Seconds before it is killed.
    """
    where = script_destination(local_path, remote_path)
    ctx.env.put_file(str(where), ctx.read_local(local_path))
    command = (
        f"cd {shlex.quote(str(where.parent))} && "
        f"{shlex.quote(interpreter)} {shlex.quote('./' + where.name)}"
    )
    result = ctx.env.exec(command, timeout_sec=timeout_sec)
    return _check(result, f"script {where} (run with {interpreter})", timeout_sec)


@setup_function(aliases=("command",))
def execute(
    ctx: TaskContext,
    command: str | list[str],
    timeout_sec: float = DEFAULT_TIMEOUT_SEC,
    shell: bool = True,
) -> str:
    """Run a command in the sandbox and wait for it; it must exit 0.

    Args:
        command: A shell command line, or an argument list.
        timeout_sec: Seconds before it is killed.
        shell: Accepted for compatibility; a string always runs through the shell.
    """
    line = command if isinstance(command, str) else shlex.join(command)
    return _check(ctx.env.exec(command, timeout_sec=timeout_sec), f"command {line!r}", timeout_sec)


@setup_function
def launch(ctx: TaskContext, command: str | list[str], shell: bool = True) -> str:
    """Start a program in the background of the sandbox and return at once.

    Args:
        command: The program and its arguments (a string runs through the shell).
        shell: Accepted for compatibility.
    """
    line = command if isinstance(command, str) else shlex.join(command)
    result = ctx.env.exec(f"nohup sh -c {shlex.quote(line)} >/dev/null 2>&1 &", timeout_sec=30)
    return _check(result, f"launch {line!r}", 30)


@setup_function(name="open")
def open_file(ctx: TaskContext, path: str) -> str:
    """Open a file in the sandbox with its desktop application (``xdg-open``) when there
    is one; a sandbox without a desktop just checks the file exists.

    Args:
        path: The file in the sandbox.
    """
    quoted = shlex.quote(path)
    command = (
        f'test -e {quoted} && {{ command -v xdg-open >/dev/null 2>&1 && [ -n "$DISPLAY" ] '
        f"&& (nohup xdg-open {quoted} >/dev/null 2>&1 &) ; true; }}"
    )
    return _check(ctx.env.exec(command, timeout_sec=30), f"open {path}", 30)


@setup_function
def sleep(ctx: TaskContext, seconds: float) -> str:
    """Wait (at most ten minutes), e.g. for a launched program to come up.

    Args:
        seconds: How long.
    """
    time.sleep(max(0.0, min(seconds, MAX_SLEEP_SEC)))
    return f"slept {seconds:g} s"
