"""Sandboxes behind one interface, and the registry that names them.

A backend is chosen by ``EnvironmentConfig.backend`` (a kind such as
``local``) and built with :func:`create_backend`. Shipped kinds are imported
lazily from a module path, so a kind whose optional dependency is missing
fails with an install hint when it is asked for, not when crabray is imported.
Other backends register themselves with :func:`register_backend`, or are
declared by an installed package in the ``crabray.backends`` entry-point group
(see ``docs/plugins.md``).

Example:
    >>> from crabray.backends import create_backend
    >>> from crabray.core.environment import EnvironmentConfig
    >>> backend = create_backend(EnvironmentConfig(name="shell"))
    >>> backend.kind
    'local'
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from crabray.backends.base import Backend, ExecResult
from crabray.core.environment import EnvironmentConfig
from crabray.core.errors import ConfigError, MissingDependencyError, UnknownNameError
from crabray.core.registry import Registry

if TYPE_CHECKING:
    from crabray.backends.local import LocalBackend

__all__ = [
    "Backend",
    "ExecResult",
    "LocalBackend",
    "available_backends",
    "backend_class",
    "create_backend",
    "register_backend",
]

logger = logging.getLogger(__name__)

BackendT = TypeVar("BackendT", bound=type[Backend])

ENTRY_POINT_GROUP = "crabray.backends"
"""Where an installed package declares ``kind = "module:BackendClass"``."""


def _accept(kind: str, cls: Any) -> type[Backend]:
    if not (isinstance(cls, type) and issubclass(cls, Backend)):
        raise TypeError(f"backend '{kind}' must be a Backend subclass, got {cls!r}")
    return cls


def _name_class(kind: str, cls: type[Backend]) -> None:
    """The registry name and the class's ``kind`` never disagree."""
    cls.kind = kind


_BACKENDS: Registry[type[Backend]] = Registry(
    "backend", group=ENTRY_POINT_GROUP, field="backend", accept=_accept, on_register=_name_class
)
"""Backend classes by kind: shipped kinds are imported only when asked for."""
_BACKENDS.add_lazy("local", "crabray.backends.local:LocalBackend")
# Each optional kind names the extra (pyproject.toml) that installs what it needs.
for _kind, _target in (
    ("docker", "crabray.backends.docker:DockerBackend"),
    ("ssh", "crabray.backends.ssh:SshBackend"),
    ("vm", "crabray.backends.vm:VmBackend"),
):
    _BACKENDS.add_lazy(_kind, _target, install_hint=f"pip install 'crabray[{_kind}]'")


def register_backend(kind: str) -> Callable[[BackendT], BackendT]:
    """Class decorator that makes a ``Backend`` subclass available as ``kind``.

    Sets the class's ``kind``, so the registry name and the class never disagree.

    Args:
        kind: The name environment configs use in their ``backend`` field.

    Returns:
        The decorator, which returns the class unchanged otherwise.

    Raises:
        TypeError: The decorated object is not a ``Backend`` subclass.
        DuplicateNameError: Another class is already registered under ``kind``
            (a ``ConfigError``).
    """

    def decorate(cls: BackendT) -> BackendT:
        if not (isinstance(cls, type) and issubclass(cls, Backend)):
            raise TypeError(f"@register_backend({kind!r}) needs a Backend subclass, got {cls!r}")
        _BACKENDS.register(kind, cls)
        return cls

    return decorate


def available_backends() -> list[str]:
    """Every backend kind that can be asked for by name, sorted.

    This lists shipped and registered kinds without importing them: a shipped
    kind whose optional dependency is missing is listed, and fails with an
    install hint in :func:`create_backend`.
    """
    return _BACKENDS.available()


def create_backend(config: EnvironmentConfig) -> Backend:
    """Build (but do not start) the sandbox ``config`` asks for.

    Args:
        config: The environment; its ``backend`` field names the kind and
            ``backend_settings`` are checked by the backend's constructor.

    Returns:
        A backend in its unstarted state; call ``start()`` before using it.

    Raises:
        ConfigError: The kind is unknown (lists the known ones), its optional
            dependency is missing (says what to install), or its settings are bad.
    """
    return _backend_class(config.backend, config.name)(config)


def backend_class(kind: str, env_name: str | None = None) -> type[Backend]:
    """The backend class registered as ``kind`` (for environment ``env_name``, if given).

    Raises:
        ConfigError: The kind is unknown, or its optional dependency is missing.
    """
    return _backend_class(kind, env_name)


def _backend_class(kind: str, env_name: str | None) -> type[Backend]:
    whose = "an environment" if env_name is None else f"environment '{env_name}'"
    try:
        return _BACKENDS.get(kind)
    except UnknownNameError as exc:
        raise ConfigError(
            f"{whose} asks for unknown backend '{kind}'; known backends: {', '.join(exc.known)}",
            field="backend",
        ) from None
    except MissingDependencyError as exc:
        hint = f"; install it with: {exc.install_hint}" if exc.install_hint else ""
        raise ConfigError(
            f"backend '{kind}' of {whose} needs the missing package '{exc.missing}'{hint}",
            field="backend",
        ) from exc


def __getattr__(name: str) -> Any:
    """Import ``LocalBackend`` on first use, so importing the layer stays cheap."""
    if name == "LocalBackend":
        return _backend_class("local", "<import>")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
