"""``crabray tasks``: list, validate and grade the tasks of a suite, with no agent and no Ray."""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.table import Table

from crabray.cli.options import (
    BaseImageOpt,
    IndexOpt,
    LimitOpt,
    OldFormatOpt,
    ServicesOpt,
    SuiteArg,
    SuiteFormatOpt,
    TagOpt,
    TaskOpt,
    known_backend_option,
)
from crabray.cli.options import suite_format as chosen_format
from crabray.cli.terminal import Column, console, errors, fitted_table, plain_text, safe_text
from crabray.core.words import counted, plural

if TYPE_CHECKING:
    from crabray.formats import Suite, SuiteRef

tasks_app = typer.Typer(
    help="Inspect and validate the tasks of a suite.",
    no_args_is_help=True,
    epilog="""Examples:

  crabray tasks list tasks/demo

  crabray tasks validate tasks/demo

  crabray tasks grade tasks/demo hello-file -r hello.txt=hello.txt
""",
)


def _suite_ref(
    suite: Path,
    suite_format: str | None,
    old_format: str | None,
    index: Path | None,
    base_image: str | None,
    services: Path | None,
    backend: str | None = None,
) -> SuiteRef:
    """SUITE and the ``tasks`` commands' suite options, resolved once for each command."""
    from crabray.formats import SuiteOptions

    return SuiteOptions(
        format=chosen_format(suite_format, old_format),
        backend=backend,
        index=None if index is None else str(index),
        base_image=base_image,
        services=None if services is None else str(services),
    ).resolve(suite)


class ListFormat(StrEnum):
    """How ``tasks list`` prints."""

    table = "table"
    json = "json"
    ids = "ids"


@tasks_app.command(
    "list",
    epilog="""Examples:

  crabray tasks list tasks/demo

  crabray tasks list tasks/task_json_demo --index tasks/task_json_demo/test_small.json

  crabray tasks list tasks/demo --tag files --format ids     # one id a line

  crabray run tasks/demo -a oracle $(crabray tasks list tasks/demo --format ids | sed 's/^/-t /')
""",
)
def tasks_list(
    suite: SuiteArg,
    task: TaskOpt = None,
    tag: TagOpt = None,
    limit: LimitOpt = None,
    output: Annotated[
        ListFormat,
        typer.Option(
            "--format",
            help="table (full ids, folded, never cut), json (a list of objects) or ids "
            "(one a line, for --task).",
        ),
    ] = ListFormat.table,
    suite_format: SuiteFormatOpt = None,
    index: IndexOpt = None,
    base_image: BaseImageOpt = None,
    services: ServicesOpt = None,
) -> None:
    """List the tasks of SUITE: id, environments, evaluator size, limits, tags."""
    import json

    from crabray.formats import load_suite
    from crabray.run.selection import select_tasks

    loaded = load_suite(_suite_ref(suite, suite_format, None, index, base_image, services))
    rows = [_task_row(loaded, task_id) for task_id in select_tasks(loaded, task, tag, limit)]
    if output is ListFormat.ids:
        for row in rows:
            print(plain_text(row["task"]))  # plain: no wrapping, no markup, whatever the width
        return
    if output is ListFormat.json:
        print(json.dumps(rows, indent=2))
        return
    title = f"{safe_text(loaded.name)} ({len(rows)} of {counted(len(loaded.entries), 'task')})"
    cells = [[safe_text(_cell(row[name])) for name in _TASK_COLUMNS] for row in rows]
    columns = [_TASK_COLUMNS[name] for name in _TASK_COLUMNS]
    console.print(fitted_table(title, columns, cells, console.width))
    for line in loaded.unsupported_reasons():
        console.print(f"[yellow]unsupported[/] {safe_text(line)}")


_TASK_COLUMNS = {
    # The id is what --task takes: whole, folded only if the terminal is narrower.
    "task": Column("task", whole=True),
    "benchmark": Column("benchmark", drop=3),  # the title names the suite
    "environments": Column("environments"),
    "evaluators": Column("evaluators", whole=True, drop=1),
    "max_steps": Column("max steps", whole=True, drop=2),
    "tags": Column("tags"),
}
"""``tasks list``'s columns, by the keys of ``_task_row``: what a narrow terminal leaves
out first has the highest ``drop``."""


def _task_row(loaded: Suite, task_id: str) -> dict[str, Any]:
    """One task as ``tasks list`` shows it (the keys are the table's columns and JSON's)."""
    entry = loaded.entries[task_id]
    return {
        "task": task_id,
        "benchmark": entry.benchmark.name,
        "environments": [e.name for e in entry.benchmark.task_environments(entry.task)],
        "evaluators": len(entry.task.evaluators),
        "max_steps": entry.benchmark.step_limit_of(entry.task),
        "tags": list(entry.task.tags),
    }


