"""The command that installs one of crabray's optional extras into the crabray that is running.

Every "needs the missing package" message ends with it, made here and nowhere
else. An install from a package index or a wheel gets ``pip install
'crabray[EXTRA]'``. An install from a source checkout (``pip install -e .``, what
``scripts/setup.sh`` makes, or ``pip install .``) gets the command that works
there: the pip of the running interpreter and the checkout, as a reader in the
checkout would type them, e.g. ``.venv/bin/pip install -e '.[docker]'``.

Where crabray came from is read once per process: its own files in a checkout,
else its installed metadata (PEP 610's ``direct_url.json``). Pure Python, like
the rest of ``core``.
"""

from __future__ import annotations

import functools
import importlib.metadata
import json
import logging
import os
import shlex
import sys
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote, urlsplit

__all__ = ["SourceInstall", "extra_install_command", "source_install"]

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class SourceInstall:
    """crabray installed from a folder of its sources (a checkout).

    Attributes:
        folder: The checkout's root (where ``pyproject.toml`` is).
        editable: Installed with ``pip install -e``: the checkout's files are the
            installed ones.
    """

    folder: Path
    editable: bool


@functools.cache
def source_install() -> SourceInstall | None:
    """The checkout crabray runs from or was installed from, or None for an index or wheel.

    crabray's own files in a folder whose ``pyproject.toml`` is crabray's are an
    editable install (or a checkout on ``sys.path``); otherwise the installed
    metadata says whether it was installed from a folder (PEP 610).
    """
    root = Path(__file__).resolve().parents[2]
    if _is_checkout(root):
        return SourceInstall(folder=root, editable=True)
    for distribution in importlib.metadata.distributions(name="crabray"):
        origin = _direct_url(distribution)
        if origin is not None:
            return origin
    return None


def _is_checkout(folder: Path) -> bool:
    """Whether ``folder`` holds crabray's sources: its ``pyproject.toml`` names crabray."""
    try:
        text = (folder / "pyproject.toml").read_text(encoding="utf-8")
    except OSError:
        return False
    return 'name = "crabray"' in text


def _direct_url(distribution: importlib.metadata.Distribution) -> SourceInstall | None:
    """The folder an installed crabray came from (``pip install FOLDER``), if it did."""
    text = distribution.read_text("direct_url.json")
    if not text:
        return None
    try:
        origin = json.loads(text)
    except ValueError:
        logger.debug("crabray's direct_url.json is not JSON: %r", text[:200])
        return None
    url = urlsplit(str(origin.get("url", "")))
    info = origin.get("dir_info")
    if url.scheme != "file" or not isinstance(info, dict):
        return None
    folder = Path(unquote(url.path))
    if not _is_checkout(folder):
        return None  # the checkout has moved or gone: its command would not work
    return SourceInstall(folder=folder, editable=bool(info.get("editable", False)))


def _as_typed(path: Path) -> str:
    """``path`` as a reader in the current folder types it: relative when under it."""
    try:
        here = Path.cwd()
    except OSError:  # the current folder was removed
        return str(path)
    return os.path.relpath(path, here) if path.is_relative_to(here) else str(path)


def _pip() -> str:
    """The running interpreter's pip: ``.venv/bin/pip`` beside it, else ``python -m pip``."""
    interpreter = Path(sys.executable)
    pip = interpreter.with_name("pip")
    if pip.is_file():
        return shlex.quote(_as_typed(pip))
    return f"{shlex.quote(_as_typed(interpreter))} -m pip"


def extra_install_command(extra: str) -> str:
    """The command that installs crabray's optional ``extra`` into the running crabray.

    Args:
        extra: The extra's name in ``pyproject.toml`` (``docker``, ``site``, ...).

    Returns:
        ``pip install 'crabray[EXTRA]'``, or from a checkout the command that
        reinstalls it there with the extra, e.g. ``.venv/bin/pip install -e '.[docker]'``.

    Example:
        >>> extra_install_command("docker")  # doctest: +SKIP
        ".venv/bin/pip install -e '.[docker]'"
    """
    source = source_install()
    if source is None:
        return f"pip install 'crabray[{extra}]'"
    target = shlex.quote(f"{_as_typed(source.folder)}[{extra}]")
    editable = " -e" if source.editable else ""
    return f"{_pip()} install{editable} {target}"
