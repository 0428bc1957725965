"""One typed registry behind every pluggable name: backends, agents, suite formats, task functions.

A :class:`Registry` maps names to objects of one type. Objects enter it three ways:

- by decorator at import time (``@register_backend`` calls
  :meth:`Registry.register`);
- as a lazy entry ``"module:attr"`` (:meth:`Registry.add_lazy`): crabray's own
  kinds with optional dependencies are imported only when asked for, so a
  missing package fails with an install hint when the kind is used, not when
  crabray is imported;
- from the Python entry points of the registry's ``group``, which another
  installed package declares in its ``pyproject.toml``. They are read (never
  imported) the first time a name is not found or the names are listed, and
  read again whenever ``sys.path`` has changed since.

Two different objects under one name is an error (:class:`DuplicateNameError`);
registering the same object again, or a reloaded copy of it (same qualified
name), is not. See ``docs/plugins.md`` for the entry-point groups.

Pure Python: nothing here imports Ray or Docker.

Example:
    >>> widgets: Registry[type] = Registry("widget")
    >>> widgets.add_lazy("ordered", "collections:OrderedDict")
    >>> widgets.available()
    ['ordered']
    >>> widgets.get("ordered").__name__
    'OrderedDict'
    >>> widgets.get("nope")
    Traceback (most recent call last):
    crabray.core.errors.UnknownNameError: unknown widget 'nope'; known: ordered
"""

from __future__ import annotations

import importlib
import importlib.metadata
import logging
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from crabray.core.errors import (
    ConfigError,
    DuplicateNameError,
    MissingDependencyError,
    UnknownNameError,
)
from crabray.core.install import extra_install_command

__all__ = ["LazyEntry", "Registry", "qualified_name"]

logger = logging.getLogger(__name__)

T = TypeVar("T")


@dataclass(frozen=True)
class LazyEntry:
    """An entry imported only when first asked for."""

    target: str
    """``module:attr`` (``attr`` may be dotted), or a bare module imported for its side effects."""
    install_hint: str = ""
    """What to install when the import fails on a missing package (``pip install ...``)."""
    origin: str = "crabray"
    """Who declared it, for error messages: ``crabray`` or an entry point of a package."""
    extra: str = ""
    """crabray's optional extra the target needs (``docker``): when the import fails, the
    hint is the command that installs that extra into this install of crabray
    (:func:`crabray.core.install.extra_install_command`), unless ``install_hint`` is given."""

    def hint(self) -> str:
        """The command that installs what the target is missing, or empty."""
        if self.install_hint or not self.extra:
            return self.install_hint
        return extra_install_command(self.extra)


def qualified_name(obj: object) -> str:
    """``module.QualName`` of a class or function; of its class for any other object.

    The identity two registrations are compared by: a module imported twice
    gives new objects with the same qualified name, which is not a conflict.
    """
    named = isinstance(obj, type) or (callable(obj) and hasattr(obj, "__qualname__"))
    target = obj if named else type(obj)
    return f"{getattr(target, '__module__', '?')}.{getattr(target, '__qualname__', '?')}"


