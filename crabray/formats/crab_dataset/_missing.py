"""Optional modules a dataset's subtask modules import but this machine lacks.

CRAB's subtask modules import heavy packages at their top (``cv2``,
``easyocr``, ``torch``) that only some evaluators use. So that one missing
package fails only the tasks that need it, the dataset's modules are imported
with a finder that stands in a :class:`MissingModule` for each top-level
module that is not installed, when (and only when) the ``import`` statement is
in one of the dataset's own files: a library's own ``try: import x`` keeps its
``ImportError``.

While the modules import, a placeholder is lenient (calls, attributes,
subclassing give further placeholders), so module-level code such as
``reader = easyocr.Reader(...)`` runs; afterwards any use raises
:class:`MissingModuleError` naming the module. The stand-ins leave
``sys.modules`` once the import is done.

A placeholder travels to a sandbox as its own import line (``import cv2``,
``from numpy.linalg import norm``), so an evaluator that runs in its sandbox
imports the module there. :func:`missing_modules` finds, for an action that
runs in the episode, the missing modules its code reaches.
"""

from __future__ import annotations

import contextlib
import functools
import importlib.abc
import importlib.machinery
import importlib.util
import inspect
import sys
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from crabray.core import Action
from crabray.core.errors import ConfigError

UNSUPPORTED_MODULES = ("crab.actions.android_actions", "crabray.actions.android_actions")
"""Modules of CRAB's that crabray does not have: Android's ADB actions (no Android backend)."""

CRAB = "crab"
"""CRAB's package name; a dataset's ``crab`` imports mean ``crabray`` when it is not installed."""

_lenient_depth = 0
"""Above zero while a dataset's modules import: placeholders then absorb what is done to them."""


class MissingModuleError(ConfigError):
    """Code on this machine used a module a dataset imported but that is not installed."""


def _error(path: str, module: str, importer: str) -> MissingModuleError:
    return MissingModuleError(
        f"uses '{path}', but the Python module '{module}' is not installed where the episode "
        f"runs (imported by {importer}); install it there"
    )


class MissingModule(types.ModuleType):
    """Stands for a module that is not installed; a package, so its submodules import too."""

    def __init__(self, name: str, importer: str) -> None:
        super().__init__(name)
        self.__path__: list[str] = []
        module = name if name in UNSUPPORTED_MODULES else name.partition(".")[0]
        self.__crabray_missing__ = (module, importer)

    def __getattr__(self, attr: str) -> Any:
        if attr.startswith("__"):
            raise AttributeError(attr)
        module, importer = self.__crabray_missing__
        return MissingValue(self.__name__, attr, module, importer)


class MissingValue:
    """A name taken from a missing module (``from numpy.linalg import norm``), or what was made
    from one while the dataset imported."""

    def __init__(self, owner: str, name: str, module: str, importer: str) -> None:
        # Read by the sandbox's source shipping: ``from <owner> import <name>``.
        self.__dict__["__module__"] = owner
        self.__dict__["__qualname__"] = name
        self.__dict__["__crabray_missing__"] = (module, importer)

    @property
    def _path(self) -> str:
        return f"{self.__dict__['__module__']}.{self.__dict__['__qualname__']}"

    def _derived(self, suffix: str) -> MissingValue:
        module, importer = self.__dict__["__crabray_missing__"]
        if _lenient_depth:
            return MissingValue(self._path, suffix, module, importer)
        raise _error(self._path, module, importer)

    def __getattr__(self, attr: str) -> Any:
        if attr.startswith("__"):
            raise AttributeError(attr)
        module, importer = self.__dict__["__crabray_missing__"]
        return MissingValue(self._path, attr, module, importer)

    def __call__(self, *args: Any, **kwargs: Any) -> MissingValue:
        return self._derived("()")

    def __getitem__(self, key: Any) -> MissingValue:
        return self._derived("[]")

    def __or__(self, other: Any) -> MissingValue:  # annotations: ``_Element | None``
        return self._derived("|")

    __ror__ = __or__

    def __mro_entries__(self, bases: tuple[Any, ...]) -> tuple[type, ...]:
        self._derived("(subclassed)")
        return (object,)

    def _refuse(self, *args: Any) -> Any:
        module, importer = self.__dict__["__crabray_missing__"]
        raise _error(self._path, module, importer)

    __bool__ = __iter__ = __len__ = __contains__ = __enter__ = __exit__ = _refuse
    __int__ = __float__ = __index__ = __str__ = _refuse
    __add__ = __sub__ = __mul__ = __truediv__ = __lt__ = __gt__ = __le__ = __ge__ = _refuse

    def __repr__(self) -> str:
        return f"<missing {self._path}>"


def missing_of(value: Any) -> tuple[str, str] | None:
    """(module, importing file) when ``value`` stands for something not installed."""
    if isinstance(value, MissingModule | MissingValue):
        found: tuple[str, str] = value.__dict__["__crabray_missing__"]
        return found
    return None


