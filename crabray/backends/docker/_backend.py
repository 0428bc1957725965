"""``DockerBackend``: one container per environment, through the docker SDK.

Isolation is the default: no network (``network="none"``; ``"crabray-net"`` reaches
the outside but never the host, see :mod:`crabray.backends.docker._network`), CPU, memory and
process limits, ``no-new-privileges``, never privileged, every capability
dropped but the few root needs to manage its own files and users
(``DEFAULT_CAPABILITIES``), no host mounts unless the settings list them; a
read-only root file system and another user are settings. A container dies
with the process that owns it (see :mod:`crabray.backends.docker._watchdog`).
Every container carries labels (``crabray=1``,
``crabray.env``, ``crabray.run``, ``crabray.owner`` = host, pid and start time
of the process that made it), so ``cleanup_orphans`` and ``crabray envs
prune`` remove containers whose owner died on this host, and only those.

Reset replaces the container with a fresh one from the image (``recreate``)
or from an image committed right after start (``snapshot``, which keeps what
``init_commands`` installed). Starting a container costs most of a second, so
with ``warm_spare`` (the default) the next clean container is made in the
background after every start and reset; reset then only swaps it in, and the
used container is removed in the background too. While episodes are shorter
than a start, up to ``max_spares`` are kept under way (see
:mod:`crabray.backends.docker._spares`).

The image is named (``image``), built from an env under ``envs/`` (``build``),
or built from a Dockerfile (``build_context``, tagged by its content; see
:mod:`crabray.backends.docker._engine`), on first use when missing. An image
whose ``crabray.ready-command`` label names a command (``crabray/desktop``
waits for its X server) has it run in every new container before use.
``screenshot()`` dumps the container's X screen with ``xwd`` and converts it
here.

Commands run through the container's guest (one long-lived ``python3`` on an
exec stream) while it is trusted (it sealed itself and was started before the
container's first command: see ``Guest.trusted``), else through the exec API
until the next reset, as when the image has no python3 (see
:mod:`crabray.backends.docker._exec` for how a timed-out command's whole
process tree is killed). Files are written through the archive API as tar
streams, so binary files round-trip unchanged and large ones are never copied
into a second buffer; they are read by the guest when it runs and the file is
a plain one the container's user may read and the guest is trusted, else
through the archive API too.
"""

from __future__ import annotations

import contextlib
import logging
import posixpath
import socket
import uuid
from typing import Any

import docker
from docker.errors import APIError, ImageNotFound, NotFound
from docker.models.containers import Container
from typing_extensions import override

from crabray.backends.base import MAX_FILE_BYTES, Backend, ExecResult, Frozen, PythonCall
from crabray.backends.display import xwd_to_png
from crabray.backends.docker._archive import file_error, read_archive, tar_stream
from crabray.backends.docker._engine import (
    ENGINE_ERRORS,
    LABEL,
    LABEL_ENV,
    LABEL_OWNER,
    LABEL_READY,
    LABEL_RUN,
    LABEL_SANDBOX,
    LABEL_SNAPSHOT,
    check_image,
    connect,
    ensure_image,
    prune,
    remove_container,
)
from crabray.backends.docker._exec import (
    MARKER_VAR,
    run_exec,
    run_exec_raw,
    start_guest,
    stopped_inside,
)
from crabray.backends.docker._network import ensure_isolated_network, warn_if_host_reachable
from crabray.backends.docker._settings import ISOLATED_NETWORK, DockerSettings
from crabray.backends.docker._spares import SpareQueue
from crabray.backends.docker._watchdog import watch_owner
from crabray.backends.guest import Guest, GuestChannel, NoPythonError, UntrustedGuestError
from crabray.backends.ownership import owner_tag
from crabray.backends.runnable_files import runs_unnamed
from crabray.backends.settings import parse_settings
from crabray.core.environment import EnvironmentConfig
from crabray.core.errors import CrabrayError, SandboxError, SandboxFileError