class Registry(Generic[T]):
    """Names to objects of one kind, filled by decorators, lazy targets and entry points.

    Args:
        label: What an entry is, for messages (``backend``, ``format``, ``setup function``).
        group: The entry-point group other packages declare entries in; ``None`` for none.
        field: The option or field that names an entry, put on the errors raised.
        accept: Checks (and may convert) an object before it is stored; raises
            ``TypeError`` for an object of the wrong kind. Identity when ``None``.
        on_register: Called with the name and the stored object (a class learns its name).
        identity: What two registrations are compared by (:func:`qualified_name`).
        plugin_modules: The group's entry points name modules that register their
            objects with a decorator when imported (task functions), rather than
            one object per name; they are all imported on a miss or a listing.
    """

    def __init__(
        self,
        label: str,
        *,
        group: str | None = None,
        field: str | None = None,
        accept: Callable[[str, Any], T] | None = None,
        on_register: Callable[[str, T], None] | None = None,
        identity: Callable[[T], str] = qualified_name,
        plugin_modules: bool = False,
    ) -> None:
        self.label = label
        self.group = group
        self.field = field
        self._accept = accept
        self._on_register = on_register
        self._identity = identity
        self._plugin_modules = plugin_modules
        self._loaded: dict[str, T] = {}
        self._lazy: dict[str, LazyEntry] = {}
        self._order: dict[str, None] = {}
        self._scanned: tuple[str, ...] | None = None
        self._lock = threading.RLock()

    def register(self, name: str, obj: Any) -> T:
        """Store ``obj`` under ``name`` (what the registering decorators call).

        Returns:
            The stored object (``obj`` after ``accept``).

        Raises:
            DuplicateNameError: A different object is registered under ``name``.
            TypeError: ``accept`` refuses ``obj``.
        """
        with self._lock:
            existing = self._loaded.get(name)
            if existing is not None and existing is obj:
                return existing
            if existing is not None and self._identity(existing) != self._identity(obj):
                raise DuplicateNameError(
                    f"{self.label} '{name}' is already registered by {self._identity(existing)}; "
                    f"{self._identity(obj)} must choose another name",
                    field=self.field,
                )
            stored = self._accept(name, obj) if self._accept is not None else obj
            self._loaded[name] = stored
            self._order.setdefault(name, None)
            if self._on_register is not None:
                self._on_register(name, stored)
        logger.debug("registered %s '%s': %s", self.label, name, self._identity(stored))
        return stored

    def add_lazy(self, name: str, target: str, *, install_hint: str = "", extra: str = "") -> None:
        """Declare ``name`` as ``target`` (``module:attr``), imported when first asked for.

        Args:
            name: The registry name.
            target: Where the object lives.
            install_hint: The command that installs the target's optional dependency.
            extra: crabray's optional extra that has the target's dependency: the
                hint is then made from it, for the way crabray was installed.
        """
        with self._lock:
            self._lazy[name] = LazyEntry(target, install_hint, extra=extra)
            self._order.setdefault(name, None)

    def get(self, name: str) -> T:
        """The object registered as ``name``, importing it (or a plugin) if needed.

        Raises:
            UnknownNameError: No entry has that name; the message lists the known names.
            MissingDependencyError: Importing the entry failed on a missing package;
                the message names it and what to install.
            DuplicateNameError: Two different objects claim ``name``.
        """
        found = self._loaded.get(name)
        if found is not None:
            return found
        with self._lock:
            entry = self._lazy.get(name)
            if entry is None and name not in self._loaded:
                self._discover()
                entry = self._lazy.get(name)
            if name in self._loaded:
                return self._loaded[name]
            if entry is None:
                known = self.available()
                raise UnknownNameError(
                    f"unknown {self.label} '{name}'; known: {', '.join(known)}",
                    name=name,
                    known=known,
                    field=self.field,
                )
            imported = self._import(name, entry)
            if name in self._loaded:  # the module registered it itself, with its decorator
                return self._loaded[name]
            return self.register(name, imported)

    def available(self) -> list[str]:
        """Every name that can be asked for, sorted, without importing lazy entries.

        Entry points are read, not imported (except a ``plugin_modules`` group's,
        whose names are only known once imported).
        """
        with self._lock:
            self._discover()
            return sorted(self._order)

    def names(self) -> list[str]:
        """Every name in the order it was first declared or registered (crabray's first)."""
        with self._lock:
            self._discover()
            return list(self._order)

    def __contains__(self, name: object) -> bool:
        """Whether ``name`` can be asked for (without importing it)."""
        return isinstance(name, str) and name in self.available()

    def copy(self) -> Registry[T]:
        """An independent registry with the same entries (tests register into a copy)."""
        clone: Registry[T] = Registry(
            self.label,
            group=self.group,
            field=self.field,
            accept=self._accept,
            on_register=self._on_register,
            identity=self._identity,
            plugin_modules=self._plugin_modules,
        )
        with self._lock:
            clone._loaded = dict(self._loaded)
            clone._lazy = dict(self._lazy)
            clone._order = dict(self._order)
            clone._scanned = self._scanned
        return clone

    def _discover(self) -> None:
        """Read the group's entry points, unless ``sys.path`` is what it was at the last read."""
        if self.group is None:
            return
        path = tuple(sys.path)
        if path == self._scanned:
            return
        for point in importlib.metadata.entry_points(group=self.group):
            origin = f"entry point '{point.name}'"
            dist = getattr(point, "dist", None)
            if dist is not None:
                origin += f" of package '{dist.name}'"
            entry = LazyEntry(point.value, origin=origin)
            if self._plugin_modules:
                self._import(point.name, entry)
                continue
            lazy = self._lazy.get(point.name)
            if lazy is not None and lazy.target == entry.target:
                continue
            if lazy is not None:
                raise DuplicateNameError(
                    f"{self.label} '{point.name}' is declared by {origin} ({entry.target}) and "
                    f"by {lazy.origin} ({lazy.target}); uninstall one of them",
                    field=self.field,
                )
            if point.name in self._loaded:
                self.register(point.name, self._import(point.name, entry))
            else:
                self._lazy[point.name] = entry
                self._order.setdefault(point.name, None)
                logger.debug("found %s '%s' in %s", self.label, point.name, origin)
        self._scanned = path

    def _import(self, name: str, entry: LazyEntry) -> Any:
        """The object ``entry`` names, imported now.

        Raises:
            MissingDependencyError: A package the target needs is not installed.
            ConfigError: The module has no such attribute.
        """
        module_name, _, attr = entry.target.partition(":")
        try:
            obj: Any = importlib.import_module(module_name.strip())
        except ImportError as exc:
            if _is_internal(exc, module_name.strip()):
                raise
            install = entry.hint()
            hint = f"; install it with: {install}" if install else ""
            where = "" if entry.origin == "crabray" else f" ({entry.origin})"
            raise MissingDependencyError(
                f"{self.label} '{name}'{where} needs the missing package '{exc.name}'{hint}",
                name=name,
                missing=exc.name,
                install_hint=install,
                field=self.field,
            ) from exc
        for part in attr.strip().split(".") if attr.strip() else []:
            try:
                obj = getattr(obj, part)
            except AttributeError as exc:
                raise ConfigError(
                    f"{self.label} '{name}': {entry.origin} names {entry.target}, "
                    f"which does not exist",
                    field=self.field,
                ) from exc
        return obj


def _is_internal(exc: ImportError, module_name: str) -> bool:
    """Whether a failed import is a bug in crabray or in the target's own package.

    Those propagate as they are; anything else is a package that is not installed.
    """
    missing = exc.name
    if missing is None:
        return False
    if missing == "crabray" or missing.startswith("crabray."):
        return True
    top = module_name.partition(".")[0]
    if missing == top:
        return not isinstance(exc, ModuleNotFoundError)
    return missing.startswith(top + ".")
