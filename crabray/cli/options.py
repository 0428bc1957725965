"""The options and arguments ``crabray`` commands share, each declared once.

A command that takes one uses its alias here, so its help text and default
are written in one place (a run's defaults in ``RunSpec``'s fields).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer

from crabray.cli.terminal import errors
from crabray.core.errors import CrabrayError
from crabray.results.store.root import ResultsRoot
from crabray.run.spec import DEFAULT_RESULTS, field_of, part_title


def _default(key: str) -> str:
    """The default of a run's field as ``--help`` shows it: written once, on the field."""
    default = field_of(key).default
    return str(getattr(default, "given", default))  # a results root: as it would be typed


def _run_option(key: str, *names: str, **option: Any) -> Any:
    """The option of a run's field (by its flat key), in the help panel of the field's part
    (What to run, Agents, Limits, Execution, Results: ``RunSpec``'s parts' titles)."""
    return typer.Option(*names, rich_help_panel=part_title(key), **option)


def _setting_option(key: str, *names: str, **option: Any) -> Any:
    """``_run_option``, its default shown as the field has it."""
    return _run_option(key, *names, show_default=_default(key), **option)


DEFAULT_ROOT = ResultsRoot(str(DEFAULT_RESULTS))
"""The results root a command reads (or a run writes) when given none."""


def root_argument(help: str, **argument: Any) -> Any:
    """A results root argument (OUT): parsed by typer into a ``ResultsRoot``, once, so the
    command and every helper it calls hold the root typed (``results`` by default)."""
    argument.setdefault("show_default", str(DEFAULT_RESULTS))
    return typer.Argument(parser=ResultsRoot.parse, metavar="OUT", help=help, **argument)


def root_option(*names: str, help: str, **option: Any) -> Any:
    """A results root option (``--out``, ``--from``), parsed as ``root_argument`` is."""
    option.setdefault("show_default", str(DEFAULT_RESULTS))
    option.setdefault("metavar", "DIR")
    return typer.Option(*names, parser=ResultsRoot.parse, help=help, **option)


RootArg = Annotated[ResultsRoot, root_argument("Results root: a folder or a store URI.")]
"""The results root a reporting command reads (``runs list``, ``view``)."""

SuiteArg = Annotated[Path, typer.Argument(help="A suite: a .py file or a folder of tasks.")]
SuiteFormatOpt = Annotated[
    str | None,
    _run_option(
        "format",
        "--suite-format",
        help="Suite format (python, task-json, task-folder, crab-dataset, or a plugin's); "
        "detected when omitted.",
    ),
]
OldFormatOpt = Annotated[
    str | None,
    typer.Option("--format", hidden=True, help="Deprecated spelling of --suite-format."),
]
IndexOpt = Annotated[
    Path | None,
    _run_option(
        "index",
        "--index",
        help="Task-JSON: an index file mapping each tool to the task ids to run (JSON).",
    ),
]
BaseImageOpt = Annotated[
    str | None,
    _run_option(
        "base_image",
        "--base-image",
        help="Task folders and Harbor suites: the image replacing every FROM of the tasks' "
        "Dockerfiles (task folders' default: the original base image becomes "
        "crabray/task-base:latest; Harbor's: built as written).",
    ),
]
ServicesOpt = Annotated[
    Path | None,
    _run_option(
        "services",
        "--services",
        help="Task folders: the service registry file (default: services.yml at the suite root).",
    ),
]

RunOpt = Annotated[
    str | None,
    typer.Option(
        "--run", help="Only this run id ('latest': the most recent run); every run when omitted."
    ),
]
VerifiedOnlyOpt = Annotated[
    bool,
    typer.Option(
        "--verified-only",
        help="Count as successes only passes graded by a path the agent could not alter "
        "(grader_trusted true): an unverified pass counts as a failure, in the same "
        "denominator (success rate, interval, pass@k). The site shows both figures anyway.",
    ),
]
TitleOpt = Annotated[
    str | None,
    typer.Option("--title", help="The site's title; the suite's name by default."),
]
DescriptionOpt = Annotated[
    str | None,
    typer.Option(
        "--description", help="The line under the site's title; the suite's path by default."
    ),
]


