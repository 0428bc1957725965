"""Other tools' own readers, each in a virtual environment of its own, for the export tests.

``crabray export`` writes Inspect AI's eval logs, Harbor's ATIF trajectories and
JSON Lines for Hugging Face ``datasets``; the tests read them back with those
libraries, never with a schema written here. Each library is installed from
PyPI, at a pinned version, into a venv of its own (as ``scripts/bench_peers.py``
installs its peers), never into crabray's: Harbor needs Python 3.12 or newer,
and none of them belongs among crabray's dependencies.

The venvs are cached under ``~/.cache/crabray/readers`` (``CRABRAY_READERS_CACHE``
overrides it), one folder per reader named by a hash of its Python and pinned
packages, so a second test session reuses them and a new pin makes a new venv.
Made on first use, under a lock (tests may run in parallel). From an empty pip
cache they took 80 s for Inspect AI, 15 s for Harbor's models and 60 s for
``datasets`` on this machine; about 50 s together with pip's cache warm. Where one
cannot be made (no Python 3.12, no package index) the test is skipped with the
reason, unless CI=true, where it fails.
"""

from __future__ import annotations

import fcntl
import glob
import hashlib
import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest


@dataclass(frozen=True)
class Reader:
    """A tool whose reader the tests run: what to install, on which Python."""

    name: str
    packages: tuple[str, ...]
    """Installed with their dependencies."""
    python: str = "current"
    """``current``: the Python running the tests; ``3.12``: a Python 3.12 found on the machine."""
    without_dependencies: tuple[str, ...] = ()
    """Installed alone (``pip install --no-deps``): ``packages`` names what they need here."""


INSPECT = Reader("inspect", ("inspect-ai==0.3.285",))
HARBOR = Reader(
    "harbor", ("pydantic>=2.12",), python="3.12", without_dependencies=("harbor==0.25.0",)
)
"""Harbor's trajectory models (``harbor.models.trajectories``, its ``trajectory_validator``)
import pydantic alone; its other requirements (litellm, supabase, fastapi, ...) run jobs, and
took 3 minutes to install here from an empty pip cache, where this takes seconds."""
DATASETS = Reader("datasets", ("datasets==5.2.0",))

INSTALL_TIMEOUT_SEC = 600


def cache_root() -> Path:
    """Where the readers' venvs are kept."""
    given = os.environ.get("CRABRAY_READERS_CACHE")
    return Path(given) if given else Path.home() / ".cache" / "crabray" / "readers"


def _unavailable(reason: str) -> None:
    """Skip the test for ``reason``, or fail it under CI, where every reader must be had."""
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(reason)
    pytest.skip(reason)


def _base_python(reader: Reader) -> tuple[str, str]:
    """The Python the reader's venv is made from, and its ``sys.version``.

    A Python 3.12 is looked for on PATH, then among pyenv's versions (a pyenv shim
    on PATH may name a version that is not selected, and fail: it is skipped).
    """
    if reader.python == "current":
        candidates = [sys.executable]
    else:
        candidates = [
            found for found in (shutil.which(f"python{reader.python}"),) if found is not None
        ] + sorted(glob.glob(str(Path.home() / f".pyenv/versions/{reader.python}*/bin/python3")))
    for candidate in candidates:
        probe = subprocess.run(
            [candidate, "-c", "import sys, venv; print(sys.version)"],
            capture_output=True,
            text=True,
            check=False,
        )
        if probe.returncode == 0:
            return candidate, probe.stdout.strip()
    _unavailable(
        f"{reader.name} needs Python {reader.python}, which is not on this machine: install it "
        f"(Debian: apt-get install python{reader.python}-venv; or pyenv install "
        f"{reader.python}) so python{reader.python} is on PATH"
    )
    raise AssertionError("unreachable")  # _unavailable skips or fails


def reader_python(reader: Reader) -> Path:
    """The Python of ``reader``'s venv, made (and cached) on first use."""
    base, version = _base_python(reader)
    pins = [*reader.packages, *(f"{name} (alone)" for name in reader.without_dependencies)]
    key = hashlib.sha256("\n".join([version, *pins]).encode()).hexdigest()[:12]
    venv = cache_root() / f"{reader.name}-{key}"
    python = venv / "bin" / "python"
    marker = venv / ".installed"
    if marker.exists():
        return python
    cache_root().mkdir(parents=True, exist_ok=True)
    with open(cache_root() / f".{reader.name}-{key}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if marker.exists():  # another test process made it while this one waited
            return python
        shutil.rmtree(venv, ignore_errors=True)  # a half-made one, from an interrupted install
        pip = [str(python), "-m", "pip", "install", "--quiet"]
        steps = [[base, "-m", "venv", str(venv)], [*pip, *reader.packages]]
        if reader.without_dependencies:
            steps.append([*pip, "--no-deps", *reader.without_dependencies])
        for step in steps:
            done = subprocess.run(
                step, capture_output=True, text=True, timeout=INSTALL_TIMEOUT_SEC, check=False
            )
            if done.returncode != 0:
                shutil.rmtree(venv, ignore_errors=True)
                lines = [
                    line
                    for line in (done.stderr or done.stdout).splitlines()
                    if not line.startswith("WARNING:")
                ]
                _unavailable(
                    f"cannot install {' '.join(pins)} into a venv of its own "
                    f"(needs PyPI): {' '.join(lines)[-400:]}"
                )
        marker.write_text("\n".join(pins) + "\n")
    return python


def read_back(reader: Reader, program: str, *args: str, timeout: float = 300) -> Any:
    """Run ``program`` with ``args`` in ``reader``'s venv; what it printed last, as JSON.

    The program prints one JSON value on its last line: what the reader saw, for
    the test to assert on. A reader that raises fails the test with its traceback.
    """
    python = reader_python(reader)
    done = subprocess.run(
        [str(python), "-c", program, *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, "HF_DATASETS_OFFLINE": "1", "HF_HUB_OFFLINE": "1"},
        check=False,
    )
    if done.returncode != 0:
        pytest.fail(f"{reader.name}'s reader failed:\n{done.stdout[-3000:]}\n{done.stderr[-6000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])
