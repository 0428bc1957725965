"""The ``backend_settings`` of the docker backend, validated before any container exists."""

from __future__ import annotations

import os
import posixpath
from typing import Annotated, Any, ClassVar, Literal

from docker.types import Mount
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from crabray.backends.base import RUN_ID_VAR
from crabray.backends.envs import env_image
from crabray.backends.settings import BackendSettings

ISOLATED_NETWORK = "crabray-net"
"""The ``network`` that reaches the outside but never the host (see ``_network``)."""

NO_IPV6 = {"net.ipv6.conf.all.disable_ipv6": "1"}
"""Sysctls of a container on ``crabray-net``: no IPv6, not even link-local, inside."""

KEEP_ALIVE = ["/bin/sh", "-c", "while :; do sleep 3600; done"]
"""The container's main process: does nothing, forever, with busybox alone."""

DEFAULT_CAPABILITIES = ("CHOWN", "DAC_OVERRIDE", "FOWNER", "SETGID", "SETUID")
"""What a container keeps of root's powers; every other capability is dropped.

What crabray's images need for root to manage files and users in its own
container: give files to another user (CHOWN), read and write any file and
change its mode whoever owns it (DAC_OVERRIDE, FOWNER), and switch to another
user (SETUID, SETGID: ``su``, ``apt-get``'s download user). Gone from Docker's
default set: raw sockets (NET_RAW), device nodes (MKNOD), chroot, binding
ports below 1024, killing other users' processes, file capabilities and
audit writes.
"""


