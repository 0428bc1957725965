"""The typed registry behind task-JSON's ``config`` and ``evaluation`` entries.

Four kinds of functions, each registered by a decorator:

- ``@setup_function``: a ``config`` step, ``f(ctx, **arguments) -> Any``.
- ``@evaluation_function``: an ``evaluation``, ``f(ctx, **arguments) -> float | bool``.
- ``@getter("type")``: the older variant's ``result``/``expected`` getters,
  ``f(ctx, **parameters) -> value``.
- ``@metric``: the older variant's metrics, ``f(result, expected, **options) -> float``.

The signature after ``ctx`` (after ``result, expected`` for metrics) is the
schema: a pydantic model is built from it, so a task's arguments validate at
load time and a bad one is an error naming the file and the field. A
parameter annotated ``LocalPath`` is a path relative to the task folder; one
that escapes it, or names no file there, is refused at load time.

A suite adds functions in a Python file at its root; an installed package adds
them for every suite by naming, in the ``crabray.task_json_functions``
entry-point group, a module that registers them with these decorators. Those
modules are imported the first time a name is not found or the names are
listed (see ``docs/plugins.md``).

Example (in a suite's ``functions.py``):
    >>> from crabray.formats.task_json import evaluation_function
    >>> @evaluation_function
    ... def file_is_empty(ctx, vm_path: str) -> bool:  # doctest: +SKIP
    ...     return ctx.read_sandbox(vm_path) == b""
"""

from __future__ import annotations

import inspect
import logging
import typing
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import UnionType
from typing import Annotated, Any, Literal, Protocol, TypeVar, overload

from pydantic import BaseModel, ConfigDict, ValidationError, create_model
from pydantic_core import ErrorDetails

from crabray.core.env import Env
from crabray.core.errors import ActionError, SandboxFileError
from crabray.core.registry import Registry

logger = logging.getLogger(__name__)

Kind = Literal["setup", "evaluation", "getter", "metric"]


class _LocalMarker:
    """Marks a parameter as a path relative to the task folder."""

    def __repr__(self) -> str:
        return "LocalPath"


LOCAL = _LocalMarker()
LocalPath = Annotated[str, LOCAL]
"""A path relative to the task folder (never leaving it); other paths are in the sandbox."""


class TaskContext:
    """What a task-JSON function works with: the sandbox and the task's folder.

    Args:
        env: The episode's environment (``exec``, ``get_file``, ``put_file``, ``signals``).
        task_dir: The folder holding the task's JSON file and its sibling files.
    """

    def __init__(self, env: Env, task_dir: Path) -> None:
        self.env = env
        self.task_dir = task_dir

    def local_path(self, path: str) -> Path:
        """The file ``path`` of the task folder.

        Raises:
            SandboxFileError: ``path`` is absolute or leaves the task folder.
        """
        return resolve_local(self.task_dir, path)

    def read_local(self, path: str) -> bytes:
        """The bytes of ``path`` in the task folder.

        Raises:
            SandboxFileError: The path leaves the task folder, or the file is missing.
        """
        target = self.local_path(path)
        if not target.is_file():
            raise SandboxFileError(f"no file '{path}' in the task folder {self.task_dir}")
        return target.read_bytes()

    def read_sandbox(self, path: str) -> bytes:
        """The bytes of ``path`` in the sandbox (see ``Backend.get_file``)."""
        data: bytes = self.env.get_file(path)
        return data

    def read_sandbox_text(self, path: str) -> str:
        """The text of ``path`` in the sandbox, undecodable bytes replaced."""
        return self.read_sandbox(path).decode("utf-8", errors="replace")

    @property
    def agent_failed(self) -> bool:
        """Whether the agent ended the episode with ``fail`` (its last action)."""
        signals = getattr(self.env, "signals", None)
        return bool(signals is not None and signals.failed)


def resolve_local(task_dir: Path, path: str) -> Path:
    """``path`` inside ``task_dir``, refusing absolute paths and ``..`` escapes.

    Raises:
        SandboxFileError: The path is absolute or resolves outside the folder.
    """
    root = task_dir.resolve()
    if Path(path).is_absolute():
        raise SandboxFileError(f"'{path}' must be relative to the task folder, not absolute")
    target = (root / path).resolve()
    if not target.is_relative_to(root):
        raise SandboxFileError(f"'{path}' leaves the task folder {root}")
    return target


CheckFn = Callable[[dict[str, Any], Path], list[tuple[str, str]]]
"""Extra load-time check of validated arguments: returns (field, problem) pairs."""


@dataclass(frozen=True)
class TaskFunction:
    """One registered function and the model its JSON arguments validate against."""

    name: str
    kind: Kind
    func: Callable[..., Any]
    parameters: type[BaseModel]
    local_paths: tuple[str, ...] = ()
    check: CheckFn | None = None
    source: str = field(default="")

    def validate(
        self, arguments: Any, task_dir: Path
    ) -> tuple[dict[str, Any], list[tuple[str, str]]]:
        """Validate ``arguments``; return them typed, and every problem as (field, message).

        Local-path parameters must stay inside ``task_dir`` and name an existing file.
        """
        if not isinstance(arguments, dict):
            return {}, [("", f"must be an object of arguments, not {type(arguments).__name__}")]
        try:
            model = self.parameters.model_validate(arguments)
        except ValidationError as exc:
            return {}, [
                (".".join(str(p) for p in err["loc"]), _message(err, self)) for err in exc.errors()
            ]
        values = {name: getattr(model, name) for name in self.parameters.model_fields}
        problems: list[tuple[str, str]] = []
        for name in self.local_paths:
            value = values.get(name)
            if value is None:
                continue
            try:
                target = resolve_local(task_dir, value)
            except SandboxFileError as exc:
                problems.append((name, str(exc)))
                continue
            if not target.is_file():
                problems.append((name, f"no file '{value}' in the task folder {task_dir}"))
        if self.check is not None and not problems:
            problems += self.check(values, task_dir)
        return values, problems


