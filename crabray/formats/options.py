"""How to read a suite beyond its path: one model, for every command that reads one."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, Field

from crabray.core.setting import setting

if TYPE_CHECKING:
    from crabray.formats.suite import SuiteRef


class SuiteOptions(BaseModel):
    """How to read a suite, beyond its path: defined once, for every command that reads one.

    A run's description (``crabray.run.RunSpec``) carries these fields; the
    ``tasks`` commands build one from their options.
    """

    format: str | None = Field(
        default=None,
        json_schema_extra=setting("--suite-format", resume="fixed"),
        description="Suite format; detected when unset.",
    )
    backend: str | None = Field(
        default=None,
        json_schema_extra=setting("--backend", resume="fixed"),
        description="Sandbox backend of formats that name none; theirs when unset.",
    )
    backend_settings: dict[str, Any] | None = Field(
        default=None,
        json_schema_extra=setting("--backend-setting", resume="fixed"),
        description="Python suites: backend settings for every environment (with backend: "
        "replacing theirs on another backend; else updating them), e.g. {image = ...}.",
    )
    index: str | None = Field(
        default=None,
        json_schema_extra=setting("--index", resume="fixed"),
        description="Task-JSON index file selecting tasks.",
    )
    base_image: str | None = Field(
        default=None,
        json_schema_extra=setting("--base-image", resume="fixed"),
        description="Task folders: the image that replaces every FROM of a Dockerfile.",
    )
    services: str | None = Field(
        default=None,
        json_schema_extra=setting("--services", resume="fixed"),
        description="Task folders: the service registry file (default services.yml).",
    )

    def resolve(self, path: str | Path) -> SuiteRef:
        """The suite at ``path`` read with these options (see :func:`resolve_suite`).

        Raises:
            ConfigError: As :func:`resolve_suite` does.
        """
        from crabray.formats.resolve import resolve_suite  # the loaders: only when resolving

        return resolve_suite(
            path,
            self.format,
            backend=self.backend,
            backend_settings=self.backend_settings,
            index=self.index,
            base_image=self.base_image,
            services=self.services,
        )
