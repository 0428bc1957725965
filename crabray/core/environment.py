"""``EnvironmentConfig``: how to make one sandbox and what an agent may do and see there.

``Environment`` is CRAB's in-process environment, for code written against
CRAB's API (constructing one directly, ``step``, ``take_action``); an episode
gives actions its own environment objects, with the same ``trajectory``.
"""

from __future__ import annotations

import logging
from typing import Any, NoReturn

from pydantic import BaseModel, ConfigDict, Field, field_validator

from crabray.core.actions import Action
from crabray.core.env import AgentSignals, TrajectoryEntry
from crabray.core.errors import ActionError
from crabray.core.naming import check_identifier

logger = logging.getLogger(__name__)

"""One step as CRAB records it: the action's name, its arguments, its return value."""

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
        reset: Actions run in this environment after its sandbox is reset, before task
            setup: one action (CRAB's form), a list, or ``None``.
        backend: Registry name of the sandbox backend (``local``, ``docker``, ...).
        backend_settings: The backend's own options (image, limits, host, ...).
        host_kind: The kind of host the sandbox needs (a node must advertise slots
            of it); the backend's name when unset. Operators may name their own
            kinds, such as an image family.
        label_selector: Node labels the hosting node must carry, e.g.
            ``{"crabray-image": "ubuntu-22.04"}``.
        settings_source: Where ``backend_settings`` came from when a suite
            format read them from a file of its own; problems are reported there.
        extra_attributes: Attributes set on the environment object actions receive
            as ``env`` at the start of each episode (CRAB's field).
        remote_url: CRAB's field, refused when set: ``backend`` says where the
            sandbox is.
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
    extra_attributes: dict[str, Any] = Field(default_factory=dict)
    remote_url: str | None = None

    @field_validator("remote_url")
    @classmethod
    def _no_remote_url(cls, value: str | None) -> None:
        if value is not None:
            raise ValueError(
                "is CRAB's unauthenticated action server, which crabray does not use; give the "
                "environment a backend instead (backend='ssh' or 'vm' with backend_settings)"
            )
        return None

    @field_validator("reset", mode="before")
    @classmethod
    def _reset_as_list(cls, value: Any) -> Any:
        if value is None:
            return []
        return [value] if isinstance(value, Action) else value

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


class Environment:
    """CRAB's environment, in this process: runs actions with ``env`` set to itself.

    For code written against CRAB's API (its tests construct one directly). It
    records every ``step`` in ``trajectory``, as the environments of an episode
    do, and ``extra_attributes`` become attributes, as in CRAB.

    Args:
        name: The environment's name.
        action_space: Actions ``step`` may run, by name.
        observation_space: Closed actions ``observe`` runs.
        description: What this environment is.
        reset: An action (or list of them) ``reset`` runs.
        remote_url: Not supported: a crabray environment is a sandbox named by an
            ``EnvironmentConfig``'s backend, not a URL.
        extra_attributes: Set as attributes of the environment.

    Raises:
        ActionError: ``remote_url`` was given.
    """

    def __init__(
        self,
        name: str,
        action_space: list[Action],
        observation_space: list[Action],
        description: str = "",
        reset: Action | list[Action] | None = None,
        remote_url: str | None = None,
        extra_attributes: dict[str, Any] | None = None,
    ) -> None:
        if remote_url is not None:
            raise ActionError(
                f"environment '{name}': remote_url is not supported; give its EnvironmentConfig "
                "a backend (local, docker, ssh, vm) and run it with `crabray run`"
            )
        self.name = name
        self.description = description
        self.trajectory: list[TrajectoryEntry] = []
        self.signals = AgentSignals()
        self.observation_history: list[dict[str, Any]] = []
        self._origin_action_space = list(action_space)
        self._action_map = {a.name: a for a in action_space}
        self._observation_space = list(observation_space)
        self._reset = [] if reset is None else [reset] if isinstance(reset, Action) else reset
        for key, value in (extra_attributes or {}).items():
            setattr(self, key, value)

    @property
    def action_space(self) -> list[Action]:
        """The actions ``step`` may run."""
        return list(self._action_map.values())

    @property
    def observation_space(self) -> list[Action]:
        """The actions ``observe`` runs."""
        return list(self._observation_space)

    def step(self, action_name: str, parameters: dict[str, Any] | None = None) -> Any:
        """Run the action called ``action_name`` and record it in ``trajectory``.

        Raises:
            ActionError: No action of the action space has that name.
        """
        action = self._action_map.get(action_name)
        if action is None:
            raise ActionError(
                f"environment '{self.name}' has no action '{action_name}'; "
                f"its actions: {sorted(self._action_map)}"
            )
        arguments = dict(parameters or {})
        result = self.take_action(action, arguments)
        self.trajectory.append((action.name, arguments, result))
        return result

    def take_action(self, action: Action, parameters: dict[str, Any] | None = None) -> Any:
        """Run ``action`` here (``env`` is this environment), without recording it."""
        return action.run(self, **(parameters or {}))

    def _action_endpoint(self, action: Action, parameters: dict[str, Any]) -> Any:
        """CRAB's private name for ``take_action``, which CRAB's shipped evaluators call."""
        return self.take_action(action, parameters)

    def observe(self) -> dict[str, Any]:
        """Run every observation action; their results by name."""
        result = {o.name: self.take_action(o) for o in self._observation_space}
        self.observation_history.append(result)
        return result

    def observe_with_prompt(
        self, prompt_tools: dict[str, Action]
    ) -> tuple[dict[str, Any], dict[str, Any]]:
        """Observe, and render each observation that has a prompting tool (CRAB's API).

        Args:
            prompt_tools: By observation name, an action whose one required
                parameter takes the observation; it returns the prompt.

        Returns:
            (observations, prompts) by observation name.
        """
        observations = self.observe()
        prompts = {}
        for name, value in observations.items():
            tool = prompt_tools.get(name)
            if tool is not None:
                required = tool.required_parameters
                if len(required) != 1:
                    raise ActionError(
                        f"prompting tool '{tool.name}' of observation '{name}' must take the "
                        f"observation as its one required parameter; it requires {required}"
                    )
                prompts[name] = self.take_action(tool, {required[0]: value})
        return observations, prompts

    def set_action(self, action: Action) -> None:
        """Add ``action`` to the action space, replacing one of the same name."""
        self._action_map[action.name] = action

    def start(self) -> None:
        """Start the environment (nothing to do in this process)."""

    def close(self) -> None:
        """Close the environment (nothing to do in this process)."""

    def reset(self) -> None:
        """Restore the original action space and run the reset actions."""
        self._action_map = {a.name: a for a in self._origin_action_space}
        for action in self._reset:
            self.take_action(action)

    def exec(
        self,
        command: str | list[str],
        *,
        timeout_sec: float | None = None,
        cwd: str | None = None,
        env: dict[str, str] | None = None,
    ) -> NoReturn:
        """Refused: this environment has no sandbox to run a command in.

        Raises:
            ActionError: Always, naming how to get a sandbox.
        """
        raise self._no_sandbox("run a command")

    def put_file(self, path: str, data: bytes) -> NoReturn:
        """Refused: this environment has no sandbox to write a file in.

        Raises:
            ActionError: Always, naming how to get a sandbox.
        """
        raise self._no_sandbox(f"write {path}")

    def get_file(self, path: str, *, max_bytes: int | None = None) -> NoReturn:
        """Refused: this environment has no sandbox to read a file from.

        Raises:
            ActionError: Always, naming how to get a sandbox.
        """
        raise self._no_sandbox(f"read {path}")

    def screenshot(self) -> NoReturn:
        """Refused: this environment has no screen.

        Raises:
            ActionError: Always, naming how to get a sandbox.
        """
        raise self._no_sandbox("take a screenshot")

    def _no_sandbox(self, what: str) -> ActionError:
        return ActionError(
            f"environment '{self.name}' runs in this process and has no sandbox to {what} in: "
            "give its EnvironmentConfig a backend and run the task with `crabray run` (or "
            "crabray.evaluate)"
        )

    def __repr__(self) -> str:
        """The class and the name, e.g. ``Environment('root')``."""
        return f"Environment({self.name!r})"


def create_environment(config: EnvironmentConfig) -> Environment:
    """CRAB's factory: an in-process ``Environment`` from an ``EnvironmentConfig``."""
    return Environment(
        name=config.name,
        action_space=config.action_space,
        observation_space=config.observation_space,
        description=config.description,
        reset=config.reset,
        extra_attributes=config.extra_attributes,
    )
