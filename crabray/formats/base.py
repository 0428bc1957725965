"""The suite-format protocol, and the registry that names formats.

A format is a :class:`SuiteFormat` subclass registered with
:func:`register_format`. It says in typed class attributes which options it
takes (``options``), which backend its tasks run on when the user names none
(``default_backend``), and which backends it refuses (``check_backend``);
``resolve_suite`` reads these instead of probing a module for flags, so a
misspelt option is a ``TypeError`` when the class is defined, not an option
silently switched off.

crabray's formats (task-json, task-folder, crab-dataset, harbor, python) are imported on first use;
an installed package adds a format in the ``crabray.formats`` entry-point group
(``name = "module:FormatClass"``, see ``docs/plugins.md``).

Example:
    >>> from crabray.formats.base import SuiteFormat, register_format
    >>> @register_format("lines")  # doctest: +SKIP
    ... class LinesFormat(SuiteFormat):
    ...     options = frozenset({"backend"})
    ...     default_backend = "local"
    ...     def detect(self, path): return path.suffix == ".lines"
    ...     def load(self, path, **options): ...
"""

from __future__ import annotations

import logging
import typing
from abc import ABC, abstractmethod
from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar, Literal, TypeVar

from crabray.core.errors import MissingDependencyError
from crabray.core.registry import Registry, qualified_name
from crabray.formats.suite import Suite, SuiteRef

__all__ = [
    "ENTRY_POINT_GROUP",
    "SUITE_OPTIONS",
    "SuiteFormat",
    "SuiteOption",
    "available_formats",
    "detect_format",
    "register_format",
    "suite_format",
]

logger = logging.getLogger(__name__)

SuiteOption = Literal["backend", "backend_settings", "index", "base_image", "services"]
"""The options ``resolve_suite`` may pass to a format's ``load``."""
SUITE_OPTIONS: frozenset[str] = frozenset(typing.get_args(SuiteOption))

ENTRY_POINT_GROUP = "crabray.formats"
"""Where an installed package declares ``name = "module:FormatClass"``."""

FormatT = TypeVar("FormatT", bound=type["SuiteFormat"])


class SuiteFormat(ABC):
    """A suite format: finds its suites on disk and loads them into ordinary ``Task``s.

    Class attributes (checked when a subclass is defined):

    - ``name``: the format's name (``--suite-format``); set by :func:`register_format`.
    - ``options``: the options its ``load`` takes besides the path; anything
      else given on the command line is refused before loading.
    - ``default_backend``: the backend its tasks run on when none is given
      (such a format takes the ``backend`` option). A format without one names
      the backends in its suites' own environments; if it takes ``backend``
      (and ``backend_settings``) all the same, they replace its environments'
      own (python suites: ``--backend docker`` tries a suite on docker).
    - ``detect_priority``: formats are tried in this order (lowest first) when
      none is given; a catch-all format (python) goes last.
    - ``ends_runs``: its ``end_run`` has something to stop. A run on a cluster then
      calls it on every node that hosted its sandboxes, which costs each a Ray task.
    """

    name: ClassVar[str]
    options: ClassVar[frozenset[SuiteOption]] = frozenset()
    default_backend: ClassVar[str | None] = None
    detect_priority: ClassVar[int] = 50
    ends_runs: ClassVar[bool] = False

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        unknown = set(cls.options) - SUITE_OPTIONS
        if unknown:
            raise TypeError(
                f"{qualified_name(cls)} declares unknown suite options {sorted(unknown)}; "
                f"known: {', '.join(sorted(SUITE_OPTIONS))}"
            )
        if cls.default_backend is not None and "backend" not in cls.options:
            raise TypeError(
                f"{qualified_name(cls)}: a format with a default_backend takes the 'backend' option"
            )

    @abstractmethod
    def detect(self, path: Path) -> bool:
        """Whether ``path`` (resolved, existing) is a suite in this format."""

    @abstractmethod
    def load(self, path: Path, **options: Any) -> Suite:
        """Load and validate every task of the suite at ``path``.

        Args:
            path: The suite (resolved).
            **options: Only names in ``options``, each given a value.

        Raises:
            SuiteErrors: Every problem, each naming its file and field.
        """

    def backend_for(self, path: Path) -> str | None:
        """The backend the suite at ``path`` runs on when the user names none.

        ``default_backend`` unless a format reads a better one off the suite
        (a task-JSON suite whose snapshots crabray ships a docker image for).
        """
        return self.default_backend

    def end_run(self, ref: SuiteRef) -> None:
        """Stop what the suite's tasks started on this host for a run that ends now.

        Called however the run ends (finished, interrupted, failed): on the run's
        driver, and, when ``ends_runs``, on every other node of the cluster that
        hosts the run's sandboxes (``crabray.cluster.runtime.run_end``), where episodes
        may have started something too. ``ref`` says where the suite is, as
        episodes load it there. Nothing by default; task folders stop their services.

        Raises:
            CrabrayError: Something could not be stopped; the message says what.
        """
        return None

    def check_backend(self, backend: str) -> None:
        """Refuse a backend this format's tasks cannot run on (any is accepted here).

        Raises:
            ConfigError: Naming ``--backend`` and why.
        """
        return None


