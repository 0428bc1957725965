"""``crabray tasks``: list, validate and grade the tasks of a suite, with no agent and no Ray."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.markup import escape
from rich.table import Table

from crabray.cli.options import (
    BaseImageOpt,
    IndexOpt,
    OldFormatOpt,
    ServicesOpt,
    SuiteArg,
    SuiteFormatOpt,
)
from crabray.cli.options import suite_format as chosen_format
from crabray.cli.terminal import console, errors

if TYPE_CHECKING:
    from crabray.formats import SuiteRef

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


@tasks_app.command(
    "list",
    epilog="""Examples:

  crabray tasks list tasks/demo

  crabray tasks list tasks/task_json_demo --index tasks/task_json_demo/test_small.json
""",
)
def tasks_list(
    suite: SuiteArg,
    suite_format: SuiteFormatOpt = None,
    old_format: OldFormatOpt = None,
    index: IndexOpt = None,
    base_image: BaseImageOpt = None,
    services: ServicesOpt = None,
) -> None:
    """List the tasks of SUITE: id, environments, evaluator size, limits, tags."""
    from crabray.formats import load_suite

    loaded = load_suite(_suite_ref(suite, suite_format, old_format, index, base_image, services))
    table = Table(title=f"{loaded.name} ({len(loaded.entries)} tasks)")
    for column in ("task", "benchmark", "environments", "evaluators", "max steps", "tags"):
        table.add_column(column)
    for task_id, entry in loaded.entries.items():
        envs = entry.benchmark.task_environments(entry.task)
        table.add_row(
            task_id,
            entry.benchmark.name,
            ", ".join(e.name for e in envs),
            str(len(entry.task.evaluators)),
            str(entry.benchmark.step_limit_of(entry.task)),
            ", ".join(entry.task.tags),
        )
    console.print(table)
    for line in loaded.unsupported_reasons():
        console.print(f"[yellow]unsupported[/] {escape(line)}")


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

    ref = _suite_ref(suite, suite_format, old_format, index, base_image, services)
    loaded = load_checked_suite(ref)
    missing = oracle_problems(loaded) if oracle else []
    if missing:
        raise SuiteErrors(ref.path, missing)
    console.print(f"[green]✓[/] {len(loaded.entries)} tasks in {suite} are valid")
    for entry in loaded.entries.values():
        for warning in entry.task.metadata.get("warnings", []):
            console.print(f"[yellow]![/] {escape(str(warning))}")
    for line in loaded.unsupported_reasons():
        console.print(f"[yellow]unsupported[/] {escape(line)} (listed, not run)")


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
        typer.Option("--backend", help="Task-JSON: the sandbox backend (default: local)."),
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
    table = Table(title=f"{task_id}: score {outcome.score:g} ({outcome.termination_reason.value})")
    table.add_column("evaluator or checkpoint")
    table.add_column("outcome")
    for name, value in graded.breakdown:
        table.add_row(escape(name), value)
    console.print(table)
    for warning in graded.warnings:
        errors.print(f"[yellow]warning:[/] {escape(warning)}", highlight=False, soft_wrap=True)
    if outcome.error:
        errors.print(f"[red]error:[/] {escape(outcome.error)}", highlight=False, soft_wrap=True)
    console.print(f"score {outcome.score:g}")
