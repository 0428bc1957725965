"""One run's configuration: every option of ``crabray run``, with its default written once.

``RunSettings`` is how a run runs (output directory, concurrency, limits,
pooling, ...); ``RunConfig`` adds what it runs, by name (the suite, the
agents, the agents file): it is what a run file holds, e.g. ``run.toml``::

    suite = "tasks/demo"
    agents = ["oracle", "noop"]
    concurrency = 4
    epochs = 2

``crabray run --config run.toml`` reads it; an option given on the command
line (or through its environment variable, ``RAY_ADDRESS`` for ``address``)
overrides only the field it sets (``merge_overrides``). Relative paths in a
file are relative to the file's folder, so a run file can live beside its
suite. ``crabray.run.RunOptions`` is the same settings with the agents
resolved into their specs, and the scheduler takes its knobs from it: no
default is repeated below this module.
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

from pydantic import ConfigDict, Field, ValidationError, field_validator
from pydantic_core import PydanticCustomError

from crabray.cluster.sweep.adaptive import Concurrency
from crabray.core.errors import ConfigError
from crabray.core.redact import REDACTED, SECRET_NAME
from crabray.core.retry import RetryPolicy
from crabray.episode.limits import EpisodeLimits
from crabray.formats import SuiteOptions
from crabray.results.store.root import ResultsRoot

DEFAULT_RESULTS = Path("results")
"""The results root: every run lands in its own partition under it, every command reads it."""

# Fields holding a path: a relative one in a run file is relative to the file's folder.
_PATH_FIELDS = ("suite", "agent_config", "index", "services", "out_dir")


class RunSettings(SuiteOptions, EpisodeLimits):
    """How a run runs: where results go, how much runs at once, limits, retries, pooling.

    How to read the suite (``SuiteOptions``) and the budgets over every task's
    (``EpisodeLimits``) are declared once, in their own models; a run file and
    the command line set their fields here by the same flat names.
    """

    model_config = ConfigDict(extra="forbid")

    out_dir: Path | str = Field(
        default=DEFAULT_RESULTS,
        description="The results root: a directory, or a URI of a store pyarrow writes "
        "(s3://BUCKET/PREFIX, ...), kept as the string given.",
    )
    concurrency: Concurrency = Field(
        default=2,
        description="Episodes in flight at most. It also caps the environment actors a pool "
        "keeps per sandbox configuration, and sizes a local Ray instance: 2 x concurrency "
        "slots per host kind (unless local_slots) and at most concurrency x the widest "
        "task's environments CPUs (crabray.cluster.runtime.ray_runtime.local_cpus). "
        "'auto': per host kind, a level that starts at 2 and rises while the hosts have CPU "
        "and memory to spare, up to the kind's slots, and falls on sandbox start failures, "
        "start latency and memory pressure (crabray.cluster.sweep.adaptive); each sandbox "
        "takes its memory as Ray's memory resource; a pool keeps as many actors as the "
        "slots allow; a local Ray instance gets 2 x its cores slots per host kind (unless "
        "local_slots) and at most cores CPUs.",
    )
    address: str | None = Field(default=None, description="Ray address; local Ray when unset.")
    resume: str | None = Field(default=None, description="Run id to resume.")
    run_id: str | None = Field(
        default=None,
        description="Id of a new run; generated when unset (a submitted run's is chosen by the "
        "submitting machine, which prints it before the run starts).",
    )
    suite_origin: str | None = Field(
        default=None,
        description="Where a suite shipped to a cluster came from (HOST:PATH on the submitting "
        "machine); a resume compares it, not the path the job unpacked the suite to.",
    )
    epochs: int = Field(default=1, gt=0, description="Episodes of each task per agent.")
    max_attempts: int = Field(
        default=RetryPolicy.model_fields["max_attempts"].default,
        gt=0,
        description="Tries of an episode whose infrastructure fails.",
    )
    task_ids: list[str] | None = Field(
        default=None, description="Run only these tasks: ids or globs (fnmatch)."
    )
    tags: list[str] | None = Field(default=None, description="Run only tasks with any of these.")
    limit: int | None = Field(
        default=None, gt=0, description="Run at most this many tasks: the first, in suite order."
    )
    pooling: bool = Field(default=True, description="Reuse environments across episodes.")
    warm: int = Field(default=0, ge=0, description="Environments per configuration started ahead.")
    placement_timeout_sec: float | None = Field(
        default=None,
        gt=0,
        description="How long an episode's sandboxes may wait for the cluster to place them "
        "before the episode fails as infrastructure (env_error); the scheduler's 120 s when "
        "unset.",
    )
    max_cost_usd: float | None = Field(
        default=None,
        gt=0,
        description="The run's budget in USD, over every agent and node (the agents' price "
        "tables): once its episodes have cost this much, no new episode starts; those in "
        "flight finish. A resume keeps it unless given again: give a higher one to go on.",
    )
    max_tokens: int | None = Field(
        default=None,
        gt=0,
        description="The run's budget in model tokens (prompt and completion), over every "
        "agent and node; as max_cost_usd.",
    )
    local_slots: int | None = Field(
        default=None,
        gt=0,
        description="Slots of each kind a local Ray instance hosts; 2 x concurrency when unset "
        "(with concurrency 'auto': 2 x the machine's cores).",
    )

    @property
    def limits(self) -> EpisodeLimits:
        """The budgets over every task's, as the scheduler and the episodes take them."""
        return EpisodeLimits.model_validate(
            self.model_dump(include=set(EpisodeLimits.model_fields))
        )

    @field_validator("backend")
    @classmethod
    def _known_backend(cls, value: str | None) -> str | None:
        """A misspelt backend is one error, naming the field, with the closest kinds (not
        one error per environment that would ask for it)."""
        if value is None:
            return value
        from crabray.backends import known_backend

        try:
            return known_backend(value)
        except ConfigError as exc:
            raise PydanticCustomError(
                "unknown_backend", "{reason}", {"reason": exc.reason}
            ) from None

    @field_validator("out_dir", mode="before")
    @classmethod
    def _path_unless_uri(cls, value: object) -> object:
        """A directory becomes a ``Path``; a URI stays a string (``Path`` would fold its ``//``)."""
        return value if not isinstance(value, str) or ResultsRoot(value).is_url else Path(value)


