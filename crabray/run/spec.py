"""``RunSpec``: one typed description of a run, by concern, and the run file that holds it.

A run is described once, in five parts, each declared by the layer that uses it:

- ``what``: the suite, how to read it (``crabray.formats.SuiteOptions``), which
  of its tasks and how many epochs (``WhatToRun``);
- ``agents``: the agents by name, their agents file and a model over theirs;
- ``limits``: the budgets over every task's (``crabray.episode.EpisodeLimits``)
  and the run's budget in money and tokens (``RunLimits``);
- ``execution``: how episodes run, concurrency, cluster, pooling, tries
  (``crabray.cluster.sweep.Execution``);
- ``results``: where the rows go (a ``ResultsRoot``), and which run (``resume``,
  ``run_id``).

``crabray run`` builds one from its flags and a run file and hands it to
``crabray.evaluate``, which a Python user calls with the same object; the
scheduler takes ``execution`` and ``limits``, the episode ``limits``. A run's
manifest records it by its flat keys and a resume reads it back through it.

Every field also has a flat key (its name, unless its metadata says another):
a run file holds the run by those keys, e.g. ``run.toml``::

    suite = "tasks/demo"
    agents = ["oracle", "noop"]
    concurrency = 4
    epochs = 2

and ``RunSpec.of(concurrency=4, epochs=2)`` routes them to their parts, the
same way. Relative paths in a file are relative to the file's folder. A flag
given on the command line (or through its environment variable,
``RAY_ADDRESS`` for ``address``) overrides only the field it sets
(``RunSpec.updated``). A field's metadata also holds its flag and what a
resume does with it (``crabray.core.setting``).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PlainSerializer,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic.fields import FieldInfo
from pydantic_core import PydanticCustomError

from crabray.cluster.sweep.settings import Execution
from crabray.core.errors import ConfigError
from crabray.core.redact import REDACTED, SECRET_NAME
from crabray.core.setting import key_of, setting
from crabray.core.toml_file import read_toml
from crabray.episode.limits import EpisodeLimits
from crabray.formats import SuiteOptions
from crabray.results.store.root import ResultsRoot

DEFAULT_RESULTS = Path("results")
"""The results root: every run lands in its own partition under it, every command reads it."""


def is_default_root(root: ResultsRoot) -> bool:
    """Whether ``root`` is the results root every command reads when given none (a command
    printed for the user then leaves it out)."""
    return not root.is_url and root.path == DEFAULT_RESULTS


# Keys holding a path: a relative one in a run file is relative to the file's folder.
_PATH_KEYS = ("suite", "agent_config", "index", "services", "out_dir")

Root = Annotated[
    ResultsRoot,
    BeforeValidator(ResultsRoot.parse),
    PlainSerializer(lambda root: root.given, return_type=str),
]
"""A results root as a field: parsed once from the path or URI given, kept as typed."""


class WhatToRun(SuiteOptions):
    """The suite, how to read it, and which of its episodes make the run."""

    model_config = ConfigDict(extra="forbid", title="What to run")

    suite: str | None = Field(default=None, description="Path of the suite.")
    suite_origin: str | None = Field(
        default=None,
        json_schema_extra=setting(resume="kept"),
        description="Where a suite shipped to a cluster came from (HOST:PATH on the submitting "
        "machine); a resume compares it, not the path the job unpacked the suite to.",
    )
    epochs: int = Field(
        default=1,
        gt=0,
        json_schema_extra=setting("--epochs", resume="fixed"),
        description="Episodes of each task per agent.",
    )
    task_ids: list[str] | None = Field(
        default=None,
        json_schema_extra=setting("--task", resume="fixed"),
        description="Run only these tasks: ids or globs (fnmatch).",
    )
    tags: list[str] | None = Field(
        default=None,
        json_schema_extra=setting("--tag", resume="fixed"),
        description="Run only tasks with any of these.",
    )
    limit: int | None = Field(
        default=None,
        gt=0,
        json_schema_extra=setting("--limit", resume="fixed"),
        description="Run at most this many tasks: the first, in suite order.",
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


class AgentsToRun(BaseModel):
    """The agents, by name, and where their definitions and model come from."""

    model_config = ConfigDict(extra="forbid", title="Agents")

    names: list[str] = Field(
        default_factory=list,
        json_schema_extra=setting("--agent", key="agents"),
        description="Agents to run: oracle, noop or names in agent_config.",
    )
    agent_config: str | None = Field(
        default=None,
        json_schema_extra=setting("--agent-config"),
        description="Agents file (TOML) defining the LLM agents `agents` names.",
    )
    model: str | None = Field(
        default=None,
        json_schema_extra=setting("--model"),
        description="A model over the agents file's, for every LLM agent: a resume given none "
        "keeps each agent's recorded model, one given must equal it.",
    )


class RunLimits(EpisodeLimits):
    """Budgets: each episode's, over every task's own, and the whole run's."""

    model_config = ConfigDict(extra="forbid", title="Limits")

    max_cost_usd: float | None = Field(
        default=None,
        gt=0,
        json_schema_extra=setting("--max-cost-usd", resume="kept"),
        description="The run's budget in USD, over every agent and node (the agents' price "
        "tables): once its episodes have cost this much, no new episode starts; those in "
        "flight finish. A resume keeps it unless given again: give a higher one to go on.",
    )
    max_tokens: int | None = Field(
        default=None,
        gt=0,
        json_schema_extra=setting("--max-tokens", resume="kept"),
        description="The run's budget in model tokens (prompt and completion), over every "
        "agent and node; as max_cost_usd.",
    )

    @property
    def episode(self) -> EpisodeLimits:
        """The budgets over every task's, as the scheduler and the episodes take them."""
        return EpisodeLimits.model_validate(
            self.model_dump(include=set(EpisodeLimits.model_fields))
        )


