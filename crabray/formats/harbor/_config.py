"""``task.toml``: the settings of a Harbor task, as crabray reads them.

Harbor (Terminal-Bench 2.0's harness) keeps a task's limits in ``task.toml``:
``[agent]`` and ``[verifier]`` timeouts, ``[environment]`` resources and
network, ``[solution]`` and ``[verifier]`` environment variables, and free
``[metadata]``. The models below take the fields crabray maps onto its own
task limits and docker settings; other fields (newer Harbor versions add
some) are kept in ``extra`` and ignored. A field whose meaning crabray cannot
honour (GPUs, a network allowlist, a user other than root) is refused with
the reason, rather than silently dropped.
"""

from __future__ import annotations

import os
import re
import tomllib
from pathlib import Path
from typing import Any

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from crabray.core.errors import ConfigError

TASK_TOML = "task.toml"
ROOT_USERS = ("root", "0")

_SIZE = re.compile(r"^\s*(?P<number>\d+(?:\.\d+)?)\s*(?P<unit>[KMGT])?i?B?\s*$", re.IGNORECASE)
_UNIT_MB = {"K": 1 / 1024, "M": 1.0, "G": 1024.0, "T": 1024.0 * 1024.0, None: 1 / (1024 * 1024)}


def size_mb(text: str) -> int:
    """Harbor's legacy size strings (``"2G"``, ``"512M"``) in MiB.

    Raises:
        ValueError: Not a number with an optional K, M, G or T unit.
    """
    match = _SIZE.match(text)
    if match is None:
        raise ValueError(f"must be a size such as '2G' or '512M', got {text!r}")
    unit = match["unit"].upper() if match["unit"] else None
    return int(float(match["number"]) * _UNIT_MB[unit])


class _Section(BaseModel):
    """A ``task.toml`` table: unknown keys are kept (newer Harbor fields) and ignored."""

    model_config = ConfigDict(extra="allow")


class AgentSection(_Section):
    """``[agent]``: the agent's phase."""

    timeout_sec: float | None = Field(
        default=None, gt=0, description="The agent's wall-clock limit; the task's time_limit_sec."
    )
    user: str | int | None = Field(default=None, description="Only root (or unset) is supported.")


class VerifierSection(_Section):
    """``[verifier]``: how the tests run after the agent."""

    timeout_sec: float = Field(default=600.0, gt=0, description="Limit of tests/test.sh.")
    env: dict[str, str] = Field(
        default_factory=dict,
        description="Environment of tests/test.sh; ${VAR} and ${VAR:-default} come from the "
        "worker's environment.",
    )
    user: str | int | None = Field(default=None, description="Only root (or unset) is supported.")


class SolutionSection(_Section):
    """``[solution]``: how the oracle runs solution/solve.sh."""

    env: dict[str, str] = Field(default_factory=dict, description="Environment of solve.sh.")