class RunConfig(RunSettings):
    """A whole run by name: the suite, the agents (and their file), and the settings."""

    suite: str | None = Field(default=None, description="Path of the suite.")
    agents: list[str] = Field(
        default_factory=list, description="Agents to run: oracle, noop or names in agent_config."
    )
    agent_config: str | None = Field(
        default=None, description="Agents file (TOML) defining the LLM agents `agents` names."
    )

    def settings(self) -> dict[str, Any]:
        """The fields of ``RunSettings``, as keyword arguments (``RunOptions(**...)``)."""
        return self.model_dump(exclude={"suite", "agents", "agent_config"})


def load_run_config(path: str | Path) -> RunConfig:
    """Read a run file (TOML); relative paths in it become relative to its folder.

    Raises:
        ConfigError: The file cannot be read, is not TOML, or a field is unknown or
            invalid; the message names the file, every bad field and why.
    """
    path = Path(path)
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError(f"cannot read run file: {exc.strerror}", file=str(path)) from exc
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"not valid TOML: {exc}", file=str(path)) from exc
    for name in _PATH_FIELDS:
        value = data.get(name)
        if (
            isinstance(value, str)
            and not ResultsRoot(value).is_url
            and not Path(value).is_absolute()
        ):
            data[name] = str(path.parent / value)
    return _validate(data, file=str(path))


def merge_overrides(config: RunConfig, overrides: dict[str, Any]) -> RunConfig:
    """``config`` with the given fields replaced; ``None`` means "not given" and keeps the field.

    Raises:
        ConfigError: A merged field is invalid.
    """
    given = {name: value for name, value in overrides.items() if value is not None}
    return _validate({**config.model_dump(exclude_unset=True), **given}, file=None)


def _validate(data: dict[str, Any], file: str | None) -> RunConfig:
    try:
        return RunConfig.model_validate(data)
    except ValidationError as exc:
        problems = []
        for error in exc.errors(include_input=False):
            loc = ".".join(str(part) for part in error["loc"])
            hint = ""
            if error["type"] == "extra_forbidden":
                hint = f" (known fields: {', '.join(sorted(RunConfig.model_fields))})"
            problems.append(f"{loc}: {error['msg']}{hint}")
        raise ConfigError("; ".join(problems), file=file) from None


def recorded_backend_settings(settings: dict[str, Any]) -> dict[str, Any]:
    """``settings`` as a run's manifest records them: a secret's value left out.

    A setting named like a secret (``password``, ``key_passphrase``, ``api_key``)
    is recorded as ``[redacted]``: a manifest is a plain file beside the
    results, copied and shared with them. A resume asks for it again.
    """
    return {key: REDACTED if SECRET_NAME.search(key) else value for key, value in settings.items()}