# The options of ``crabray run``, each declared once: a command sharing one uses its alias.
RunSuiteArg = Annotated[
    Path | None,
    typer.Argument(help="A suite: a .py file or a folder of tasks (or `suite` in --config)."),
]
AgentOpt = Annotated[
    list[str] | None,
    _run_option(
        "agents",
        "--agent",
        "-a",
        help="Agent to run: oracle, noop or a name from --agent-config (repeatable).",
    ),
]
RunFileOpt = Annotated[
    Path | None,
    typer.Option(
        "--config",
        help="Run file (TOML) with the run's settings; options given here override it.",
    ),
]
OutOpt = Annotated[
    ResultsRoot | None,
    _setting_option(
        "out_dir",
        "--out",
        "-o",
        parser=ResultsRoot.parse,
        metavar="DIR",
        help="Results root; each run is kept apart under it. A directory, or a URI of a "
        "store pyarrow writes (s3://BUCKET/PREFIX, gs://...): the run is staged locally and "
        "uploaded as episodes finish.",
    ),
]


def _concurrency(value: str | None) -> str | None:
    """``--concurrency``: a whole number of at least 1, or ``auto`` (checked here, so a
    bad value is a usage error naming the option, exit 2)."""
    if value is None or value == "auto":
        return value
    if not value.strip().isdigit() or int(value) < 1:
        raise typer.BadParameter(f"{value!r} is not a whole number of at least 1 or 'auto'")
    return value


ConcurrencyOpt = Annotated[
    str | None,
    _setting_option(
        "concurrency",
        "--concurrency",
        "-c",
        callback=_concurrency,
        metavar="N|auto",
        help="Episodes in flight at most, or 'auto': as many as the hosts' CPU, memory and "
        "sandbox starts allow, per host kind.",
    ),
]
AddressOpt = Annotated[
    str | None,
    _run_option(
        "address",
        envvar="RAY_ADDRESS",
        help="Ray cluster to join (HOST:PORT, from a node of it), or the head's job API "
        "(http://HEAD:8265: the run is submitted as a Ray job, results stay on the head "
        "unless --out is a store URI); "
        "a local Ray instance when omitted.",
    ),
]
ResumeOpt = Annotated[
    str | None,
    _run_option(
        "resume",
        help="Resume this run id, or 'latest': run only its unfinished episodes, with the "
        "suite, agents and options it was started with.",
    ),
]
EpochsOpt = Annotated[
    int | None,
    _setting_option("epochs", min=1, help="Episodes of each task per agent (for pass@k)."),
]
MaxStepsOpt = Annotated[
    int | None, _run_option("max_steps", min=1, help="Override every task's step budget.")
]
TimeLimitOpt = Annotated[
    float | None,
    _run_option(
        "time_limit_sec",
        min=0.001,
        help="Override every task's time budget, in seconds (default: the task's, else the "
        "suite's, else 3600).",
    ),
]
MaxAttemptsOpt = Annotated[
    int | None,
    _setting_option("max_attempts", min=1, help="Tries per episode when the infrastructure fails."),
]
MaxCostOpt = Annotated[
    float | None,
    _run_option(
        "max_cost_usd",
        "--max-cost-usd",
        min=0.000001,
        help="The run's budget in USD over every agent (their price tables): once spent, no "
        "new episode starts; a resume with a higher one goes on.",
    ),
]
MaxTokensOpt = Annotated[
    int | None,
    _run_option(
        "max_tokens",
        "--max-tokens",
        min=1,
        help="The run's budget in model tokens over every agent; as --max-cost-usd.",
    ),
]
TaskOpt = Annotated[
    list[str] | None,
    _run_option(
        "task_ids",
        "--task",
        "-t",
        metavar="ID",
        help="Only this task: an id or a glob such as 'web-*' (repeatable).",
    ),
]
TagOpt = Annotated[
    list[str] | None,
    _run_option("tags", "--tag", metavar="TAG", help="Only tasks carrying this tag (repeatable)."),
]
LimitOpt = Annotated[
    int | None,
    _run_option(
        "limit", "--limit", min=1, metavar="N", help="At most N tasks: the first, in suite order."
    ),
]


