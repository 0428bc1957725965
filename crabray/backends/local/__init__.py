"""The local backend (kind ``local``): a fresh directory on this host as the sandbox.

Commands are confined with bubblewrap when it works here (the ``isolation``
setting); see :class:`LocalBackend` for the sandbox's layout and rules. This
package's ``__init__`` is its whole public API; its ``_``-prefixed modules are
the implementation: the backend (``_backend``), its settings (``_settings``),
choosing the confinement (``_isolation``) and running it (``_bwrap``), the
sandbox's own ``/etc`` (``_etc``), commands and their process groups
(``_exec``) and the path mapping and in-sandbox file access (``_paths``).
"""

from __future__ import annotations

from crabray.backends.confinement import HOME_DIR, TMP_DIR, WORK_DIR
from crabray.backends.local._backend import LocalBackend, parse_local_settings
from crabray.backends.local._settings import Isolation, LocalSettings

__all__ = [
    "HOME_DIR",
    "TMP_DIR",
    "WORK_DIR",
    "Isolation",
    "LocalBackend",
    "LocalSettings",
    "parse_local_settings",
]
