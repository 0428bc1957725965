"""``EnvironmentConfig``: how to make one sandbox and what an agent may do and see there."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from crabray.core.action import Action
from crabray.core.naming import check_identifier

ROOT_ENV = "root"
"""Name of the environment that holds submit/complete/fail and local evaluators."""


class SettingsSource(BaseModel):
    """Where an environment's ``backend_settings`` were written, when not in the suite's own files.

    A suite format that reads the settings from a file of its own (task-JSON's
    ``snapshots.toml``) records it here, so the check of every environment's
    settings before a run names that file and table, not the environment.
    """

    model_config = ConfigDict(frozen=True)

    file: str = Field(description="The file holding the settings, e.g. a suite's snapshots.toml.")
    field: str = Field(
        description="Where in the file: the table holding the settings, e.g. 'docker.default'."
    )


class EnvironmentConfig(BaseModel):
    """One sandbox an agent acts in: its backend, actions and observations.

    Args:
        name: Identifier of the environment; qualifies action names when a task
            has several environments.
        action_space: Actions the agent may call here.
        observation_space: Actions run after every step whose results the agent sees.
        description: Shown to the agent, so it knows what this machine is.
        reset: Actions run after the sandbox is reset, before task setup.
        backend: Registry name of the sandbox backend (``local``, ``docker``, ...).
        backend_settings: The backend's own options (image, limits, host, ...).
        host_kind: The kind of host the sandbox needs (a node must advertise slots
            of it); the backend's name when unset. Operators may name their own
            kinds, such as an image family.
        label_selector: Node labels the hosting node must carry, e.g.
            ``{"crabray-image": "ubuntu-22.04"}``.
        settings_source: Where ``backend_settings`` came from when a suite
            format read them from a file of its own; problems are reported there.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    name: str
    action_space: list[Action] = Field(default_factory=list)
    observation_space: list[Action] = Field(default_factory=list)
    description: str = ""
    reset: list[Action] = Field(default_factory=list)
    backend: str = "local"
    backend_settings: dict[str, Any] = Field(default_factory=dict)
    host_kind: str | None = None
    label_selector: dict[str, str] = Field(default_factory=dict)
    settings_source: SettingsSource | None = None

    @field_validator("host_kind")
    @classmethod
    def _kind_is_identifier(cls, value: str | None) -> str | None:
        return None if value is None else check_identifier(value, "host kind")

    @property
    def kind(self) -> str:
        """The host kind this environment's sandbox needs a slot of."""
        return self.host_kind or self.backend

    @field_validator("name")
    @classmethod
    def _name_is_identifier(cls, value: str) -> str:
        if value == ROOT_ENV:
            raise ValueError(f"'{ROOT_ENV}' is reserved for submit/complete/fail")
        return check_identifier(value, "environment name")

    @field_validator("action_space")
    @classmethod
    def _unique_actions(cls, actions: list[Action]) -> list[Action]:
        for act in actions:
            check_identifier(act.name, "action name (what the agent calls it)")
        names = [a.name for a in actions]
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            raise ValueError(f"duplicate action names: {', '.join(duplicates)}")
        return actions

    def action(self, name: str) -> Action | None:
        """The action of this environment called ``name``, if any."""
        return next((a for a in self.action_space if a.name == name), None)