class ResultsTo(BaseModel):
    """Where the run's rows go, and which run they are."""

    model_config = ConfigDict(extra="forbid", title="Results")

    out_dir: Root = Field(
        default=ResultsRoot(str(DEFAULT_RESULTS)),
        json_schema_extra=setting("--out"),
        description="The results root: a directory, or a URI of a store pyarrow writes "
        "(s3://BUCKET/PREFIX, ...).",
    )
    resume: str | None = Field(
        default=None,
        json_schema_extra=setting("--resume"),
        description="Run id to resume, or 'latest'.",
    )
    run_id: str | None = Field(
        default=None,
        description="Id of a new run; generated when unset (a submitted run's is chosen by the "
        "submitting machine, which prints it before the run starts).",
    )


Part = Literal["what", "agents", "limits", "execution", "results"]


class RunSpec(BaseModel):
    """One run: what, which agents, limits, execution and results, each a typed part."""

    model_config = ConfigDict(extra="forbid")

    what: WhatToRun = Field(default_factory=WhatToRun)
    agents: AgentsToRun = Field(default_factory=AgentsToRun)
    limits: RunLimits = Field(default_factory=RunLimits)
    execution: Execution = Field(default_factory=Execution)
    results: ResultsTo = Field(default_factory=ResultsTo)

    @model_validator(mode="before")
    @classmethod
    def _route_flat_keys(cls, data: Any) -> Any:
        """Flat keys (a run file's, ``RunSpec(epochs=2)``) go to their parts; an unknown key
        stays at the top, where it is refused as extra."""
        if not isinstance(data, dict) or not any(key in FLAT_KEYS for key in data):
            return data  # parts only
        routed: dict[str, Any] = {}
        for key, value in data.items():
            if key in RunSpec.model_fields and isinstance(value, dict | BaseModel):
                given = value if isinstance(value, dict) else value.model_dump(exclude_unset=True)
                routed[key] = {**given, **routed.get(key, {})}  # a part ("agents" is both)
            elif key in FLAT_KEYS:
                part, name = FLAT_KEYS[key]
                routed.setdefault(part, {})[name] = value
            else:
                routed[key] = value  # an unknown key: refused as extra
        return routed

    def flat(
        self, *, given_only: bool = False, mode: Literal["python", "json"] = "python"
    ) -> dict[str, object]:
        """The run by its flat keys (a run file's, a manifest's options); ``given_only``: only
        the fields that were set, so that an override sets no more than it was given."""
        flat: dict[str, object] = {}
        for part in self._parts():
            dumped = part.model_dump(mode=mode, exclude_unset=given_only)
            for name, value in dumped.items():
                flat[key_of(name, type(part).model_fields[name])] = value
        return flat

    @classmethod
    def of(cls, **keys: object) -> RunSpec:
        """The run these flat keys describe (a command line's flags, ``RunSpec.of(epochs=2)``).

        A key given ``None`` sets nothing, so that it overrides nothing (``updated``)
        and a resume takes it from the run. A path is kept as its text.

        Raises:
            ConfigError: A flag's value is invalid, or a key is unknown.
        """
        return validated(
            {
                key: str(value) if isinstance(value, Path) else value
                for key, value in keys.items()
                if value is not None
            }
        )

    def given(self) -> set[str]:
        """The flat keys of the fields that were set (given on the command line, in a run
        file, or by a caller), not defaulted."""
        return set(self.flat(given_only=True))

    def updated(self, overrides: RunSpec) -> RunSpec:
        """This run with the fields ``overrides`` sets replaced, and no other.

        Raises:
            ConfigError: A merged field is invalid.
        """
        return validated({**self.flat(given_only=True), **overrides.flat(given_only=True)})

    def _parts(self) -> Iterator[BaseModel]:
        for name in type(self).model_fields:
            yield getattr(self, name)


