"""The local backend's settings: ``backend_settings`` of an environment with ``backend: local``."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field

from crabray.backends.display import DisplaySetting
from crabray.backends.settings import BackendSettings

Isolation = Literal["auto", "bwrap", "none"]
"""How a local sandbox's commands are confined (see :class:`LocalSettings`)."""


class LocalSettings(BackendSettings):
    """The ``backend_settings`` the local backend understands."""

    root_dir: Path | None = Field(
        default=None,
        description="Parent directory of the sandbox directories; the system temp dir if unset.",
    )
    shell: str = Field(
        default="/bin/sh",
        min_length=1,
        description="Shell that runs string commands as `<shell> -c <command>`; a path or a name "
        "looked up on PATH.",
    )
    isolation: Isolation = Field(
        default="auto",
        description="How commands are confined: 'bwrap' (bubblewrap: an unprivileged user, "
        "system directories read-only, an /etc of its own, only the sandbox writable, no "
        "network, nothing of the driver's environment), 'auto' (the same, with a clear error "
        "when bubblewrap does not work on this host), or 'none': UNCONFINED, as the host user "
        "with full access to this host, only when asked for, with a warning.",
    )
    network: bool = Field(
        default=False,
        description="Confined sandboxes only: outbound network access through a network "
        "namespace of the sandbox's own, connected by pasta (package 'passt'), which never "
        "reaches the host's own addresses or its loopback services. Without it a confined "
        "sandbox has only its own loopback. Unconfined sandboxes always have the host's.",
    )
    memory_mb: int | None = Field(
        default=None,
        ge=16,
        description="Bound on the address space (RLIMIT_AS, in MiB) of every process the "
        "sandbox runs, each on its own: commands, what they start and the Python guest. An "
        "allocation past it fails inside the sandbox (MemoryError, ENOMEM) and the sandbox "
        "stays usable. Unset (the default): no bound. Confined, the sandbox cannot raise it; "
        "unconfined as root, a process could.",
    )
    sandbox_memory_mb: int | None = Field(
        default=4096,
        ge=16,
        description="Bound on the memory of the whole sandbox, in MiB: every process it runs "
        "together, and what it writes to its disk (disk_mb). A root driver puts each sandbox "
        "in a cgroup of its own (v2 memory.max, or v1 memory.limit_in_bytes); past it the "
        "kernel kills a process of the sandbox, never the worker. Without root or cgroups it "
        "does not apply (a WARNING says so) and memory_mb is the bound. None: no bound.",
    )
    pids_limit: int | None = Field(
        default=1024,
        ge=8,
        description="Most processes (and threads) the sandbox runs at once: pids.max of its "
        "cgroup (root driver only, as sandbox_memory_mb). None: no bound.",
    )
    disk_mb: int | None = Field(
        default=4096,
        ge=1,
        description="Most the sandbox's files (work, home and /tmp together) may hold, in MiB: "
        "a root driver mounts a tmpfs of this size on the sandbox directory, so a full disk is "
        "the sandbox's own (an error of the write, the agent's) and never the host's. Without "
        "root the sandbox writes to the host's file system under root_dir. None: no disk of "
        "its own.",
    )
    display: DisplaySetting = Field(
        default=False,
        description="A private X server (Xvfb) for desktop actions: true for 1280x800x24, or a "
        "screen size 'WxHxD'; commands get DISPLAY. Off by default.",
    )
