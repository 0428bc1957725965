"""Sandboxes behind one interface, and the registry that names them.

A backend is chosen by ``EnvironmentConfig.backend`` (a kind such as
``local``) and built with :func:`create_backend`. A backend class declares
its kind once, as ``Backend.kind``; the registry files it under that name.
Shipped kinds are imported lazily from their package ``crabray.backends.<kind>``,
so a kind whose optional dependency is missing fails with an install hint when
it is asked for, not when crabray is imported. Other backends register
themselves with :func:`register_backend`, or are declared by an installed
package in the ``crabray.backends`` entry-point group (see ``docs/plugins.md``).

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
from typing import TYPE_CHECKING, Any, TypeVar, overload

from crabray.backends.base import Backend, ExecResult
from crabray.core.environment import EnvironmentConfig
from crabray.core.errors import ConfigError, MissingDependencyError, UnknownNameError
from crabray.core.registry import Registry
from crabray.core.words import did_you_mean

if TYPE_CHECKING:
    from crabray.backends.local import LocalBackend

__all__ = [
    "Backend",
    "ExecResult",
    "LocalBackend",
    "available_backends",
    "backend_class",
    "create_backend",
    "known_backend",
    "register_backend",
]

logger = logging.getLogger(__name__)

BackendT = TypeVar("BackendT", bound=type[Backend])

ENTRY_POINT_GROUP = "crabray.backends"
"""Where an installed package declares ``kind = "module:BackendClass"``."""


def _accept(kind: str, cls: Any) -> type[Backend]:
    """A ``Backend`` subclass whose own ``kind``, if it declares one, is ``kind``.

    A class that declares its ``kind`` is filed under it and nothing else; one
    that declares none (a plugin's subclass of a shipped backend, named by its
    entry point or ``@register_backend("name")``) takes the name (:func:`_name_class`).

    Raises:
        TypeError: Not a ``Backend`` subclass, or it declares another kind.
    """
    if not (isinstance(cls, type) and issubclass(cls, Backend)):
        raise TypeError(f"backend '{kind}' must be a Backend subclass, got {cls!r}")
    declared = cls.__dict__.get("kind")
    if declared is not None and declared != kind:
        raise TypeError(
            f"{cls.__module__}.{cls.__qualname__} declares kind '{declared}' but is "
            f"registered as backend '{kind}'"
        )
    return cls


def _name_class(kind: str, cls: type[Backend]) -> None:
    """A class registered without a ``kind`` of its own takes the name it is registered under."""
    cls.kind = kind


_BACKENDS: Registry[type[Backend]] = Registry(
    "backend", group=ENTRY_POINT_GROUP, field="backend", accept=_accept, on_register=_name_class
)
"""Backend classes by kind: shipped kinds are imported only when asked for."""

_SHIPPED = {
    "local": ("LocalBackend", False),
    "docker": ("DockerBackend", True),
    "ssh": ("SshBackend", True),
    "vm": ("VmBackend", True),
}
"""Each shipped kind: the class its package ``crabray.backends.<kind>`` exports (which
declares that kind), and whether it needs the extra of the same name (pyproject.toml)."""

for _kind, (_class, _extra) in _SHIPPED.items():
    _BACKENDS.add_lazy(_kind, f"crabray.backends.{_kind}:{_class}", extra=_kind if _extra else "")


@overload
def register_backend(kind: BackendT, /) -> BackendT: ...


@overload
def register_backend(kind: str, /) -> Callable[[BackendT], BackendT]: ...


def register_backend(kind: str | BackendT, /) -> BackendT | Callable[[BackendT], BackendT]:
    """Class decorator that makes a ``Backend`` subclass available under its kind.

    Bare (``@register_backend``), it files the class under the ``kind`` the class
    declares. Given a name (``@register_backend("mine")``), it files the class
    under that name and sets the class's ``kind`` to it, so the registry name and
    the class never disagree.

    Args:
        kind: The name environment configs use in their ``backend`` field, or the
            class itself (bare use).

    Returns:
        The class unchanged (bare), or the decorator that returns it unchanged.

    Raises:
        TypeError: The decorated object is not a ``Backend`` subclass, or (bare) the
            class declares no ``kind`` of its own.
        DuplicateNameError: Another class is already registered under the kind
            (a ``ConfigError``).
    """
    if not isinstance(kind, str):
        declared = kind.__dict__.get("kind") if isinstance(kind, type) else None
        if not isinstance(declared, str):
            raise TypeError(
                f"@register_backend needs a Backend subclass that declares its kind "
                f'(kind = "..."), or a name: @register_backend("name"); got {kind!r}'
            )
        return _register(declared, kind)
    name = kind

    def decorate(cls: BackendT) -> BackendT:
        return _register(name, cls)

    return decorate


def _register(kind: str, cls: BackendT) -> BackendT:
    if not (isinstance(cls, type) and issubclass(cls, Backend)):
        raise TypeError(f"@register_backend({kind!r}) needs a Backend subclass, got {cls!r}")
    _BACKENDS.register(kind, cls)
    return cls


def available_backends() -> list[str]:
    """Every backend kind that can be asked for by name, sorted.

    This lists shipped and registered kinds without importing them: a shipped
    kind whose optional dependency is missing is listed, and fails with an
    install hint in :func:`create_backend`.
    """
    return _BACKENDS.available()


def known_backend(kind: str) -> str:
    """``kind`` if a backend of that kind can be asked for: what ``--backend`` and a run
    file's ``backend`` are checked by, once, before any environment asks for it.

    Raises:
        ConfigError: No backend has that kind; the message suggests the closest kinds
            and lists every one.
    """
    known = available_backends()
    if kind in known:
        return kind
    raise ConfigError(
        f"unknown backend '{kind}'{did_you_mean(kind, known)} (known: {', '.join(known)})"
    )


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
        hint = did_you_mean(kind, list(exc.known))
        raise ConfigError(
            f"{whose} asks for unknown backend '{kind}'{hint}; known backends: "
            f"{', '.join(exc.known)}",
            field="backend",
        ) from None
    except MissingDependencyError as exc:
        hint = f"; install it with: {exc.install_hint}" if exc.install_hint else ""
        raise MissingDependencyError(
            f"backend '{kind}' of {whose} needs the missing package '{exc.missing}'{hint}",
            name=kind,
            missing=exc.missing,
            install_hint=exc.install_hint,
            field="backend",
        ) from exc


def __getattr__(name: str) -> Any:
    """Import ``LocalBackend`` on first use, so importing the layer stays cheap."""
    if name == "LocalBackend":
        return _backend_class("local", "<import>")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
