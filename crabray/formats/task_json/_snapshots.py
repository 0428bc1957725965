"""Per-snapshot backend settings: crabray's ``snapshots.toml`` beside a task-JSON suite.

The format names a snapshot per task (``"snapshot": "jupyter"``) but no
sandbox; ``--backend`` picks the kind and this optional file gives each
snapshot its settings on that kind, such as a docker image per snapshot::

    [docker.default]          # snapshots without a table of their own
    image = "crabray/debian:latest"

    [docker.jupyter]
    image = "lab/jupyter:1.0"
    memory_mb = 2048

A snapshot's own table replaces ``default`` (they are not merged), so what a
snapshot runs with is read off one table. Each environment built from a table
carries its file and table (``EnvironmentConfig.settings_source``), so the
backend's check of its settings before a run names them.
"""

from __future__ import annotations

import tomllib
from pathlib import Path, PurePosixPath
from typing import Any

from crabray.core.env import Env
from crabray.core.environment import SettingsSource
from crabray.core.errors import ConfigError
from crabray.core.result import EpisodeFiles

SNAPSHOTS_FILE = "snapshots.toml"
SHIPPED_SNAPSHOTS = {"docker": {"jupyter": {"build": "jupyter"}}}
"""Snapshots crabray ships an image for (``envs/jupyter``), used on that backend when
``snapshots.toml`` gives the snapshot no table of its own (nor a ``default``)."""

SHARED_FOLDER = "/mnt/container"
"""The GUI-OS VM's shared folder: its files come back as the episode's artifacts."""
SHARED_FILES_MAX = 50
SHARED_FILE_MAX_BYTES = 10 * 1024 * 1024
DEFAULT_SNAPSHOT = "default"


class SnapshotSettings:
    """The settings tables of one backend kind, by snapshot name."""

    def __init__(self, file: Path | None, tables: dict[str, dict[str, Any]]) -> None:
        self.file = file
        self.tables = tables

    def table_of(self, snapshot: str | None) -> str | None:
        """The table ``snapshot`` takes its settings from: its own, else ``default``, else none."""
        if snapshot and snapshot in self.tables:
            return snapshot
        return DEFAULT_SNAPSHOT if DEFAULT_SNAPSHOT in self.tables else None

    def for_snapshot(self, snapshot: str | None, backend: str | None = None) -> dict[str, Any]:
        """Settings of ``snapshot`` (see ``table_of``); when no table applies, those of a
        snapshot crabray ships for ``backend`` (``SHIPPED_SNAPSHOTS``), else empty."""
        table = self.table_of(snapshot)
        if table is not None:
            return dict(self.tables[table])
        shipped = SHIPPED_SNAPSHOTS.get(backend or "", {})
        return dict(shipped.get(snapshot or "", {}))

    def source_of(self, backend: str, snapshot: str | None) -> SettingsSource | None:
        """The file and table (``backend.table``) ``snapshot``'s settings come from, if any."""
        table = self.table_of(snapshot)
        if table is None or self.file is None:
            return None
        return SettingsSource(file=str(self.file), field=f"{backend}.{table}")


def load_snapshot_settings(root: Path, backend: str) -> SnapshotSettings:
    """Read ``snapshots.toml`` at the suite root, keeping the tables of ``backend``.

    Raises:
        ConfigError: The file is not TOML, or a backend or snapshot entry is not a table.
    """
    file = root / SNAPSHOTS_FILE
    if not file.is_file():
        return SnapshotSettings(None, {})
    try:
        data = tomllib.loads(file.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read: {exc}", file=str(file)) from exc
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"is not valid TOML: {exc}", file=str(file)) from exc
    for kind, tables in data.items():
        if not isinstance(tables, dict):
            raise ConfigError(
                f"must be a table of snapshot tables, e.g. [{kind}.default]",
                file=str(file),
                field=kind,
            )
        for snapshot, settings in tables.items():
            if not isinstance(settings, dict):
                raise ConfigError(
                    "must be a table of backend settings",
                    file=str(file),
                    field=f"{kind}.{snapshot}",
                )
    return SnapshotSettings(file, data.get(backend, {}))


def collect_shared_folder(env: Env) -> EpisodeFiles:
    """The files of the sandbox's ``/mnt/container`` (none when it has none), handed back as
    the episode's artifacts under ``mnt-container/``: the GUI-OS VM's shared folder, where
    its ``init.sh`` scripts write their logs. At most 50 files of 10 MiB each."""
    listed = env.exec(
        [
            "find",
            SHARED_FOLDER,
            "-maxdepth",
            "1",
            "-type",
            "f",
            "-size",
            f"-{SHARED_FILE_MAX_BYTES}c",
        ],
        timeout_sec=30,
    )
    if not listed.ok:
        return EpisodeFiles()
    names = sorted(line for line in listed.stdout.splitlines() if line.strip())
    files = {
        f"mnt-container/{PurePosixPath(path).name}": env.get_file(path)
        for path in names[:SHARED_FILES_MAX]
    }
    return EpisodeFiles(files=files)


def backend_of_snapshots(root: Path, snapshots: set[str | None]) -> str:
    """The backend a task-JSON suite runs on when the user names none.

    ``docker`` when every snapshot its tasks name has a docker image (crabray's
    shipped one, as GUI-OS's ``jupyter`` has, or a ``snapshots.toml`` docker
    table) and the file gives the ``local`` backend no table; ``local``
    otherwise. The shipped ``jupyter`` image is the GUI-OS VM the suite's
    ``init.sh`` scripts are written for; a plain local directory is not.

    Raises:
        ConfigError: ``snapshots.toml`` cannot be read.
    """
    if not snapshots or load_snapshot_settings(root, "local").tables:
        return "local"
    docker = load_snapshot_settings(root, "docker")
    if all(docker.for_snapshot(snapshot, "docker") for snapshot in snapshots):
        return "docker"
    return "local"