class _Finder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Last on ``sys.meta_path``: answers for modules no other finder found."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.stood_in: dict[str, str] = {}

    def find_spec(
        self, fullname: str, path: Any = None, target: types.ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        top = fullname.partition(".")[0]
        if fullname in UNSUPPORTED_MODULES and self._importer() is not None:
            self.stood_in.setdefault(fullname, self._importer() or "")
            return importlib.machinery.ModuleSpec(fullname, self, is_package=True)
        if top != fullname and top not in self.stood_in:
            return None
        importer = self._importer()
        if top == fullname and importer is None:
            return None
        self.stood_in.setdefault(top, importer or "")
        return importlib.machinery.ModuleSpec(fullname, self, is_package=True)

    def _importer(self) -> str | None:
        """The dataset file whose ``import`` statement asked, if it was one of the dataset's."""
        frame = sys._getframe(2)
        while frame is not None and frame.f_code.co_filename.startswith("<frozen importlib"):
            frame = frame.f_back  # type: ignore[assignment]
        if frame is None:
            return None
        file = Path(frame.f_code.co_filename)
        return file.name if file.is_relative_to(self.folder) else None

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        name = spec.name if spec.name in self.stood_in else spec.name.partition(".")[0]
        return MissingModule(spec.name, self.stood_in[name])

    def exec_module(self, module: types.ModuleType) -> None:
        return None


class _CrabAlias(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """First on ``sys.meta_path``: ``crab`` and ``crab.x``, imported by the dataset's files,
    are crabray's own modules (not fresh copies of them)."""

    def __init__(self, finder: _Finder) -> None:
        self.finder = finder
        self.specs: dict[str, importlib.machinery.ModuleSpec | None] = {}

    def find_spec(
        self, fullname: str, path: Any = None, target: types.ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname.partition(".")[0] != CRAB or fullname in UNSUPPORTED_MODULES:
            return None
        if fullname == CRAB and self.finder._importer() is None:
            return None
        return importlib.machinery.ModuleSpec(fullname, self)

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        module = importlib.import_module("crabray" + spec.name.removeprefix(CRAB))
        self.specs[module.__name__] = module.__spec__
        return module

    def exec_module(self, module: types.ModuleType) -> None:
        # The import system gave crabray's module the alias's spec: it keeps its own.
        module.__spec__ = self.specs[module.__name__]


def _crab_installed() -> bool:
    return CRAB in sys.modules or importlib.util.find_spec(CRAB) is not None


@contextlib.contextmanager
def standing_in(folder: Path) -> Iterator[dict[str, str]]:
    """Import a dataset's modules under this: missing modules get placeholders.

    Yields the modules stood in for, with the file that imported each; they
    leave ``sys.modules`` on exit, so later imports elsewhere fail as usual.
    """
    global _lenient_depth
    finder = _Finder(folder.resolve())
    alias = None if _crab_installed() else _CrabAlias(finder)
    sys.meta_path.append(finder)
    if alias is not None:
        sys.meta_path.insert(0, alias)
    _lenient_depth += 1
    try:
        yield finder.stood_in
    finally:
        _lenient_depth -= 1
        sys.meta_path.remove(finder)
        if alias is not None:
            sys.meta_path.remove(alias)
        _forget(alias is not None)


def _forget(aliased: bool) -> None:
    """Take the stand-ins (and the ``crab`` names, when aliased) out of ``sys.modules``, and
    the stand-ins off the packages the import bound them to (``crabray.actions``)."""
    gone = [
        name
        for name, module in sys.modules.items()
        if isinstance(module, MissingModule) or (aliased and name.partition(".")[0] == CRAB)
    ]
    for name in gone:
        module = sys.modules[name]
        parent, _, child = name.rpartition(".")
        if isinstance(module, MissingModule) and getattr(sys.modules.get(parent), child, None):
            delattr(sys.modules[parent], child)
    for name in gone:
        del sys.modules[name]


def missing_modules(act: Action) -> dict[str, str]:
    """The missing modules (and the files importing them) the code of ``act`` reaches here.

    ``act`` runs in the episode; an action it reaches that runs in its sandbox
    (a plain part of ``~a`` or ``a & b``) is not followed.

    Follows the function's global names and closure, into functions and
    classes of the same module and the attributes of its module-level objects;
    an action that runs in its sandbox imports its modules there, so callers
    ask only about actions that run in the episode.
    """
    found: dict[str, str] = {}
    _walk(act.entry, found, set(), None)
    return found


def _walk(obj: Any, found: dict[str, str], seen: set[int], home: str | None) -> None:
    if id(obj) in seen:
        return
    seen.add(id(obj))
    missing = missing_of(obj)
    if missing is not None:
        found.setdefault(*missing)
        return
    if isinstance(obj, Action):
        if not obj.runs_in_sandbox:  # a part that runs in its sandbox imports there
            _walk(obj.entry, found, seen, None)
    elif isinstance(obj, functools.partial):
        _walk(obj.func, found, seen, home)
        for value in (*obj.args, *obj.keywords.values()):
            _walk(value, found, seen, home)
    elif inspect.isfunction(obj):
        if home is not None and obj.__module__ != home:
            return
        for name in _names(obj.__code__):
            if name in obj.__globals__:
                _walk(obj.__globals__[name], found, seen, obj.__module__)
        for cell in obj.__closure__ or ():
            with contextlib.suppress(ValueError):
                _walk(cell.cell_contents, found, seen, obj.__module__)
    elif inspect.isclass(obj):
        if obj.__module__ == home:
            for value in vars(obj).values():
                _walk(value, found, seen, home)
    elif home is not None and type(obj).__module__ == home:
        for value in getattr(obj, "__dict__", {}).values():
            _walk(value, found, seen, home)


def _names(code: types.CodeType) -> set[str]:
    names = set(code.co_names)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            names |= _names(const)
    return names