logger = logging.getLogger(__name__)

SYSTEM_DIRS = ("/usr/", "/bin/", "/sbin/", "/lib/", "/lib32/", "/lib64/", "/libx32/", "/etc/")
"""Where a container's programs, libraries and loader settings live: a change the engine's
diff shows under one of them (a replaced ``cat``, an ``/etc/ld.so.preload``) makes a grade
that ran the container's programs unverified."""

GUEST_READ_MAX_BYTES = 8 * 1024 * 1024
"""Largest file ``get_file`` reads through the guest (its bytes travel as base64 in
one JSON frame); larger ones stream through the archive API."""

SCREENSHOT_TIMEOUT_SEC = 30.0
"""Longest ``xwd`` may take to dump the screen."""

_SPARE_ERRORS: tuple[type[Exception], ...] = (CrabrayError, *ENGINE_ERRORS)
"""What a warm spare's start may have failed with: crabray's own errors or the engine's."""


class DockerBackend(Backend):
    """A sandbox that is a Docker container on the engine ``DOCKER_HOST`` names.

    Settings (``config.backend_settings``) are :class:`DockerSettings`; an
    unknown or malformed one is a ``ConfigError`` here, at construction.

    Args:
        config: The environment this sandbox serves.

    Raises:
        ConfigError: ``backend_settings`` do not validate.
    """

    kind = "docker"
    reset_in_call = True
    default_memory_mb = DockerSettings.model_fields["memory_mb"].default
    """A container's memory limit when its settings set none (``DockerSettings.memory_mb``)."""
    settings_model = DockerSettings
    settings: DockerSettings

    def __init__(self, config: EnvironmentConfig) -> None:
        super().__init__(config)
        self.image: str | None = self.settings.image_name
        self._ready_command: str | None = None
        self._image_user = ""
        self._owner = (0, 0)
        """Uid and gid of the container's user: files put in belong to it."""
        self._changed_runnable: list[str] = []
        """Paths commands may run that the agent changed, seen by the engine at a freeze."""
        self._runnable_before: set[str] = set()
        """Paths commands may run that the container had changed when the agent began."""
        self._setup_files: dict[str, tuple[int, ...] | None] | str = {}
        """Those paths' ``lstat`` when the agent began, by the trusted guest (the engine's diff
        lists a path the setup changed whatever the agent does to it later); or why they
        could not be read."""
        self._workdir = self.settings.workdir or "/"
        self._sandbox_id = uuid.uuid4().hex[:12]
        self._client: docker.DockerClient | None = None
        self._container: Container | None = None
        self._reset_image: str | None = self.image
        self._snapshot: str | None = None
        self._spares: SpareQueue[tuple[Container, Guest]] | None = None
        self._guest = Guest(
            self._launch_guest,
            f"docker sandbox of '{config.name}'",
            alive=lambda: self._container is not None and _running(self._container),
            broken_inside=lambda: (
                None
                if self._container is None
                else stopped_inside(self._api(), str(self._container.id))
            ),
        )
        self._no_python = False
        """Set once the image showed it has no python3: commands take the plain exec path."""

    @override
    def _start(self) -> None:
        self._client = connect()
        self._prepare_network()
        self._ensure_image()
        if self.settings.die_with_owner:
            watch_owner()
        try:
            self._container = self._launch(self.image, run_init=True)
            if self.settings.user or self._image_user:
                self._owner = self._user_ids(self._container)
            if self.settings.reset == "snapshot":
                self._snapshot = self._commit(self._container)
                self._reset_image = self._snapshot
        except BaseException:
            self.close()
            raise
        if self.settings.warm_spare:
            self._spares = SpareQueue(
                self._launch_spare,
                self._discard_spare,
                limit=self.settings.max_spares,
                name=f"crabray-docker-{self._sandbox_id}",
            )
            self._spares.top_up()
        logger.debug("docker sandbox of '%s': container %s", self.config.name, self._container.name)

    @override
    def _reset(self) -> None:
        """Swap in a clean container (the warm spare, or a new one) and drop the used one.

        Raises:
            SandboxError: No clean container could be made; do not reuse the sandbox.
        """
        used = self._started("reset", self._container)
        self._guest.close()
        spare = self._take_spare()
        if spare is None:
            if self._spares is None:
                self._remove_container(used)
            fresh = self._launch(self._reset_image, run_init=self._snapshot is None)
            guest = self._container_guest(fresh)
        else:
            fresh, guest = spare
        self._container, self._guest = fresh, guest
        if self._spares is not None:
            self._spares.remove(lambda: self._remove_container(used))
        logger.debug("reset docker sandbox of '%s' to container %s", self.config.name, fresh.name)

    @override
    def exec(
        self,
        command: str | list[str],
        *,
        timeout_sec: float | None = None,
        cwd: str | None = None,
        env: dict[str, str] | None = None,
    ) -> ExecResult:
        """Run ``command`` in the container, in ``workdir`` (or ``cwd`` relative to it).

        A program or ``cwd`` that does not exist is a result with exit 127 or 126
        (the engine's explanation on stderr), as a shell would report it.

        Raises:
            ValueError: ``command`` is an empty list or holds something other than strings.
            SandboxError: Not started, closed, or the engine could not run it.
        """
        container = self._started("exec", self._container)
        if isinstance(command, str):
            argv = [self.settings.shell, "-c", command]
        elif command and all(isinstance(arg, str) for arg in command):
            argv = list(command)
        else:
            raise ValueError(f"a command list must be a non-empty list of strings, got {command!r}")
        workdir = posixpath.join(self._workdir, cwd) if cwd else self._workdir
        logger.debug(
            "exec in %s:%s (timeout %s s): %.200r", container.name, workdir, timeout_sec, command
        )
        if not self._no_python:
            try:
                return self._guest.exec(
                    argv,
                    cwd=posixpath.normpath(workdir),
                    env=env or {},
                    timeout_sec=timeout_sec,
                    marker=(MARKER_VAR, uuid.uuid4().hex),
                    trusted_only=True,
                )
            except NoPythonError:
                self._no_python = True
                logger.debug("image %s has no python3: commands use plain execs", self.image)
            except UntrustedGuestError as exc:
                logger.debug("%s: this command uses a plain exec", exc)
        return run_exec(
            self._api(),
            str(container.id),
            argv,
            workdir=posixpath.normpath(workdir),
            environment=env or {},
            timeout_sec=timeout_sec,
            shell=self.settings.shell,
        )

    @override
    def put_file(self, path: str, data: bytes) -> None:
        """Write ``data`` to ``path`` (relative to ``workdir``) as a one-file tar stream.

        Raises:
            SandboxFileError: ``path`` is a directory, or a parent is not a directory.
            SandboxError: The engine failed.
        """
        container = self._started(f"write '{path}'", self._container)
        target = self._path(path)
        if target == "/":
            raise SandboxFileError(f"cannot write '{path}': it is the root directory")
        try:
            # The public put_archive has no noOverwriteDirNonDir: without it the engine
            # would silently replace a directory at ``target`` with the file.
            api = self._api()
            response = api._put(
                api._url("/containers/{0}/archive", container.id),
                params={"path": "/", "noOverwriteDirNonDir": "true"},
                data=tar_stream(target.lstrip("/"), data, owner=self._owner),
            )
            api._raise_for_status(response)
        except ENGINE_ERRORS as exc:
            raise file_error("write", path, target, exc) from exc
        logger.debug("put %d bytes to %s:%s", len(data), container.name, target)

    @override
    def get_file(self, path: str, *, max_bytes: int | None = None) -> bytes:
        """Read ``path`` (relative to ``workdir``), following symlinks, if at most ``max_bytes``.

        A regular file that the container's user may read, not behind a symlink and at
        most ``GUEST_READ_MAX_BYTES``, is read by the guest when it runs (one round
        trip on its stream, where the archive API costs an engine call that archives
        the file); everything else goes through the archive API, which reads as root,
        so the answer is the one the archive API gives.

        Raises:
            FileTooLargeError: The file is larger than ``max_bytes`` (the guest's and the
                archive's own size of what they read).
            SandboxFileError: The path is missing, a directory or not a regular file.
            SandboxError: The engine failed.
        """
        container = self._started(f"read '{path}'", self._container)
        target = self._path(path)
        limit = MAX_FILE_BYTES if max_bytes is None else max_bytes
        if self._guest.trusted and not self._no_python:
            data = self._read_by_guest(path, target, min(limit, GUEST_READ_MAX_BYTES))
            if data is not None:
                return data
        return read_archive(self._api(), str(container.id), path, target, limit)

    def _read_by_guest(self, path: str, target: str, limit: int) -> bytes | None:
        """The file's bytes through the guest; None when the archive API must answer.

        The guest answers only what the archive API would answer alike: the bytes of
        a regular file it could read, a missing path, a directory. A symlink (the
        archive path resolves links its own way), a file the container's user may
        not read (the archive API reads as root: evaluators may read root's files),
        a large, growing or special file, or a lost guest go to the archive API.
        """
        try:
            got = self._guest.read_file(target, limit, trusted_only=True)
        except (SandboxError, NoPythonError) as exc:
            logger.debug("guest read of %s failed (%s); reading it from the archive", target, exc)
            return None
        if isinstance(got, bytes):
            return got
        if got == "ENOENT":
            raise SandboxFileError(
                f"cannot read '{path}': no such file in the container ({target})"
            )
        if got == "EISDIR":
            raise SandboxFileError(f"cannot read '{path}': {target} is a directory, not a file")
        return None

    @override
    def screenshot(self) -> bytes:
        """The container's X screen (``$DISPLAY``, e.g. of ``crabray/desktop``) as a PNG.

        Runs ``xwd -root -silent`` in the container and converts its dump here.

        Raises:
            SandboxError: Not started, or the container has no screen (no X
                server on ``$DISPLAY``, or no ``xwd``); says which image has one.
        """
        container = self._started("take a screenshot", self._container)
        result = run_exec_raw(
            self._api(),
            str(container.id),
            ["xwd", "-root", "-silent"],
            workdir="/",
            environment={},
            timeout_sec=SCREENSHOT_TIMEOUT_SEC,
            shell=self.settings.shell,
        )
        if result.exit_code != 0 or result.timed_out:
            status = "timed out" if result.timed_out else f"exit {result.exit_code}"
            detail = result.stderr.decode(errors="replace").strip()[-500:]
            if result.exit_code == 127:
                detail = "xwd is not installed in the image (Debian's x11-apps)"
            raise SandboxError(
                f"the docker sandbox of '{self.config.name}' (image '{self.image}') has no "
                f"usable screen: xwd -root failed ({status}): {detail}. Use an image with a "
                "screen, e.g. backend_settings.build: desktop (crabray/desktop)"
            )
        return xwd_to_png(result.stdout)

    @override
    def call_python(self, call: PythonCall) -> Any:
        """Run a plain-Python action in the container's guest, in ``workdir``."""
        self._require_started(f"run action '{call.action}'")
        return self._guest.call(call, cwd=self._workdir)

    @override
    def agent_begins(self) -> None:
        """Trust the guest running now (or start one) and have it note the harness's processes.

        The guest is what freezes the agent's processes while it is graded
        (:meth:`freeze_agent`), so one is started here if none runs.
        """
        self._guest.vouch()
        self._changed_runnable = []
        container = self._container
        self._runnable_before = set()
        if container is not None:
            self._runnable_before = set(self._runnable_changes(container))
        if not self._no_python:
            with contextlib.suppress(NoPythonError):
                self._guest.begin()
        self._setup_files = self._stat_setup_files()

    @override
    def grader_distrust(self, *, ran_commands: bool) -> str | None:
        """Trusted unless a guest started after the agent acted, or the agent changed programs
        an evaluator's command may have run.

        Files are read by the trusted guest or the archive API; Python calls run
        in the guest started before the agent's first action, which refuses
        standard-library files changed since (``_program._GuardedPaths``). A
        command runs programs of the container, which an agent running as root
        can replace, and a task's grading script may source the agent's
        ``~/.profile`` or run a program from a folder the agent wrote: the
        engine's diff of the container against its image, read when the agent's
        turn ends (:meth:`agent_ends`), says whether it changed any of them
        (:data:`SYSTEM_DIRS`, :func:`~crabray.backends.runnable_files.runs_unnamed`).
        """
        if self._guest.untrusted_starts:
            return "the guest that grades was started after the agent acted"
        if ran_commands and self._changed_runnable:
            shown = ", ".join(self._changed_runnable[:5])
            return (
                "an evaluator ran commands after the agent changed what they may run: system "
                f"folders, a shell's or Python's startup files or program folders ({shown})"
            )
        return None

    @override
    def grader_replaced(self) -> bool:
        return self._guest.untrusted_starts > 0

    @override
    def probe_health(self) -> str | None:
        """The engine's ping and the container's state: nothing inside the container is used."""
        container = self._container
        if container is None:
            return f"the docker sandbox of '{self.config.name}' has no container"
        try:
            self._api().ping()
            container.reload()
        except ENGINE_ERRORS as exc:
            return f"the docker engine did not answer: {exc}"
        if container.status != "running":
            return f"the container of '{self.config.name}' is {container.status}"
        return None

    @override
    def freeze_agent(self) -> Frozen:
        """The guest stops every other process of the container but the harness's."""
        self._require_started("freeze the agent's processes")
        if self._no_python:
            return Frozen(unverified="the image has no python3 to stop the agent's processes with")
        return self._guest.freeze()

    @override
    def agent_ends(self) -> None:
        """Read the engine's diff of the container (about 0.15 s): the programs and startup
        files the agent changed make a command's grade unverified."""
        container = self._started("list the container's changes", self._container)
        self._note_runnable_changes(container)

    @override
    def thaw_agent(self) -> None:
        if not self._no_python:
            self._guest.thaw()

    def _note_runnable_changes(self, container: Container) -> None:
        """Add the paths commands may run (:meth:`_runnable_changes`) the container changed
        since the agent began (the engine's own, ``/usr/sbin/docker-init``, and the setup's
        are not its) to those seen.

        Raises:
            SandboxError: The engine did not answer.
        """
        seen = set(self._changed_runnable)
        try:
            changes = self._runnable_changes(container)
        except SandboxError as exc:
            if self.probe_health() is not None:
                raise
            # The engine answers, but not for this container's layer (a tree too deep to
            # list): what the agent changed cannot be known, so no command grade is verified.
            changes = [f"(the engine could not list the container's changes: {exc})"[:300]]
        changes = [p for p in changes if p not in self._runnable_before]
        for path in [*changes, *self._changed_setup_files()]:
            if path not in seen:
                seen.add(path)
                self._changed_runnable.append(path)

    def _stat_setup_files(self) -> dict[str, tuple[int, ...] | None] | str:
        """The trusted guest's ``lstat`` of each path commands may run that the setup changed
        (:attr:`_runnable_before`), or why it cannot say (no ``python3``, a guest the agent
        could have replaced)."""
        paths = sorted(self._runnable_before)
        if not paths:
            return {}
        if self._no_python:
            return "the image has no python3 to compare them with"
        try:
            return dict(zip(paths, self._guest.stat(paths), strict=True))
        except (NoPythonError, UntrustedGuestError) as exc:
            return str(exc)

    def _changed_setup_files(self) -> list[str]:
        """The paths of :meth:`_stat_setup_files` whose ``lstat`` differs now: a program or
        startup file the setup wrote and the agent rewrote (its change time moved)."""
        before = self._setup_files
        if isinstance(before, dict) and before:
            now = self._stat_setup_files()
            if isinstance(now, dict):
                return [path for path, stat in now.items() if before.get(path) != stat]
            before = now
        if isinstance(before, str):
            return [f"(the files the setup changed could not be compared: {before})"[:300]]
        return []

    def _runnable_changes(self, container: Container) -> list[str]:
        """The paths the engine's diff lists for the container that commands may run: under
        :data:`SYSTEM_DIRS`, or a startup file or program folder's file anywhere
        (:func:`~crabray.backends.runnable_files.runs_unnamed`).

        Raises:
            SandboxError: The engine did not answer.
        """
        try:
            changes = container.diff() or []
        except ENGINE_ERRORS as exc:
            raise SandboxError(
                f"the docker engine did not list the changes of the sandbox of "
                f"'{self.config.name}': {exc}"
            ) from exc
        paths = (str(change.get("Path", "")) for change in changes)
        return [path for path in paths if path.startswith(SYSTEM_DIRS) or runs_unnamed(path)]

    @override
    def check_python(self) -> str:
        self._require_started("start its guest")
        return self._guest.check()

    def _launch_guest(self) -> GuestChannel:
        container = self._started("start its guest", self._container)
        return start_guest(
            self._api(), str(container.id), workdir=self._workdir, shell=self.settings.shell
        )

    @override
    def _close(self) -> None:
        self._guest.close()
        if self._spares is not None:
            self._spares.close()
        container, self._container = self._container, None
        if container is not None:
            self._remove_container(container)
        if self._snapshot is not None and self._client is not None:
            try:
                self._client.images.remove(self._snapshot, force=True)
            except NotFound:
                pass
            except ENGINE_ERRORS as exc:
                logger.warning("could not remove snapshot image %s: %s", self._snapshot, exc)
        if self._client is not None:
            self._client.close()
        logger.debug("closed docker sandbox %s of '%s'", self._sandbox_id, self.config.name)

    @override
    def describe(self) -> dict[str, Any]:
        container = self._container
        return {
            **super().describe(),
            "host": socket.gethostname(),
            "sandbox": self._sandbox_id,
            "image": self.image,
            "container": container.id if container is not None else None,
            "container_name": container.name if container is not None else None,
            "snapshot": self._snapshot,
            "reset_mode": self.settings.reset,
            "workdir": self._workdir,
            "network": self.settings.network,
        }

    @classmethod
    @override
    def preflight(cls, settings: dict[str, Any], env_name: str) -> None:
        """Check that the engine answers and has the image (or can build it), building nothing.

        Raises:
            ConfigError: The settings do not validate.
            SandboxError: The engine does not answer, or the image is missing (with the fix).
        """
        parsed = parse_docker_settings(settings)
        client = connect()
        try:
            check_image(client, parsed, env_name)
        finally:
            client.close()

    @classmethod
    def cleanup_orphans(cls, settings: dict[str, Any]) -> list[str]:
        """Remove crabray containers and snapshot images whose owner died on this host."""
        try:
            return prune(everything=False)
        except SandboxError as exc:
            logger.warning("skipped docker orphan cleanup: %s", exc)
            return []

    # -- internals -------------------------------------------------------------------------

    def _api(self) -> Any:
        if self._client is None:
            raise SandboxError("internal error: no docker client")
        return self._client.api

    def _path(self, path: str) -> str:
        return posixpath.normpath(posixpath.join(self._workdir, path))

    def _labels(self) -> dict[str, str]:
        return {
            LABEL: "1",
            LABEL_ENV: self.config.name,
            LABEL_RUN: self.settings.run_label,
            LABEL_OWNER: owner_tag(),
            LABEL_SANDBOX: self._sandbox_id,
        }

    def _ensure_image(self) -> None:
        """Make sure the image exists (building it when the settings say how); note its labels.

        Raises:
            SandboxError: The image is missing and cannot be built, or its build failed.
        """
        if self._client is None:
            raise SandboxError("internal error: no docker client")
        image = ensure_image(self._client, self.settings, self.config.name)
        if self.image is None:  # built from build_context: the tag is known only now
            self.image = self._reset_image = next(iter(image.tags), str(image.id))
        self._ready_command = (image.labels or {}).get(LABEL_READY)
        self._image_user = (image.attrs.get("Config") or {}).get("User") or ""
        if self.settings.workdir is None:
            config = image.attrs.get("Config") or {}
            self._workdir = posixpath.normpath(config.get("WorkingDir") or "/")

    def _prepare_network(self) -> None:
        """Make ``crabray-net`` and its host rules when asked for; warn of a network that
        reaches the host."""
        if self.settings.network == ISOLATED_NETWORK:
            ensure_isolated_network(self._client, self.config.name)
        else:
            warn_if_host_reachable(self.settings.network, self.config.name)

    def _launch(self, image: str | None, *, run_init: bool) -> Container:
        """Create and start one clean container; on any failure nothing is left behind."""
        if self._client is None or image is None:
            raise SandboxError("internal error: no docker client or no image yet")
        options = self.settings.container_options()
        try:
            container = self._client.containers.create(
                image,
                self.settings.command,
                name=f"crabray-{self.config.name}-{uuid.uuid4().hex[:8]}",
                labels=self._labels(),
                **options,
            )
        except ImageNotFound as exc:
            raise SandboxError(f"docker image '{image}' disappeared: {exc}") from exc
        except ENGINE_ERRORS as exc:
            raise SandboxError(
                f"cannot create a container from '{image}' for '{self.config.name}': {exc}"
            ) from exc
        try:
            container.start()
            self._wait_ready(container)
            if run_init:
                self._run_init(container)
        except BaseException as exc:
            self._remove_container(container)
            if isinstance(exc, ENGINE_ERRORS):
                raise SandboxError(
                    f"cannot start container {container.name} from '{image}' "
                    f"(network '{self.settings.network}'): {exc}"
                ) from exc
            raise
        return container

    def _wait_ready(self, container: Container) -> None:
        """Run the image's ``crabray.ready-command`` (e.g. wait for its X server), if any."""
        if self._ready_command:
            self._run_setup_command(
                container,
                self._ready_command,
                "/",
                f"container {container.name} from '{self.image}' did not become ready: its "
                "ready command",
            )

    def _run_init(self, container: Container) -> None:
        for command in self.settings.init_commands:
            self._run_setup_command(
                container, command, self._workdir, f"init command of '{self.config.name}'"
            )

    def _user_ids(self, container: Container) -> tuple[int, int]:
        """The numeric uid and gid commands run as (the engine resolves names in the image)."""
        result = run_exec(
            self._api(),
            str(container.id),
            [self.settings.shell, "-c", "id -u; id -g"],
            workdir="/",
            environment={},
            timeout_sec=self.settings.init_timeout_sec,
            shell=self.settings.shell,
        )
        ids = result.stdout.split()
        if not result.ok or len(ids) != 2 or not all(i.isdigit() for i in ids):
            raise SandboxError(
                f"cannot tell which uid the user {self.settings.user or self._image_user!r} of "
                f"'{self.config.name}' has (`id -u; id -g` said {result.stdout + result.stderr!r})"
            )
        return int(ids[0]), int(ids[1])

    def _run_setup_command(
        self, container: Container, command: str, workdir: str, what: str
    ) -> None:
        """Run one command that readies a new container; its failure fails the start.

        Raises:
            SandboxError: Naming ``what`` ran, how it failed and its output's tail.
        """
        result = run_exec(
            self._api(),
            str(container.id),
            [self.settings.shell, "-c", command],
            workdir=workdir,
            environment={},
            timeout_sec=self.settings.init_timeout_sec,
            shell=self.settings.shell,
        )
        if not result.ok:
            status = "timed out" if result.timed_out else f"exit {result.exit_code}"
            raise SandboxError(
                f"{what} {command!r} failed ({status}): "
                f"{(result.stderr or result.stdout).strip()[-2000:]}"
            )

    def _commit(self, container: Container) -> str:
        """Commit ``container`` as this sandbox's snapshot image; return its id."""
        labels = {**self._labels(), LABEL_SNAPSHOT: "1"}
        try:
            image = container.commit(
                repository="crabray-snapshot",
                tag=self._sandbox_id,
                changes=[
                    f"LABEL {key}={value!r}".replace("'", '"') for key, value in labels.items()
                ],
            )
        except ENGINE_ERRORS as exc:
            raise SandboxError(f"cannot snapshot container {container.name}: {exc}") from exc
        logger.debug("snapshot of '%s' is image %s", self.config.name, image.id)
        return str(image.id)

    def _launch_spare(self) -> tuple[Container, Guest]:
        """A clean container whose guest already runs (unless the image has no python3).

        Started in the background while an episode runs, so the next episode's
        first command or Python call does not pay for starting Python.
        """
        container = self._launch(self._reset_image, run_init=self._snapshot is None)
        guest = self._container_guest(container)
        if not self._no_python:
            try:
                guest.check()
            except NoPythonError:
                self._no_python = True
            except SandboxError as exc:
                logger.debug(
                    "guest of spare %s did not start (%s); lazily then", container.name, exc
                )
        return container, guest

    def _container_guest(self, container: Container) -> Guest:
        def launch() -> GuestChannel:
            return start_guest(
                self._api(), str(container.id), workdir=self._workdir, shell=self.settings.shell
            )

        return Guest(
            launch,
            f"docker sandbox of '{self.config.name}'",
            alive=lambda: _running(container),
            broken_inside=lambda: stopped_inside(self._api(), str(container.id)),
        )

    def _discard_spare(self, spare: tuple[Container, Guest]) -> None:
        container, guest = spare
        guest.close()
        self._remove_container(container)

    def _take_spare(self) -> tuple[Container, Guest] | None:
        """The oldest warm spare and its guest once ready; None when there is none or it failed."""
        spare = self._spares.take() if self._spares is not None else None
        if spare is None:
            return None
        try:
            container, guest = spare.result()
        except _SPARE_ERRORS as exc:
            logger.warning(
                "warm spare of '%s' failed (%s); starting one now", self.config.name, exc
            )
            return None
        try:
            container.reload()
            if container.status == "running":
                return container, guest
        except ENGINE_ERRORS:
            pass
        guest.close()
        logger.warning(
            "warm spare %s of '%s' is not running; replacing it", container.name, self.config.name
        )
        self._remove_container(container)
        return None

    def _remove_container(self, container: Container) -> None:
        try:
            remove_container(container)
        except APIError as exc:
            if exc.status_code == 409 and "already in progress" in str(exc):
                return
            logger.warning("could not remove container %s: %s", container.name, exc)
        except ENGINE_ERRORS as exc:
            logger.warning("could not remove container %s: %s", container.name, exc)


def _running(container: Container) -> bool:
    """Whether the engine answers and says the container runs: a guest lost then was killed
    inside it (an engine that does not answer raises, which the guest counts as lost around)."""
    container.reload()
    return container.status == "running"


def parse_docker_settings(settings: dict[str, Any]) -> DockerSettings:
    """Validate ``backend_settings`` so a typo fails before any container exists.

    Raises:
        ConfigError: A setting is unknown, has the wrong type, or none of
            ``image``, ``build`` and ``build_context`` is given; names the field.
    """
    return parse_settings(DockerSettings, settings, DockerBackend.kind)
