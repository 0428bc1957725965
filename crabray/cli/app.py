"""``crabray``: the command line. It owns the terminal; the library only logs.

This module is the root command: its options, the error handling every
command shares, and where each command group is mounted. The commands live
one group to a module beside it. Heavy imports (Ray, pandas) happen inside
the commands that need them, so ``crabray --help`` and ``crabray tasks`` stay
fast.
"""

from __future__ import annotations

import gc
import logging
import re
import sys
import traceback
from pathlib import Path
from typing import Annotated, Any, get_args

import typer
from typer.core import TyperGroup

from crabray.cli.audit import AUDIT_EXAMPLES, audit
from crabray.cli.cluster import cluster_app
from crabray.cli.envs import envs_app
from crabray.cli.errors import show_error
from crabray.cli.export import EXPORT_EXAMPLES, export
from crabray.cli.llm import llm_app
from crabray.cli.reports import LEADERBOARD_EXAMPLES, VIEW_EXAMPLES, leaderboard, view
from crabray.cli.run import RUN_EXAMPLES, run
from crabray.cli.runs import runs_app
from crabray.cli.tasks import tasks_app
from crabray.cli.terminal import console, errors, safe_text, strip_controls

MAIN_EXAMPLES = """Examples:

  crabray run tasks/demo --agent oracle --agent noop    # results go to results/

  crabray leaderboard --run latest

  crabray view

  crabray tasks validate tasks/demo

Each command's --help shows more.
"""


_VERBOSE = re.compile(r"-v+|--verbose")


class _Commands(TyperGroup):
    """The ``crabray`` group: every command's errors are turned into messages here, once.

    Subcommands (``tasks``, ``runs``, ``cluster``, ``envs``) run inside this
    group's ``invoke``, so no command needs a ``try`` block of its own.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        _quiet_help_option(self)
        _humanize(self)

    def make_context(self, *args: Any, **kwargs: Any) -> Any:
        for param in self.params:  # typer adds the completion options after __init__
            _set_metavar(param)
        return super().make_context(*args, **kwargs)

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        """``-v``/``-vv``/``--verbose`` anywhere on the line mean what they mean first.

        Inspect and Harbor users type ``crabray run ... -v``: the flags are moved
        before the command, where the root option reads them (up to a ``--``).
        """
        end = args.index("--") if "--" in args else len(args)
        verbose = [a for a in args[:end] if _VERBOSE.fullmatch(a)]
        rest = [a for a in args[:end] if not _VERBOSE.fullmatch(a)]
        return super().parse_args(ctx, [*verbose, *rest, *args[end:]])

    def invoke(self, ctx: Any) -> Any:  # typer's vendored click.Context
        try:
            return super().invoke(ctx)
        except (typer.Exit, typer.Abort, typer.TyperException):
            raise  # typer's own: usage errors, exit codes, Ctrl-C
        except Exception as exc:
            code = show_error(exc, errors)
            if code is None:
                raise
            raise typer.Exit(code=code) from exc


app = typer.Typer(
    cls=_Commands,
    name="crabray",
    help="Run benchmarks for computer-using AI agents on Ray; results in Parquet.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)
app.command(epilog=RUN_EXAMPLES)(run)
app.command(epilog=LEADERBOARD_EXAMPLES)(leaderboard)
app.command(epilog=VIEW_EXAMPLES)(view)
app.command(epilog=EXPORT_EXAMPLES)(export)
app.command(epilog=AUDIT_EXAMPLES)(audit)
app.add_typer(tasks_app, name="tasks")
app.add_typer(runs_app, name="runs")
app.add_typer(cluster_app, name="cluster")
app.add_typer(envs_app, name="envs")
app.add_typer(llm_app, name="llm")


def main_entry() -> None:
    """The ``crabray`` command: ``app``, then an exit that does not collect its heap.

    Python's exit runs the cyclic garbage collector over every object still
    alive (the loaded suite, Ray's and pyarrow's modules): 0.35 s at the end
    of a 2,000-task run, a sixth of a one-task run on a running cluster.
    Frozen, they are simply released with the process; atexit handlers and
    file closes run as before.
    """
    try:
        app(prog_name="crabray")
    except Exception as exc:  # a bug (show_error words every other error): its traceback
        _print_traceback(exc)
        raise SystemExit(1) from None
    finally:
        gc.freeze()


def _print_traceback(exc: BaseException) -> None:
    """A bug's traceback as Python prints it, stripped of control sequences: its message
    may quote an agent's or a suite's text, which must not drive the terminal."""
    sys.stderr.write(strip_controls("".join(traceback.format_exception(exc))))
    sys.stderr.flush()


def _print_version(value: bool) -> None:
    if value:
        from crabray import __version__

        console.print(f"crabray {__version__}", highlight=False)
        raise typer.Exit()


@app.callback(epilog=MAIN_EXAMPLES)
def main(
    verbose: Annotated[
        int, typer.Option("--verbose", "-v", count=True, help="-v for info, -vv for debug logs.")
    ] = 0,
    version: Annotated[
        bool,
        typer.Option(
            "--version", is_eager=True, callback=_print_version, help="Print the version and exit."
        ),
    ] = False,
) -> None:
    """Run benchmarks for computer-using AI agents on Ray; results in Parquet."""
    level = {0: logging.WARNING, 1: logging.INFO}.get(verbose, logging.DEBUG)
    handler = _SentenceHandler()
    handler.setLevel(level)  # a run's log file takes crabray's info records whatever -v says
    logging.basicConfig(level=level, format="%(message)s", handlers=[handler], force=True)
    logging.getLogger("ray").setLevel(max(level, logging.ERROR))


_RUN_PANELS = ("What to run", "Agents", "Limits", "Execution", "Results")
"""The panels of ``crabray run --help``, in order: the titles of ``RunSpec``'s parts, which
each option of a run's field takes from its field (``crabray.cli.options``)."""

