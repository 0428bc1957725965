"""Names a package loads on first use (PEP 562), for packages whose imports every command pays."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping
from typing import Any


def lazy_getattr(package: str, names: Mapping[str, str]) -> Callable[[str], Any]:
    """A module-level ``__getattr__`` for ``package`` that imports ``names[name]`` on first use.

    The value is then kept in the package's namespace, so the import is paid
    once and later lookups never reach this function. An unknown name raises
    the ``AttributeError`` Python would, which ``hasattr`` and ``from ...
    import`` rely on.
    """

    def __getattr__(name: str) -> Any:
        module = names.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        vars(sys.modules[package])[name] = value
        return value

    return __getattr__