def _message(err: ErrorDetails, function: TaskFunction) -> str:
    if err["type"] == "extra_forbidden":
        known = ", ".join(function.parameters.model_fields) or "none"
        return f"'{function.name}' takes no such argument (its arguments: {known})"
    if err["type"] == "missing":
        return f"required by '{function.name}'"
    return err["msg"]


ENTRY_POINT_GROUP = "crabray.task_json_functions"
"""Where an installed package names a module whose import registers task-JSON functions."""

_FUNCTIONS: dict[Kind, Registry[TaskFunction]] = {
    kind: Registry(
        f"{kind} function",
        group=ENTRY_POINT_GROUP,
        identity=lambda entry: entry.source,
        plugin_modules=True,
    )
    for kind in typing.get_args(Kind)
}
"""One registry per kind; a plugin's functions are imported on a miss or a listing."""


def lookup(kind: Kind, name: str) -> TaskFunction:
    """The registered ``kind`` function called ``name``.

    Raises:
        UnknownNameError: None is registered (a ``ConfigError`` listing the known names).
    """
    return _FUNCTIONS[kind].get(name)


def registered(kind: Kind) -> list[str]:
    """Names of the registered ``kind`` functions, sorted."""
    return _FUNCTIONS[kind].available()


def _register(
    kind: Kind,
    func: Callable[..., Any],
    name: str | None,
    skip: int,
    check: CheckFn | None,
) -> TaskFunction:
    name = name or func.__name__
    try:
        hints = typing.get_type_hints(func, include_extras=True)
    except Exception as exc:
        raise ActionError(f"{kind} function '{name}': cannot resolve type hints: {exc}") from exc
    fields: dict[str, Any] = {}
    local: list[str] = []
    params = list(inspect.signature(func).parameters.values())[skip:]
    for param in params:
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            raise ActionError(f"{kind} function '{name}': *args/**kwargs cannot be validated")
        hint = hints.get(param.name, Any)
        if _is_local(hint):
            local.append(param.name)
        default = ... if param.default is inspect.Parameter.empty else param.default
        fields[param.name] = (hint, default)
    model = create_model(
        f"{name}_arguments",
        __config__=ConfigDict(extra="forbid", arbitrary_types_allowed=True),
        **fields,
    )
    source = f"{func.__module__}.{func.__qualname__}"
    entry = TaskFunction(name, kind, func, model, tuple(local), check, source)
    return _FUNCTIONS[kind].register(name, entry)


def _is_local(hint: Any) -> bool:
    """Whether ``hint`` is ``LocalPath``, or ``LocalPath | None``."""
    options = typing.get_args(hint) if typing.get_origin(hint) in (typing.Union, UnionType) else ()
    return any(LOCAL in getattr(each, "__metadata__", ()) for each in (hint, *options))


_F = TypeVar("_F", bound=Callable[..., Any])


class FunctionDecorator(Protocol):
    """A registering decorator, used bare (``@setup_function``) or with options."""

    @overload
    def __call__(self, func: _F, /) -> _F: ...

    @overload
    def __call__(
        self,
        func: None = None,
        /,
        *,
        name: str | None = None,
        aliases: tuple[str, ...] = (),
        check: CheckFn | None = None,
    ) -> Callable[[_F], _F]: ...


def _decorator(kind: Kind, skip: int) -> FunctionDecorator:
    @overload
    def decorate(func: _F, /) -> _F: ...

    @overload
    def decorate(
        func: None = None,
        /,
        *,
        name: str | None = None,
        aliases: tuple[str, ...] = (),
        check: CheckFn | None = None,
    ) -> Callable[[_F], _F]: ...

    def decorate(
        func: _F | None = None,
        /,
        *,
        name: str | None = None,
        aliases: tuple[str, ...] = (),
        check: CheckFn | None = None,
    ) -> _F | Callable[[_F], _F]:
        def register(f: _F) -> _F:
            for each in (name or f.__name__, *aliases):
                _register(kind, f, each, skip, check)
            return f

        return register(func) if func is not None else register

    decorate.__name__ = f"{kind}_function"
    decorate.__doc__ = f"Register a task-JSON {kind} function (usable bare or with options)."
    return decorate


setup_function = _decorator("setup", skip=1)
"""Register ``f(ctx, **arguments)`` as a ``config`` step (``@setup_function`` or with
``name=``, ``aliases=``, ``check=``)."""

evaluation_function = _decorator("evaluation", skip=1)
"""Register ``f(ctx, **arguments) -> float | bool`` as an ``evaluation`` function."""

metric = _decorator("metric", skip=2)
"""Register ``f(result, expected, **options) -> float`` as an older-variant metric."""


def getter(type_name: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Register ``f(ctx, **parameters)`` as the older variant's getter of type ``type_name``."""

    def register(func: Callable[..., Any]) -> Callable[..., Any]:
        _register("getter", func, type_name, 1, None)
        return func

    return register
