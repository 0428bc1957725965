"""Suite loaders: each format turns files on disk into ordinary ``Task`` objects.

``load_suite`` detects the format (or takes it), loads and validates every
task, and reports all problems at once. Workers call it with the same
``SuiteRef`` the driver used; a loaded suite is cached per process. A format
is a ``SuiteFormat`` registered with ``register_format`` (``formats/base.py``);
another package adds one through the ``crabray.formats`` entry-point group.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from crabray.core.lazy import lazy_getattr

if TYPE_CHECKING:
    from crabray.formats.base import SuiteFormat, available_formats, register_format
    from crabray.formats.options import SuiteOptions
    from crabray.formats.resolve import load_suite, resolve_suite
    from crabray.formats.suite import Suite, SuiteEntry, SuiteErrors, SuiteRef

# Loaded on first use (PEP 562): a run's settings take ``SuiteOptions`` without
# importing the loaders and the authoring model behind them.
_NAMES = {
    "Suite": "crabray.formats.suite",
    "SuiteEntry": "crabray.formats.suite",
    "SuiteErrors": "crabray.formats.suite",
    "SuiteRef": "crabray.formats.suite",
    "SuiteFormat": "crabray.formats.base",
    "available_formats": "crabray.formats.base",
    "register_format": "crabray.formats.base",
    "SuiteOptions": "crabray.formats.options",
    "load_suite": "crabray.formats.resolve",
    "resolve_suite": "crabray.formats.resolve",
}

__getattr__ = lazy_getattr(__name__, _NAMES)

__all__ = [
    "Suite",
    "SuiteEntry",
    "SuiteErrors",
    "SuiteFormat",
    "SuiteOptions",
    "SuiteRef",
    "available_formats",
    "load_suite",
    "register_format",
    "resolve_suite",
]