def part_model(part: str) -> type[BaseModel]:
    """The model of one part of a run (``what``, ``agents``, ``limits``, ``execution``,
    ``results``)."""
    model = RunSpec.model_fields[part].annotation
    assert isinstance(model, type) and issubclass(model, BaseModel)
    return model


def _flat_keys() -> dict[str, tuple[str, str]]:
    """Each flat key's part and field, from the parts' fields (their metadata's ``key``)."""
    keys: dict[str, tuple[str, str]] = {}
    for part in RunSpec.model_fields:
        for name, field in part_model(part).model_fields.items():
            keys[key_of(name, field)] = (part, name)
    return keys


FLAT_KEYS = _flat_keys()
"""Every field of a run by its flat key: ``{"concurrency": ("execution", "concurrency"), ...}``."""


def field_of(key: str) -> FieldInfo:
    """The field a flat key names (its type, default, description, flag and resume rule)."""
    part, name = FLAT_KEYS[key]
    return part_model(part).model_fields[name]


def part_title(key: str) -> str:
    """The title of the part a flat key belongs to ("What to run", "Execution", ...): the
    command line's help groups its options by it."""
    model = part_model(FLAT_KEYS[key][0])
    return str(model.model_config.get("title") or model.__name__)


def load_run_spec(path: str | Path) -> RunSpec:
    """Read a run file (TOML); relative paths in it become relative to its folder.

    Raises:
        ConfigError: The file cannot be read, is not TOML, or a key is unknown or
            invalid; the message names the file, every bad key and why.
    """
    path = Path(path)
    data = read_toml(path, "run file")
    for key in _PATH_KEYS:
        value = data.get(key)
        if (
            isinstance(value, str)
            and not ResultsRoot(value).is_url
            and not Path(value).is_absolute()
        ):
            data[key] = str(path.parent / value)
    return validated(data, file=str(path))


def validated(data: Mapping[str, object], file: str | None = None) -> RunSpec:
    """``data`` (flat keys, or parts) as a run.

    Raises:
        ConfigError: Every bad key, named by its flat key, and why.
    """
    try:
        return RunSpec.model_validate(data)
    except ValidationError as exc:
        problems = []
        for error in exc.errors(include_input=False):
            hint = ""
            if error["type"] == "extra_forbidden":
                hint = f" (known fields: {', '.join(sorted(FLAT_KEYS))})"
            problems.append(f"{_shown_loc(error['loc'])}: {error['msg']}{hint}")
        raise ConfigError("; ".join(problems), file=file) from None


def _shown_loc(loc: tuple[int | str, ...]) -> str:
    """An error's place by the flat key the user wrote (``concurrency``, not
    ``execution.concurrency``), then anything below it (a list's index)."""
    parts = [str(part) for part in loc]
    if len(parts) >= 2 and parts[0] in RunSpec.model_fields:
        field = part_model(parts[0]).model_fields.get(parts[1])
        if field is not None:
            parts = [key_of(parts[1], field), *parts[2:]]
    return ".".join(parts)


def recorded_backend_settings(settings: dict[str, Any]) -> dict[str, Any]:
    """``settings`` as a run's manifest records them: a secret's value left out.

    A setting named like a secret (``password``, ``key_passphrase``, ``api_key``)
    is recorded as ``[redacted]``: a manifest is a plain file beside the
    results, copied and shared with them. A resume asks for it again.
    """
    return {key: REDACTED if SECRET_NAME.search(key) else value for key, value in settings.items()}
