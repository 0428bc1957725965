"""Turning an action's function into source the guest can run: text, never bytecode or pickles.

The host and the guest may run different Python minor versions, so a
function travels as its source (dedented, decorators stripped) plus what it
needs from its module: modules it uses become ``import`` lines, functions and
classes of the same module travel as their own source, plain constants as
literals, closure values likewise. Imports inside the function resolve in the
guest, against the guest's packages.
"""

from __future__ import annotations

import ast
import builtins
import functools
import inspect
import textwrap
import types
from collections.abc import Callable
from typing import Any

from crabray.core.errors import ActionError

SourceUnit = tuple[str, int, str]
"""(file name, first line in that file, text): compiled in the guest with the line numbers kept."""

_LITERALS = (str, int, float, bool, type(None))


@functools.cache
def function_units(func: Callable[..., Any]) -> tuple[SourceUnit, ...]:
    """The source units that define ``func`` in a fresh namespace: what it needs, then itself.

    Raises:
        ActionError: The source is unavailable (a function typed at a prompt, a lambda,
            a builtin), or it uses a module-level object that cannot travel as text.
    """
    units: list[SourceUnit] = []
    _add(func, units, set(), func.__name__)
    return tuple(units)


def _add(obj: Any, units: list[SourceUnit], seen: set[int], owner: str) -> None:
    """Append the units ``obj`` needs, then ``obj``'s own definition."""
    if id(obj) in seen:
        return
    seen.add(id(obj))
    unit, tree = _definition(obj, owner)
    scope = dict(getattr(obj, "__globals__", None) or vars(inspect.getmodule(obj) or types))
    scope.update(_closure(obj))
    lines: list[str] = []
    for name in sorted(_loaded_names(tree.body[0])):
        if name not in scope or (name not in _closure(obj) and hasattr(builtins, name)):
            continue
        value = scope[name]
        if value is obj:
            continue
        if _same_module(value, obj) and (inspect.isfunction(value) or inspect.isclass(value)):
            _add(value, units, seen, owner)
        else:
            lines.append(_binding(name, value, owner))
    if lines:
        units.append((f"<crabray:{owner} globals>", 1, "\n".join(lines) + "\n"))
    units.append(unit)


def _definition(obj: Any, owner: str) -> tuple[SourceUnit, ast.Module]:
    try:
        lines, first = inspect.getsourcelines(obj)
        filename = inspect.getsourcefile(obj) or f"<{obj.__name__}>"
    except (OSError, TypeError) as exc:
        raise ActionError(
            f"action '{owner}' cannot run in its sandbox: the source of "
            f"{getattr(obj, '__qualname__', obj)!r} is unavailable ({exc}); define it in a "
            "module file, or give it the parameter 'env' or local=True to run it in the episode"
        ) from exc
    text = textwrap.dedent("".join(lines))
    tree = ast.parse(text)
    node = tree.body[0]
    if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
        raise ActionError(f"action '{owner}': {obj!r} is not a def or class statement")
    start = node.lineno - 1  # the def line: decorators above it are dropped
    body = "".join(text.splitlines(True)[start:])
    return (filename, first + start, body), tree


def _closure(obj: Any) -> dict[str, Any]:
    if not inspect.isfunction(obj) or not obj.__closure__:
        return {}
    return {
        name: cell.cell_contents
        for name, cell in zip(obj.__code__.co_freevars, obj.__closure__, strict=True)
    }


def _loaded_names(node: ast.stmt) -> set[str]:
    """Names the definition reads, leaving out its decorators and annotations (not run there)."""
    skipped: set[int] = set()
    for sub in ast.walk(node):
        for part in getattr(sub, "decorator_list", []):
            skipped.update(id(n) for n in ast.walk(part))
        for field in ("returns", "annotation"):
            part = getattr(sub, field, None)
            if isinstance(part, ast.AST):
                skipped.update(id(n) for n in ast.walk(part))
    return {
        n.id
        for n in ast.walk(node)
        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load) and id(n) not in skipped
    }


def _same_module(value: Any, obj: Any) -> bool:
    return getattr(value, "__module__", None) == getattr(obj, "__module__", None)


def _binding(name: str, value: Any, owner: str) -> str:
    """One line that binds ``name`` to ``value`` in the guest."""
    if isinstance(value, types.ModuleType):
        return f"import {value.__name__} as {name}" if value.__name__ != name else f"import {name}"
    if _is_literal(value):
        return f"{name} = {value!r}"
    module, qualname = getattr(value, "__module__", None), getattr(value, "__qualname__", None)
    if module and qualname and "<" not in qualname and module != "__main__":
        return f"from {module} import {qualname} as {name}"
    raise ActionError(
        f"action '{owner}' cannot run in its sandbox: it uses the module-level name '{name}' "
        f"({type(value).__name__}), which cannot be sent as source; import it inside the "
        "function, or give the function the parameter 'env' to run it in the episode"
    )


def _is_literal(value: Any) -> bool:
    if isinstance(value, _LITERALS):
        return not isinstance(value, float) or (value == value and abs(value) != float("inf"))
    if isinstance(value, list | tuple | set | frozenset):
        return all(_is_literal(v) for v in value)
    if isinstance(value, dict):
        return all(_is_literal(k) and _is_literal(v) for k, v in value.items())
    return False