class BindMount(BaseModel):
    """A host directory visible in the container; read-only unless asked otherwise."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    source: str = Field(description="Absolute host path.")
    target: str = Field(description="Absolute path in the container.")
    read_only: bool = Field(default=True, description="Mount read-only (the default).")

    @field_validator("source", "target")
    @classmethod
    def _absolute(cls, value: str) -> str:
        if not value.startswith("/"):
            raise ValueError(f"must be an absolute path, got {value!r}")
        return value


class DockerSettings(BackendSettings):
    """What the docker backend understands in ``backend_settings``.

    Isolation is the default: no network, limits on CPU, memory and
    processes, no host mounts. Raise a limit or name a network when a task
    needs it.
    """

    whole_field: ClassVar[str | None] = "image"
    """Where "none of image, build and build_context" is reported."""

    image: str | None = Field(
        default=None, description="Image to run, e.g. 'crabray/busybox:latest'."
    )
    build: str | None = Field(
        default=None,
        description="Env under envs/ that builds the image (crabray/BUILD:latest unless `image` "
        "names it); built on first use when the image is missing.",
    )
    build_context: str | None = Field(
        default=None,
        description="Absolute folder holding a Dockerfile to build the image from (instead of "
        "`image` or `build`); tagged crabray-build/FOLDER:HASH by the content of the folder, the "
        "Dockerfile and base_image, built on first use and reused while they are unchanged.",
    )
    dockerfile: str = Field(
        default="Dockerfile",
        min_length=1,
        description="The Dockerfile, relative to build_context.",
    )
    base_image: str | None = Field(
        default=None,
        min_length=1,
        description="Replaces the image of every FROM line of the Dockerfile (not references "
        "to its own stages); a missing crabray/ENV:latest is built from envs/ENV first.",
    )
    network: str = Field(
        default="none",
        min_length=1,
        description=f"Docker network; 'none' = no network at all, '{ISOLATED_NETWORK}' = "
        "outbound access that never reaches the host's services (a bridge network crabray "
        "makes, with a host firewall rule: needs root and iptables), 'host' = the host's own "
        "(loopback services included); any other name is that engine network as it is, which "
        "reaches the host's services through its gateway (Docker's 'bridge' does).",
    )
    cpus: float | None = Field(default=1.0, gt=0, description="CPU limit; None = unlimited.")
    memory_mb: int | None = Field(
        default=1024, ge=6, description="Memory limit in MiB (no swap beyond it); None = unlimited."
    )
    pids_limit: int | None = Field(
        default=512, ge=1, description="Most processes at once; None = unlimited."
    )
    capabilities: list[Annotated[str, Field(pattern=r"^[A-Z_]+$")]] = Field(
        default_factory=lambda: list(DEFAULT_CAPABILITIES),
        description="Linux capabilities the container keeps, without the CAP_ prefix; all "
        "others are dropped. Default: CHOWN, DAC_OVERRIDE, FOWNER, SETGID, SETUID.",
    )
    user: str | None = Field(
        default=None,
        min_length=1,
        description="User commands run as (a name, uid or uid:gid of the image); the image's "
        "USER when unset (root in crabray's images; crabray/debian also has 'user', uid 1000). "
        "Files put in by the harness belong to this user.",
    )
    read_only: bool = Field(
        default=False,
        description="Make the container's root file system read-only, with a tmpfs on /tmp; "
        "the harness cannot put files outside mounts then (the engine refuses).",
    )
    mounts: list[BindMount] = Field(
        default_factory=list, description="Host directories to mount; none by default."
    )
    workdir: str | None = Field(
        default=None,
        description="Absolute directory where commands start and relative paths resolve; "
        "the image's WORKDIR when unset (/root in crabray/busybox and crabray/debian, "
        "/workspace in crabray/task-base), '/' when it has none.",
    )
    env: dict[str, str] = Field(default_factory=dict, description="Environment of every command.")
    reset: Literal["recreate", "snapshot"] = Field(
        default="recreate",
        description="'recreate': a fresh container from the image; 'snapshot': from an image "
        "committed after start (keeps what init_commands did).",
    )
    command: list[str] = Field(
        default_factory=lambda: list(KEEP_ALIVE),
        min_length=1,
        description="The container's main process, which only keeps it alive.",
    )
    shell: str = Field(default="/bin/sh", min_length=1, description="Shell of string commands.")
    init: bool = Field(
        default=True, description="Run the engine's init as PID 1 (reaps orphaned zombies)."
    )
    init_commands: list[str] = Field(
        default_factory=list,
        description="Shell commands run once in every new container (once in all with 'snapshot').",
    )
    init_timeout_sec: float = Field(default=600, gt=0, description="Limit of each init command.")
    run_id: str | None = Field(
        default=None, description=f"Value of the crabray.run label; ${RUN_ID_VAR} when unset."
    )
    die_with_owner: bool = Field(
        default=True,
        description="Remove the containers within 10 s of the death of the process that owns "
        "them (a watchdog per process); off, they wait for the next run's orphan cleanup.",
    )
    warm_spare: bool = Field(
        default=True,
        description="Keep the next clean container started in the background, so reset is a swap.",
    )
    max_spares: int = Field(
        default=2,
        ge=1,
        le=8,
        description="Most clean containers started ahead of resets (with warm_spare): one while "
        "episodes last longer than a container start, more while they are shorter (both measured).",
    )

    @field_validator("workdir")
    @classmethod
    def _absolute_workdir(cls, value: str | None) -> str | None:
        if value is None:
            return None
        if not value.startswith("/"):
            raise ValueError(f"must be an absolute path, got {value!r}")
        return posixpath.normpath(value)

    @field_validator("build")
    @classmethod
    def _plain_name(cls, value: str | None) -> str | None:
        if value is not None and (not value or "/" in value or value.startswith(".")):
            raise ValueError(f"must be the name of a folder under envs/, got {value!r}")
        return value

    @field_validator("build_context")
    @classmethod
    def _absolute_context(cls, value: str | None) -> str | None:
        if value is not None and not value.startswith("/"):
            raise ValueError(f"must be an absolute folder, got {value!r}")
        return value

    @field_validator("dockerfile")
    @classmethod
    def _inside_context(cls, value: str) -> str:
        normal = posixpath.normpath(value)
        if value.startswith("/") or normal == ".." or normal.startswith("../"):
            raise ValueError(f"must be a path inside build_context, got {value!r}")
        return normal

    @model_validator(mode="after")
    def _image_or_build(self) -> DockerSettings:
        if self.build_context is not None:
            if self.image is not None or self.build is not None:
                raise ValueError("give 'build_context' alone, without 'image' or 'build'")
            return self
        if self.image is None and self.build is None:
            raise ValueError(
                "give 'image' (an image name), 'build' (an env under envs/) or "
                "'build_context' (a folder with a Dockerfile)"
            )
        if self.base_image is not None or "dockerfile" in self.model_fields_set:
            raise ValueError("'dockerfile' and 'base_image' go with 'build_context' only")
        return self

    @property
    def image_name(self) -> str | None:
        """The image containers are made from; None when built from ``build_context``
        (its tag depends on the folder's content, known once the backend starts)."""
        if self.build_context is not None:
            return None
        if self.image is not None:
            return self.image
        return env_image(self.build or "")

    @property
    def run_label(self) -> str:
        """The ``crabray.run`` label: the setting, else ``$CRABRAY_RUN_ID``, else empty."""
        return self.run_id or os.environ.get(RUN_ID_VAR, "")

    def container_options(self) -> dict[str, Any]:
        """Keyword arguments of ``containers.create`` for the limits and isolation asked for."""
        options: dict[str, Any] = {
            "environment": dict(self.env),
            "init": self.init,
            "privileged": False,
            "security_opt": ["no-new-privileges"],
            "cap_drop": ["ALL"],
            "cap_add": list(self.capabilities),
            "read_only": self.read_only,
            "hostname": "crabray",
            "mounts": [
                Mount(target=m.target, source=m.source, type="bind", read_only=m.read_only)
                for m in self.mounts
            ],
        }
        if self.workdir is not None:
            options["working_dir"] = self.workdir
        if self.user is not None:
            options["user"] = self.user
        if self.read_only:
            options["tmpfs"] = {"/tmp": "rw,nosuid,nodev,mode=1777"}
        if self.network in ("none", "host"):
            # Modes, not networks: the engine cannot attach an endpoint to either.
            options["network_mode"] = self.network
        else:
            options["network"] = self.network
        if self.network == ISOLATED_NETWORK:
            options["sysctls"] = dict(NO_IPV6)
        if self.cpus is not None:
            options["nano_cpus"] = int(self.cpus * 1e9)
        if self.memory_mb is not None:
            options["mem_limit"] = f"{self.memory_mb}m"
            options["memswap_limit"] = f"{self.memory_mb}m"
        if self.pids_limit is not None:
            options["pids_limit"] = self.pids_limit
        return options
