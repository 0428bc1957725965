"""Sandboxes behind one interface, and the registry that names them.

A backend is chosen by ``EnvironmentConfig.backend`` (a kind such as
``local``) and built with :func:`create_backend`. Shipped kinds are imported
lazily from a module path, so a kind whose optional dependency is missing
fails with an install hint when it is asked for, not when crabray is imported.
Third-party backends register themselves with :func:`register_backend`.

Example:
    >>> from crabray.backends import create_backend
    >>> from crabray.core.environment import EnvironmentConfig
    >>> backend = create_backend(EnvironmentConfig(name="shell"))
    >>> backend.kind
    'local'
"""

from __future__ import annotations

import importlib
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from crabray.backends.base import Backend, ExecResult
from crabray.core.environment import EnvironmentConfig
from crabray.core.errors import ConfigError

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


@dataclass(frozen=True)
class _KnownBackend:
    """A shipped backend: where its class lives and how to get what it needs."""

    target: str
    """``module:Class`` of the backend."""
    install_hint: str
    """What to install when importing the module fails on a missing dependency."""


_KNOWN_BACKENDS: dict[str, _KnownBackend] = {
    "local": _KnownBackend("crabray.backends.local:LocalBackend", install_hint=""),
    "docker": _KnownBackend(
        "crabray.backends.docker:DockerBackend", install_hint="pip install docker"
    ),
    "ssh": _KnownBackend("crabray.backends.ssh:SshBackend", install_hint="pip install paramiko"),
    "vm": _KnownBackend("crabray.backends.vm:VmBackend", install_hint="pip install paramiko"),
}
"""Shipped kinds, imported only when asked for (docker, ssh and vm join here)."""

_REGISTRY: dict[str, type[Backend]] = {}
"""Backend classes already imported or registered, by kind."""


def register_backend(kind: str) -> Callable[[BackendT], BackendT]:
    """Class decorator that makes a ``Backend`` subclass available as ``kind``.

    Sets the class's ``kind``, so the registry name and the class never disagree.

    Args:
        kind: The name environment configs use in their ``backend`` field.

    Returns:
        The decorator, which returns the class unchanged otherwise.

    Raises:
        TypeError: The decorated object is not a ``Backend`` subclass.
        ConfigError: Another class is already registered under ``kind``.
    """

    def decorate(cls: BackendT) -> BackendT:
        if not (isinstance(cls, type) and issubclass(cls, Backend)):
            raise TypeError(f"@register_backend({kind!r}) needs a Backend subclass, got {cls!r}")
        existing = _REGISTRY.get(kind)
        if existing is not None and _qualname(existing) != _qualname(cls):
            raise ConfigError(
                f"backend kind '{kind}' is already registered by {_qualname(existing)}; "
                f"cannot register {_qualname(cls)} too",
                field="backend",
            )
        cls.kind = kind
        _REGISTRY[kind] = cls
        logger.debug("registered backend '%s': %s", kind, _qualname(cls))
        return cls

    return decorate


def available_backends() -> list[str]:
    """Every backend kind that can be asked for by name, sorted.

    This lists shipped and registered kinds without importing them: a shipped
    kind whose optional dependency is missing is listed, and fails with an
    install hint in :func:`create_backend`.
    """
    return sorted(set(_KNOWN_BACKENDS) | set(_REGISTRY))


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


def backend_class(kind: str) -> type[Backend]:
    """The backend class registered as ``kind``.

    Raises:
        ConfigError: The kind is unknown, or its optional dependency is missing.
    """
    return _backend_class(kind, "?")


def _backend_class(kind: str, env_name: str) -> type[Backend]:
    if kind in _REGISTRY:
        return _REGISTRY[kind]
    known = _KNOWN_BACKENDS.get(kind)
    if known is None:
        raise ConfigError(
            f"environment '{env_name}' asks for unknown backend '{kind}'; "
            f"known backends: {', '.join(available_backends())}",
            field="backend",
        )
    module_name, _, class_name = known.target.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        if exc.name is not None and (exc.name == "crabray" or exc.name.startswith("crabray.")):
            raise
        hint = f"; install it with: {known.install_hint}" if known.install_hint else ""
        raise ConfigError(
            f"backend '{kind}' of environment '{env_name}' needs the missing package "
            f"'{exc.name}'{hint}",
            field="backend",
        ) from exc
    cls = getattr(module, class_name)
    if not (isinstance(cls, type) and issubclass(cls, Backend)):
        raise TypeError(f"{known.target} is not a Backend subclass")
    if _REGISTRY.get(kind) is not cls:
        register_backend(kind)(cls)
    return cls


def _qualname(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


def __getattr__(name: str) -> Any:
    """Import ``LocalBackend`` on first use, so importing the layer stays cheap."""
    if name == "LocalBackend":
        return _backend_class("local", "<import>")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