class EnvironmentSection(_Section):
    """``[environment]``: the container's resources and network."""

    build_timeout_sec: float = Field(default=600.0, gt=0)
    docker_image: str | None = Field(
        default=None,
        description="Harbor's prebuilt image; crabray builds environment/Dockerfile instead "
        "(no registry is pulled from).",
    )
    cpus: float = Field(default=1.0, gt=0, description="CPU limit of the container.")
    memory_mb: int = Field(default=2048, ge=6, description="Memory limit in MiB.")
    storage_mb: int | None = Field(default=None, description="Not enforced by crabray.")
    memory: str | None = Field(default=None, description="Legacy size string, e.g. '4G'.")
    storage: str | None = Field(default=None, description="Legacy size string; not enforced.")
    gpus: int = Field(default=0, ge=0, description="GPUs; crabray's docker backend has none.")
    allow_internet: bool = Field(default=True, description="Outbound network for the container.")
    network_mode: str | None = Field(
        default=None, description="'public' or 'no-network'; 'allowlist' is not supported."
    )
    env: dict[str, str] = Field(
        default_factory=dict, description="Environment of every command in the container."
    )

    @field_validator("memory", "storage")
    @classmethod
    def _size(cls, value: str | None) -> str | None:
        if value is not None:
            size_mb(value)
        return value

    @field_validator("gpus")
    @classmethod
    def _no_gpus(cls, value: int) -> int:
        if value:
            raise ValueError(
                f"asks for {value} GPU(s): crabray's docker sandboxes have no GPUs; "
                "remove the task from the suite or set gpus = 0"
            )
        return value

    @field_validator("network_mode")
    @classmethod
    def _known_network(cls, value: str | None) -> str | None:
        if value not in (None, "public", "no-network"):
            raise ValueError(
                f"network_mode {value!r} is not supported: crabray gives a container "
                "either outbound access ('public') or none ('no-network')"
            )
        return value

    @model_validator(mode="after")
    def _legacy_sizes(self) -> EnvironmentSection:
        if self.memory is not None:
            self.memory_mb = size_mb(self.memory)
        if self.storage is not None:
            self.storage_mb = size_mb(self.storage)
        return self

    @property
    def online(self) -> bool:
        """Whether the container gets outbound network access."""
        if self.network_mode is not None:
            return self.network_mode == "public"
        return self.allow_internet


class HarborTaskConfig(_Section):
    """The whole ``task.toml``."""

    version: str | None = Field(default=None, description="Harbor's schema version.")
    schema_version: str | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)
    task: dict[str, Any] | None = Field(default=None, description="Harbor's package info.")
    agent: AgentSection = Field(default_factory=AgentSection)
    verifier: VerifierSection = Field(default_factory=VerifierSection)
    solution: SolutionSection = Field(default_factory=SolutionSection)
    environment: EnvironmentSection = Field(default_factory=EnvironmentSection)

    @model_validator(mode="after")
    def _as_root(self) -> HarborTaskConfig:
        for section in ("agent", "verifier"):
            user = getattr(self, section).user
            if user is not None and str(user) not in ROOT_USERS:
                raise ValueError(
                    f"{section}.user {user!r} is not supported: crabray runs the agent, the "
                    "oracle and the tests as one user, the image's USER (root), which must be "
                    f"able to make /tests and /logs; remove {section}.user"
                )
        return self


def read_task_toml(file: Path) -> tuple[HarborTaskConfig | None, list[ConfigError]]:
    """The task's settings, or the problems of its ``task.toml`` (each with its field)."""
    try:
        raw = tomllib.loads(file.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        return None, [ConfigError(f"cannot be read: {exc}", file=str(file))]
    except tomllib.TOMLDecodeError as exc:
        return None, [ConfigError(f"is not valid TOML: {exc}", file=str(file))]
    try:
        return HarborTaskConfig.model_validate(raw), []
    except ValidationError as exc:
        return None, [
            ConfigError(
                error["msg"].removeprefix("Value error, "),
                file=str(file),
                field=".".join(str(part) for part in error["loc"]) or None,
            )
            for error in exc.errors()
        ]


_TEMPLATE = re.compile(r"\$\{(?P<name>[A-Za-z_][A-Za-z0-9_]*)(?::-(?P<default>[^}]*))?\}")


def resolve_env(values: dict[str, str], where: str) -> dict[str, str]:
    """Harbor's ``${VAR}`` and ``${VAR:-default}`` filled from the worker's environment.

    Raises:
        ConfigError: A ``${VAR}`` without default is not set on the worker.
    """

    def fill(match: re.Match[str]) -> str:
        found = os.environ.get(match["name"])
        if found is not None:
            return found
        if match["default"] is not None:
            return match["default"]
        raise ConfigError(
            f"needs ${{{match['name']}}}, which is not set in the worker's environment: "
            "export it before the run",
            field=where,
        )

    return {key: _TEMPLATE.sub(fill, value) for key, value in values.items()}
