"""Sandbox definitions under ``envs/``: find them and build their images.

Each ``envs/NAME/`` folder holds a ``build.sh`` that makes the image
``crabray/NAME:latest`` from scratch (no registry is reachable on the hosts
crabray targets). ``crabray envs build NAME`` runs it, and the docker backend
runs it on first use when an environment names the build and its image is
missing. Builds of one name are serialised with a file lock, so two sandboxes
starting at once on one host do not build the same image twice.
"""

from __future__ import annotations

import fcntl
import hashlib
import logging
import os
import re
import subprocess
import tempfile
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from crabray.core.errors import ConfigError, SandboxError

logger = logging.getLogger(__name__)

BUILD_SCRIPT = "build.sh"
"""The script in ``envs/NAME/`` that builds the env's image."""

ENVS_DIR_VAR = "CRABRAY_ENVS_DIR"
"""Environment variable naming the ``envs`` folder, when it is not the repository's."""

_TAIL_LINES = 15
"""Lines of a failed build's output quoted in its error."""


def envs_dir() -> Path:
    """The folder holding the env definitions.

    ``$CRABRAY_ENVS_DIR`` when set, else ``envs/`` of the current directory when
    it exists, else ``envs/`` beside the ``crabray`` package (a source checkout).
    """
    configured = os.environ.get(ENVS_DIR_VAR)
    if configured:
        return Path(configured).expanduser()
    here = Path.cwd() / "envs"
    if here.is_dir():
        return here
    return Path(__file__).resolve().parents[2] / "envs"


def available_envs() -> list[str]:
    """Names of the env definitions that have a build script, sorted."""
    root = envs_dir()
    if not root.is_dir():
        return []
    return sorted(p.parent.name for p in root.glob(f"*/{BUILD_SCRIPT}"))


def env_image(name: str) -> str:
    """The image an env's build script makes: ``crabray/NAME:latest``."""
    return f"crabray/{name}:latest"


INPUTS_LABEL = "crabray.env-inputs"
"""The label of an env's docker image holding :func:`inputs_digest` of what built it: an
image whose label differs is out of date and is built again on first use."""

_BASE_REFERENCE = re.compile(r"crabray/([a-z0-9][a-z0-9-]*):latest|\.\./([a-z0-9][a-z0-9-]*)/")


def inputs_digest(name: str) -> str:
    """What env ``name``'s image is made from, as a digest: the files of ``envs/NAME``
    (READMEs and dot-files aside) and, in turn, the inputs of the envs it builds on
    (:func:`env_bases`).

    Raises:
        ConfigError: There is no such env.
    """
    build_script(name)
    return _digest(name, frozenset({name}))


def env_bases(name: str) -> list[str]:
    """The envs env ``name`` builds on: those whose image (``crabray/OTHER:latest``) or
    script (``../OTHER/``) its files name, sorted."""
    named = {a or b for a, b in _BASE_REFERENCE.findall("\n".join(_inputs(name).values()))}
    return sorted((named & set(available_envs())) - {name})


def _inputs(name: str) -> dict[str, str]:
    """The files an env's image is made from, by name (READMEs and dot-files aside)."""
    return {
        file.name: file.read_bytes().decode("utf-8", errors="surrogateescape")
        for file in sorted((envs_dir() / name).iterdir())
        if file.is_file() and not file.name.startswith(".") and file.name != "README.md"
    }


def _digest(name: str, seen: frozenset[str]) -> str:
    digest = hashlib.sha256()
    for file, text in _inputs(name).items():
        data = text.encode("utf-8", errors="surrogateescape")
        digest.update(f"{file}\0{len(data)}\0".encode() + data)
    for base in env_bases(name):
        if base not in seen:
            digest.update(f"{base}\0{_digest(base, seen | {base})}".encode())
    return digest.hexdigest()[:16]


def build_script(name: str) -> Path:
    """The build script of env ``name``.

    Raises:
        ConfigError: There is no such env; lists the ones there are.
    """
    script = envs_dir() / name / BUILD_SCRIPT
    if "/" in name or name.startswith(".") or not script.is_file():
        known = ", ".join(available_envs()) or "none"
        raise ConfigError(
            f"no env build '{name}': {script} does not exist (envs in {envs_dir()}: {known}; "
            f"set ${ENVS_DIR_VAR} to use another folder)",
            field="backend_settings.build",
        )
    return script


def build_env(
    name: str,
    *,
    image: str | None = None,
    on_line: Callable[[str], None] | None = None,
    unless: Callable[[], bool] | None = None,
) -> str:
    """Run env ``name``'s build script and wait for it.

    Args:
        name: The folder under ``envs/``.
        image: The image name to build (``CRABRAY_IMAGE`` of the script);
            ``crabray/NAME:latest`` by default.
        on_line: Called with every line the script prints (progress); lines
            go to the debug log as well.
        unless: Checked once the build lock is held; when it returns True the
            build is skipped (another process built the image meanwhile).

    Returns:
        The image name built.

    Raises:
        ConfigError: There is no such env.
        SandboxError: The script failed; quotes the end of its output and says
            how to rerun it.
    """
    script = build_script(name)
    target = image or env_image(name)
    tail: deque[str] = deque(maxlen=_TAIL_LINES)
    logger.debug("building env '%s' as %s with %s", name, target, script)
    with build_lock(name):
        if unless is not None and unless():
            logger.debug("env '%s': %s appeared while waiting for the build lock", name, target)
            return target
        try:
            proc = subprocess.Popen(
                ["bash", str(script)],
                cwd=script.parent,
                env={**os.environ, "CRABRAY_IMAGE": target},
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
                errors="replace",
            )
        except OSError as exc:
            raise SandboxError(f"cannot run the build script {script}: {exc}") from exc
        if proc.stdout is None:
            raise SandboxError("internal error: the build script's output pipe is missing")
        for raw in proc.stdout:
            line = raw.rstrip("\n")
            tail.append(line)
            logger.debug("envs/%s: %s", name, line)
            if on_line is not None:
                on_line(line)
        code = proc.wait()
    if code != 0:
        output = "\n".join(tail)
        raise SandboxError(
            f"building image {target} with {script} failed (exit {code}); "
            f"rerun `crabray envs build {name}` to see it all. Last lines:\n{output}"
        )
    return target


@contextmanager
def build_lock(name: str) -> Iterator[None]:
    """Hold the host-wide lock of env ``name``'s build.

    Callers that only build when an image is missing check again once they
    hold it: another process may have built the image meanwhile.
    """
    path = Path(tempfile.gettempdir()) / f"crabray-envs-build-{name}.lock"
    with open(path, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