def _accept(name: str, obj: Any) -> SuiteFormat:
    if isinstance(obj, type) and issubclass(obj, SuiteFormat):
        return obj()
    if isinstance(obj, SuiteFormat):
        return obj
    raise TypeError(f"format '{name}' must be a SuiteFormat subclass or instance, got {obj!r}")


def _name_format(name: str, fmt: SuiteFormat) -> None:
    """The registry name and the format's ``name`` never disagree."""
    type(fmt).name = name


_FORMATS: Registry[SuiteFormat] = Registry(
    "format",
    group=ENTRY_POINT_GROUP,
    field="--suite-format",
    accept=_accept,
    on_register=_name_format,
)
"""Formats by name; crabray's own are imported when first asked for."""
_FORMATS.add_lazy("task-json", "crabray.formats.task_json:TaskJsonFormat")
_FORMATS.add_lazy("task-folder", "crabray.formats.task_folder:TaskFolderFormat")
_FORMATS.add_lazy("python", "crabray.formats.python:PythonFormat")
_FORMATS.add_lazy("crab-dataset", "crabray.formats.crab_dataset:CrabDatasetFormat")
_FORMATS.add_lazy("harbor", "crabray.formats.harbor:HarborFormat")


def register_format(name: str) -> Callable[[FormatT], FormatT]:
    """Class decorator that makes a ``SuiteFormat`` subclass available as ``name``.

    The registry holds one instance of the class; the class's ``name`` is set.

    Raises:
        TypeError: The decorated object is not a ``SuiteFormat`` subclass.
        DuplicateNameError: Another format has that name (a ``ConfigError``).
    """

    def decorate(cls: FormatT) -> FormatT:
        if not (isinstance(cls, type) and issubclass(cls, SuiteFormat)):
            raise TypeError(f"@register_format({name!r}) needs a SuiteFormat subclass, got {cls!r}")
        _FORMATS.register(name, cls)
        return cls

    return decorate


def available_formats() -> list[str]:
    """The names of the suite formats crabray reads (plugins' included), sorted."""
    return _FORMATS.available()


def suite_format(name: str) -> SuiteFormat:
    """The format called ``name``.

    Raises:
        UnknownNameError: No such format; the message lists the known ones (``--suite-format``).
        MissingDependencyError: A plugin's format needs a package that is not installed.
    """
    return _FORMATS.get(name)


def detect_format(path: Path) -> SuiteFormat | None:
    """The first format, by ``detect_priority``, that recognises ``path``; ``None`` if none does.

    A plugin format whose dependency is missing is skipped (logged), so it
    cannot stop other suites from being detected.
    """
    formats: list[SuiteFormat] = []
    for name in _FORMATS.names():
        try:
            formats.append(_FORMATS.get(name))
        except MissingDependencyError as exc:
            logger.warning("format '%s' is not tried: %s", name, exc)
    formats.sort(key=lambda fmt: fmt.detect_priority)
    return next((fmt for fmt in formats if fmt.detect(path)), None)