def _cell(value: object) -> str:
    return ", ".join(value) if isinstance(value, list) else str(value)


@tasks_app.command(
    "validate",
    epilog="""Examples:

  crabray tasks validate tasks/demo

  crabray tasks validate my_suite/ --suite-format python

  crabray tasks validate tasks/demo --oracle
""",
)
def tasks_validate(
    suite: SuiteArg,
    oracle: Annotated[
        bool,
        typer.Option(
            "--oracle",
            help="Also require a reference solution in every task, as `--agent oracle` "
            "replays one; each task without is a problem.",
        ),
    ] = False,
    task: TaskOpt = None,
    tag: TagOpt = None,
    limit: LimitOpt = None,
    suite_format: SuiteFormatOpt = None,
    old_format: OldFormatOpt = None,
    index: IndexOpt = None,
    base_image: BaseImageOpt = None,
    services: ServicesOpt = None,
) -> None:
    """Check every task of SUITE; print every problem with its file, line and field."""
    from crabray.formats import SuiteErrors
    from crabray.formats.validate import oracle_problems
    from crabray.run.runner import load_checked_suite
    from crabray.run.selection import select_tasks

    ref = _suite_ref(suite, suite_format, old_format, index, base_image, services)
    loaded = load_checked_suite(ref)
    chosen = select_tasks(loaded, task, tag, limit)
    missing = oracle_problems(loaded, chosen) if oracle else []
    if missing:
        raise SuiteErrors(ref.path, missing)
    count = len(loaded.entries)
    valid = f"{counted(count, 'task')} in {safe_text(suite)} {plural(count, 'is', 'are')} valid"
    console.print(f"[green]✓[/] {valid}")
    for entry in (loaded.entries[t] for t in chosen):
        for warning in entry.task.metadata.get("warnings", []):
            console.print(f"[yellow]![/] {safe_text(warning)}")
    for line in loaded.unsupported_reasons():
        console.print(f"[yellow]unsupported[/] {safe_text(line)} (listed, not run)")


@tasks_app.command(
    "grade",
    epilog="""Examples:

  crabray tasks grade tasks/demo/demo.py hello-file -r hello.txt=/tmp/hello.txt

  crabray tasks grade SUITE TASK_ID -r /home/user/out.csv=gold.csv --skip-setup
""",
)
def tasks_grade(
    suite: SuiteArg,
    task_id: Annotated[str, typer.Argument(help="The task to grade.")],
    result: Annotated[
        list[str] | None,
        typer.Option(
            "--result",
            "-r",
            help="[ENV:]SANDBOX_PATH=LOCAL_FILE: a file handed in as the result (repeatable).",
        ),
    ] = None,
    skip_setup: Annotated[
        bool, typer.Option("--skip-setup", help="Leave the task's own setup steps out.")
    ] = False,
    backend: Annotated[
        str | None,
        typer.Option(
            "--backend",
            callback=known_backend_option,
            help="Task-JSON: the sandbox backend (default: local).",
        ),
    ] = None,
    suite_format: SuiteFormatOpt = None,
    old_format: OldFormatOpt = None,
    index: IndexOpt = None,
    base_image: BaseImageOpt = None,
    services: ServicesOpt = None,
) -> None:
    """Run TASK_ID's setup, hand in the result files, grade it with no agent.

    Prints the score and each evaluator's or checkpoint's outcome: the gold
    file handed in should score 1, the untouched original 0.
    """
    from crabray.formats import load_suite
    from crabray.run.grade import grade_task, parse_result_file

    ref = _suite_ref(suite, suite_format, old_format, index, base_image, services, backend)
    loaded = load_suite(ref)
    files = [parse_result_file(spec) for spec in result or []]
    graded = grade_task(loaded, task_id, files, skip_setup=skip_setup)
    outcome = graded.record.result
    table = Table(
        title=f"{safe_text(task_id)}: score {outcome.score:g} ({outcome.termination_reason.value})"
    )
    table.add_column("evaluator or checkpoint")
    table.add_column("outcome")
    for name, value in graded.breakdown:
        table.add_row(safe_text(name), safe_text(value))
    console.print(table)
    for warning in graded.warnings:
        errors.print(f"[yellow]warning:[/] {safe_text(warning)}", highlight=False, soft_wrap=True)
    if outcome.error:
        errors.print(f"[red]error:[/] {safe_text(outcome.error)}", highlight=False, soft_wrap=True)
    console.print(f"score {outcome.score:g}")
