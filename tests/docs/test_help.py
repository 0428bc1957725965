"""Every command's --help ends with examples (issue 13: "examples in every --help")."""

from __future__ import annotations

import shlex
from typing import Any

import pytest
from typer.main import get_command
from typer.testing import CliRunner

from crabray.cli import app

pytestmark = pytest.mark.slow  # renders every command's --help: seconds


def _commands() -> list[tuple[str, Any]]:
    """Every visible command and group of ``crabray``, with its command path."""
    root = get_command(app)
    found: list[tuple[str, Any]] = []

    def walk(command: Any, ctx: Any) -> None:
        found.append((ctx.command_path, command))
        if not hasattr(command, "list_commands"):
            return
        for name in command.list_commands(ctx):
            sub = command.get_command(ctx, name)
            if sub is not None and not sub.hidden:
                walk(sub, type(ctx)(sub, parent=ctx, info_name=name))

    walk(root, root.make_context("crabray", ["--help"], resilient_parsing=True))
    return found


def test_every_help_shows_examples() -> None:
    commands = _commands()
    assert len(commands) > 10, [path for path, _ in commands]
    lacking = [path for path, command in commands if "Example" not in (command.epilog or "")]
    assert not lacking, f"--help without examples: {lacking}"


def test_every_example_is_a_command_with_options_that_exist() -> None:
    runner = CliRunner()
    checked = 0
    for path, command in _commands():
        for line in (command.epilog or "").splitlines():
            words = line.split("#")[0].split()
            while words and "=" in words[0]:
                words = words[1:]  # VAR=value before the program
            if not words or words[0] != "crabray":
                continue  # prose
            args = shlex.split(" ".join(words[1:]))
            done = runner.invoke(app, [*args, "--help"])
            assert done.exit_code == 0, f"{path}'s example `{line.strip()}`:\n{done.output}"
            checked += 1
    assert checked > 10