def known_backend_option(value: str | None) -> str | None:
    """``--backend``: a known kind (checked here, so a misspelt one is one usage error
    naming the option, with the closest kinds, not one error per environment)."""
    if value is None:
        return value
    from crabray.backends import known_backend  # only when the option is given

    try:
        return known_backend(value)
    except CrabrayError as exc:
        raise typer.BadParameter(str(exc)) from None


BackendOpt = Annotated[
    str | None,
    _run_option(
        "backend",
        callback=known_backend_option,
        help="Sandbox backend (local, docker, ...): of suites that name none (task-JSON: "
        "docker when every snapshot has an image, else local; task folders: docker), or "
        "replacing every environment's own in a python suite.",
    ),
]


def backend_settings_of(values: list[str] | None) -> dict[str, Any] | None:
    """``KEY=VALUE`` pairs as settings; a value that is JSON (``512``, ``true``) is parsed."""
    if not values:
        return None
    settings: dict[str, Any] = {}
    for item in values:
        key, sep, text = item.partition("=")
        if not sep or not key:
            raise typer.BadParameter(f"'{item}' is not KEY=VALUE, e.g. image=crabray/debian:latest")
        try:
            settings[key] = json.loads(text)
        except ValueError:
            settings[key] = text
    return settings


BackendSettingOpt = Annotated[
    list[str] | None,
    _run_option(
        "backend_settings",
        "--backend-setting",
        metavar="KEY=VALUE",
        help="A python suite's backend setting for every environment (repeatable), e.g. "
        "image=crabray/debian:latest; with --backend it replaces theirs.",
    ),
]
ModelOpt = Annotated[
    str | None,
    _run_option(
        "model",
        "--model",
        "-m",
        metavar="MODEL",
        help="The model of the selected LLM agent(s), overriding their agents file; "
        "an error if only oracle/noop are selected (they use no model).",
    ),
]
AgentConfigOpt = Annotated[
    Path | None,
    _run_option(
        "agent_config",
        "--agent-config",
        help="Agents file (TOML) defining LLM agents --agent can name.",
    ),
]
WarmOpt = Annotated[
    int | None,
    _setting_option("warm", min=0, help="Environments per configuration started ahead of demand."),
]
PoolOpt = Annotated[
    bool | None,
    _run_option(
        "pooling",
        "--pool/--no-pool",
        help="Reuse environments across episodes.",
        show_default="pool" if _default("pooling") == "True" else "no-pool",
    ),
]
LocalSlotsOpt = Annotated[
    int | None,
    _run_option(
        "local_slots", min=1, help="Sandboxes of each kind a local Ray instance hosts at once."
    ),
]
DetachOpt = Annotated[
    bool,
    typer.Option(
        "--detach",
        help="With --address http://HEAD:8265: submit the run, print its ids and how to "
        "follow it (crabray runs follow), and return at once.",
    ),
]


def suite_format(suite_format: str | None, old_format: str | None) -> str | None:
    """``--suite-format``, or its deprecated spelling ``--format`` with a warning."""
    if old_format is None:
        return suite_format
    errors.print(
        "[yellow]warning:[/] --format is deprecated for the suite format; use --suite-format"
    )
    if suite_format is not None and suite_format != old_format:
        raise CrabrayError("--suite-format and --format disagree; give --suite-format only")
    return old_format