_COMMAND_PANELS = {
    "suite": "What to run",
    "config": "Results",
    "verified_only": "Results",
    "detach": "Execution",
    "sync_every": "Execution",
}
"""The panels of ``run``'s arguments and options that are not a field of the run."""

_METAVARS = {int: "N", float: "SECONDS", Path: "PATH"}


_NAMED = {"out": "DIR", "out_dir": "DIR", "resume": "RUN_ID", "run": "RUN_ID", "address": "ADDRESS"}
"""Metavars that say more than the option's name or type."""


def _humanize(group: Any) -> None:
    """Help that reads as a person writes it, on every command under ``group``.

    Flags and counts show no value (typer would print ``<bool>``, ``-v <int>``),
    other options an upper-case word (``N``, ``PATH``, ``ID``) rather than a
    Python type such as ``<list[str]>``; ``run``'s options go in panels.
    """
    for name, command in group.commands.items():
        if hasattr(command, "commands"):
            _humanize(command)
        for param in command.params:
            _set_metavar(param)
        _quiet_help_option(command)
        if name == "run" and group.name == "crabray":
            _in_panels(command)


def _set_metavar(param: Any) -> None:
    if param.param_type_name == "argument":
        # SUITE, not "suite <path>": the help text says what it is.
        param.metavar = param.metavar or (param.name or "value").upper()
        param.display_type_rich = lambda ctx: None
        return
    if param.param_type_name != "option" or param.metavar is not None:
        return
    desc = getattr(param, "type_descriptor", None)
    if param.is_flag or param.count or (desc is not None and desc.annotation is bool):
        param.metavar = ""
    elif param.name in _NAMED:
        param.metavar = _NAMED[param.name]
    elif desc is not None and not desc.is_choice:
        inner = get_args(desc.annotation)[0] if desc.is_list else desc.annotation
        word = param.opts[0].lstrip("-") if param.opts else param.name or "value"
        param.metavar = _METAVARS.get(inner, word.upper().replace("-", "_"))


def _quiet_help_option(command: Any) -> None:
    """``--help`` is a flag too: no ``<bool>`` after it (click makes it on demand)."""
    make = command.get_help_option

    def get_help_option(ctx: Any) -> Any:
        option = make(ctx)
        if option is not None:
            option.metavar = ""
        return option

    command.get_help_option = get_help_option


def _in_panels(command: Any) -> None:
    """``run``'s options in their parts' panels, the panels in ``_RUN_PANELS``' order."""
    order = list(_RUN_PANELS)
    for param in command.params:
        panel = getattr(param, "rich_help_panel", None) or _COMMAND_PANELS.get(param.name)
        param.rich_help_panel = panel
    command.params.sort(
        key=lambda p: order.index(p.rich_help_panel) if p.rich_help_panel else len(order)
    )


class _SentenceHandler(logging.Handler):
    """Log records on the terminal as sentences: ``warning: ...``, no date, no logger path.

    A user reads a warning, not a log line; ``-vv`` adds the logger's name, which
    is what a developer looks for.
    """

    def emit(self, record: logging.LogRecord) -> None:
        try:
            message = self.format(record)
            level = record.levelname.lower()
            style = {"warning": "yellow", "error": "red", "critical": "red"}.get(level, "dim")
            where = f" ({record.name})" if record.levelno <= logging.DEBUG else ""
            errors.print(
                f"[{style}]{level}:[/] {safe_text(message)}{safe_text(where)}",
                highlight=False,
                soft_wrap=True,
            )
        except Exception:
            self.handleError(record)
