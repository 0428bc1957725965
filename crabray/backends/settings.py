"""Backend settings: one base model and one parser, so every backend reports problems alike.

An environment's ``backend_settings`` are checked against its backend's model
(:attr:`crabray.backends.base.Backend.settings_model`) before a run starts and
again when a sandbox is made, so a typo fails at once, naming the setting.

Example:
    >>> from pydantic import Field
    >>> class ShellSettings(BackendSettings):
    ...     shell: str = Field(default="/bin/sh", description="Shell of string commands.")
    >>> parse_settings(ShellSettings, {"shell": "bash"}, "shell").shell
    'bash'
    >>> parse_settings(ShellSettings, {"shel": "bash"}, "shell")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    crabray.core.errors.ConfigError: backend_settings.shel: ... did you mean 'shell'?
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from typing import Any, ClassVar, TypeVar

from pydantic import BaseModel, ConfigDict, ValidationError

from crabray.core.errors import ConfigError


class BackendSettings(BaseModel):
    """Base of every backend's settings model: unknown settings are errors, values frozen."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    whole_field: ClassVar[str | None] = None
    """The setting to name when a check concerns the settings as a whole (a model
    validator, e.g. docker's "neither image nor build"); without it such a
    problem is named ``(settings)``."""


S = TypeVar("S", bound=BackendSettings)


def parse_settings(model: type[S], settings: Mapping[str, Any], backend: str) -> S:
    """Validate a backend's ``backend_settings`` so a typo fails before any sandbox exists.

    Every backend parses its settings through this one function, so they all
    report problems the same way: each bad field named, an unknown one with
    the known names and a did-you-mean hint. The pydantic error is not chained
    (``from None``): its text would echo the rejected input, which may be a
    password.

    Args:
        model: The backend's settings model.
        settings: The environment's ``backend_settings``.
        backend: The backend's registry name, for the message.

    Returns:
        The validated settings.

    Raises:
        ConfigError: A setting is unknown, missing or has the wrong type; the
            message names every bad field and ``field`` the first one.
    """
    try:
        return model.model_validate(settings)
    except ValidationError as exc:
        errors = exc.errors(include_input=False)
        known = sorted(model.model_fields)
        whole_field = model.whole_field
        problems: list[str] = []
        for error in errors:
            name = ".".join(str(part) for part in error["loc"]) or whole_field or "(settings)"
            if error["type"] == "extra_forbidden":
                close = difflib.get_close_matches(name, known, n=1)
                hint = f"; did you mean '{close[0]}'?" if close else ""
                message = f"unknown setting (known: {', '.join(known)}){hint}"
            else:
                message = error["msg"]
            problems.append(f"'{name}': {message}")
        first = ".".join(str(part) for part in errors[0]["loc"]) or whole_field
        raise ConfigError(
            f"bad settings for the '{backend}' backend: {'; '.join(problems)}",
            field=f"backend_settings.{first}" if first else "backend_settings",
        ) from None
