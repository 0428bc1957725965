"""``LocalBackend``: a fresh directory on the host as the sandbox.

This is the laptop backend and the one the test suite leans on. Each sandbox
is its own directory ``ROOT`` with ``work``, ``home`` and ``tmp`` in it, and
the ``isolation`` setting says how far its commands are kept inside:

- ``bwrap`` (confined): commands run under bubblewrap (:mod:`crabray.backends.local._bwrap`)
  as an unprivileged user in a user namespace, with nothing of the driver's
  environment, an ``/etc`` of its own, the host's system directories read-only,
  ``ROOT/home`` at ``/home/user``
  (``HOME``), ``ROOT/work`` at ``/home/user/work`` (where they start) and
  ``ROOT/tmp`` at ``/tmp``; nothing else of the host is writable or visible, no
  network unless ``network: true``, and killing the sandbox kills every process
  in it.
- ``none`` (unconfined): commands run as the host user, with full access to
  this host, in ``ROOT/work`` with ``HOME`` and ``TMPDIR`` inside ``ROOT``. For
  development and for suites that ask for it on purpose (see DESIGN.md); the
  log says so with a WARNING.
- ``auto`` (the default): ``bwrap``, probed once per process; when it does not
  work on this host, starting the sandbox fails with how to install it or opt out.

File transfers use the same paths as confined commands in both modes
(``/home/user/...``, ``/tmp/...``, relative to the working directory; see
:mod:`crabray.backends.local._paths`) and never leave ``ROOT``; confined, they
resolve every path inside the sandbox's own view of the file system
(:class:`~crabray.backends.local._paths.SandboxView`), so no symlink swapped in
by its processes can lead them to a host file. Every command
runs in its own process group, and ``reset()``/``close()`` kill every group
the sandbox started (and, confined, its whole pid namespace) before wiping the
directory; a root driver's confined reset keeps the namespaces when they can
be made as clean as new ones (:mod:`~crabray.backends.local._inplace`).

The pieces, one module each: the settings (:mod:`~crabray.backends.local._settings`),
choosing and starting the confinement (:mod:`~crabray.backends.local._isolation`, over
:mod:`~crabray.backends.local._bwrap`), running commands and their process groups
(:mod:`~crabray.backends.local._exec`), the path mapping
(:mod:`~crabray.backends.local._paths`) and the screen (:mod:`~crabray.backends.display`).
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import platform
import shutil
import socket
import stat
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal

from typing_extensions import override

from crabray.backends import runnable_files
from crabray.backends.base import Backend, ExecResult, Frozen, PythonCall, output_text
from crabray.backends.confinement import HOME_DIR, TMP_DIR, WORK_DIR
from crabray.backends.display import INSTALL_HINT as DISPLAY_INSTALL_HINT
from crabray.backends.display import DisplayHook, missing_tools
from crabray.backends.guest import GUEST_ARGV, Guest, GuestChannel, NoPythonError
from crabray.backends.local._bwrap import SANDBOX_PATH, Holder
from crabray.backends.local._enter import entry_env
from crabray.backends.local._exec import PipeChannel, ProcessGroups, communicate, launch_guest
from crabray.backends.local._inplace import KEYCTL
from crabray.backends.local._isolation import (
    choose_isolation,
    host_user,
    memory_prefix,
    start_holder,
)
from crabray.backends.local._kept import Stamp, changed, others_left, take
from crabray.backends.local._limits import (
    controllers,
    join_prefix,
    make_cgroup,
    mount_disk,
    release,
)
from crabray.backends.local._network import require_pasta
from crabray.backends.local._paths import (
    SANDBOX_HOME,
    SANDBOX_TMP,
    SANDBOX_WORKDIR,
    SandboxView,
    is_mapped,
    read_bounded,
    resolve_unconfined,
    sandbox_abspath,
)
from crabray.backends.local._settings import Isolation, LocalSettings
from crabray.backends.local._spare import Built, SpareSandbox
from crabray.backends.ownership import is_abandoned, kill_processes_in, write_owner
from crabray.backends.settings import parse_settings
from crabray.backends.wipe import remove_path
from crabray.core.environment import EnvironmentConfig
from crabray.core.errors import ConfigError, SandboxError, SandboxFileError, SandboxHostError
from crabray.core.words import counted

logger = logging.getLogger(__name__)

_REQUEST_ERRNOS = frozenset(
    {errno.EACCES, errno.EEXIST, errno.EISDIR, errno.ELOOP, errno.EROFS}
    | {errno.ENAMETOOLONG, errno.ENOENT, errno.ENOTDIR, errno.EPERM}
    | {errno.ENXIO, errno.EAGAIN, errno.ETXTBSY, errno.ENODEV, errno.EOPNOTSUPP}
)
"""``OSError`` numbers that mean the file request was wrong, not that the host failed.

``ENXIO``, ``EAGAIN``, ``ETXTBSY``, ``ENODEV`` and ``EOPNOTSUPP`` among them: a socket, a
FIFO, a device or a file with a lease held on it where a file was expected, which is
what the agent made of its own sandbox.

``EROFS`` among them: the paths are resolved inside the sandbox's own view, so a
read-only file system there is one of the sandbox's (a system directory a symlink
such as ``ln -s / escape`` leads to), never the host's failing."""

_FULL_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT})
"""``OSError`` numbers of a full file system: the sandbox's own (``disk_mb``), which the agent
filled, or, without one, the host's."""


class LocalBackend(Backend):
    """A sandbox that is a directory on the host, confined by bubblewrap where possible.

    Settings (``config.backend_settings``, see :class:`LocalSettings`):
    ``root_dir`` (where sandbox directories are made; the system temp dir by
    default), ``shell`` (``/bin/sh`` by default), ``isolation`` (``auto``,
    ``bwrap`` or ``none``), ``network`` and ``display``. An unknown setting is
    a ``ConfigError`` here, at construction, not at ``start()``.

    Args:
        config: The environment this sandbox serves.

    Raises:
        ConfigError: ``backend_settings`` do not validate.
    """

    kind = "local"
    reset_in_call = True
    default_memory_mb = 256
    """A shell and a few commands: ``memory_mb`` here is a per-process bound, unset by default."""
    settings_model = LocalSettings
    settings: LocalSettings

    @override
    @classmethod
    def reaches_worker(cls, settings: dict[str, Any]) -> bool:
        """Only an unconfined sandbox (``isolation: none``) runs as the host's user in the
        host's process namespace; a confined one (bubblewrap's pid namespace) cannot see
        the worker."""
        return settings.get("isolation") == "none"

    def __init__(self, config: EnvironmentConfig) -> None:
        super().__init__(config)
        self._root: Path | None = None
        self._shell: str | None = None
        self._runnable_before: runnable_files.Listing = {}
        """The files commands may run unnamed, listed when the agent began (confined)."""
        self._changed_runnable: list[str] = []
        """Those the agent changed, seen at the end of its turn."""
        self._bound: list[str] = []
        """Prefix of every process started in the sandbox (``memory_mb``'s ``prlimit``); with
        a cgroup, :meth:`_prefix` puts the cgroup's before it."""
        self._groups = ProcessGroups()
        self._display = DisplayHook(self.settings.display, config.name)
        self._isolation: Literal["bwrap", "none"] | None = None
        self._holder: Holder | None = None
        self._guest = Guest(
            self._launch_guest, f"local sandbox of '{config.name}'", alive=self._sandbox_alive
        )
        self._spare = SpareSandbox(self._build_spare, _discard, config.name)
        """Confined without a screen: the next reset's sandbox, built during the episode."""
        self._channel: PipeChannel | None = None
        """The last guest's channel, as :meth:`_launch_guest` started it."""
        self._stamp: Stamp | None = None
        """The kept guest as the host saw it at its start (:mod:`~crabray.backends.local._kept`)."""

    @property
    def root(self) -> Path:
        """The sandbox root (resolved, no symlinks): nothing outside it is reachable by path.

        Raises:
            SandboxError: The sandbox is not started, or is closed.
        """
        return self._started("root", self._root)

    @property
    def isolation(self) -> Isolation:
        """``bwrap`` or ``none`` once started; the setting (maybe ``auto``) before."""
        return self._isolation or self.settings.isolation

    @property
    def workdir(self) -> Path:
        """The working directory inside the root, on the host; commands start here.

        Raises:
            SandboxError: The sandbox is not started, or is closed.
        """
        return self._started("workdir", self._root) / WORK_DIR

    @override
    def _start(self) -> None:
        shell = _shell(self.settings, self.config.name)
        self._bound = memory_prefix(self.settings.memory_mb, self.config.name)
        isolation = choose_isolation(self.settings.isolation, self.config.name)
        sandbox = self._new_dir(confined=isolation == "bwrap")
        try:
            self._display.start(cwd=sandbox)
            if isolation == "bwrap":
                self._holder = start_holder(
                    sandbox,
                    self.config.name,
                    self.settings.network,
                    self._display,
                    self._prefix(sandbox),
                )
        except SandboxError:
            self._display.close()
            _discard(sandbox)
            raise
        self._root = sandbox
        self._shell = shell
        self._isolation = isolation
        if isolation == "bwrap":
            logger.debug(
                "local sandbox of '%s' at %s is confined (bwrap)", self.config.name, sandbox
            )
            self._start_kept_guest()
        else:
            logger.info(
                "local backend for '%s' is unconfined: commands run as host user '%s' in the "
                "plain directory %s, with full access to this host",
                self.config.name,
                host_user(),
                sandbox,
            )

    @override
    def _reset(self) -> None:
        """Give the next episode a clean sandbox.

        Confined without a screen under a root driver, the running holder is
        kept when it can be made exactly as clean as a new one
        (:mod:`crabray.backends.local._inplace`: its processes killed, its IPC
        objects removed, its writable directories emptied), else it is
        replaced as below. Confined without a screen under another user, the
        first reset wipes the directory and starts a new holder, and orders a
        spare: a new directory and holder built in a thread while the next
        episode runs; every later reset swaps the spare in and orders the next
        one (the used directory is removed in that thread).
        """
        sandbox = self._started("reset", self._root)
        if self._reset_keeping_guest():
            return
        self._guest.renew()  # every process of the sandbox dies below: the next guest is clean
        self._stamp = None
        self._groups.kill_all()
        if self._reset_in_place():
            self._start_kept_guest()
            return
        self._kill_holder()
        self._display.reset()
        spare = self._spare.take() if self._uses_spares() else None
        if spare is not None:
            self._root, self._holder = spare
            self._spare.order(used=sandbox)
            logger.debug("reset local sandbox of '%s': now %s", self.config.name, spare[0])
            self._start_kept_guest()
            return
        try:
            sandbox.mkdir(parents=True, exist_ok=True)
            for entry in list(os.scandir(sandbox)):
                _remove(Path(entry.path))
            self._make_dirs(sandbox)
        except OSError as exc:
            raise SandboxError(
                f"cannot reset the local sandbox of '{self.config.name}' at {sandbox}: {exc}; "
                "do not reuse it"
            ) from exc
        if self._isolation == "bwrap":
            self._holder = start_holder(
                sandbox,
                self.config.name,
                self.settings.network,
                self._display,
                self._prefix(sandbox),
            )
        if self._uses_spares():
            self._spare.order(used=None)
        logger.debug("reset local sandbox %s", sandbox)
        self._start_kept_guest()

    def _keeps_guest(self) -> bool:
        """Whether the sandbox keeps a guest across resets: a root driver's confined sandbox
        without a screen, which resets in place (one ``python3`` start per holder instead
        of one entry program per command)."""
        holder = self._holder
        return holder is not None and holder.resets_in_place and self._display.display is None

    def _start_kept_guest(self) -> None:
        """Start the guest in the clean sandbox, before anything else runs there, and stamp it.

        Without ``python3`` (or a guest that cannot be stamped), commands keep the entry
        program: a plain-Python action still starts a guest when it runs.
        """
        if not self._keeps_guest() or self._guest.running:
            return
        try:
            self._guest.check()
            channel = self._channel
            host_pid = channel.host_pid() if channel is not None else None
            if channel is None or host_pid is None or channel.pid is None:
                raise SandboxError("the guest's process cannot be found on the host")
            self._stamp = take(host_pid, channel.pid)
        except (SandboxError, ConfigError, OSError) as exc:
            logger.debug("local sandbox of '%s' keeps no guest: %s", self.config.name, exc)
            self._guest.renew()
            self._stamp = None

    def _reset_keeping_guest(self) -> bool:
        """Reset in place with the kept guest spared, if it can be proven untouched.

        The guest (trusted, idle, and having run no Python call) kills every other
        process and removes the IPC objects and keyrings; the host then checks that
        nothing but pid 1 and the guest is left in the pid namespace, clears the
        directories, and checks that the guest is still the process it stamped
        (:func:`~crabray.backends.local._kept.changed`). Any doubt: False, and the
        caller kills the guest and resets as before.
        """
        holder, stamp, channel = self._holder, self._stamp, self._channel
        if holder is None or stamp is None or channel is None or not self._keeps_guest():
            return False
        why = self._guest.reset_inside(KEYCTL[platform.machine()])
        if why is None:
            self._groups.kill_all(spare=channel.launcher_pid)
            try:
                left = others_left(holder.root_fd, stamp.ns_pid)
                why = f"processes {left} outlived the guest's reset" if left else None
                why = why or holder.clear_in_place() or changed(stamp)
            except (SandboxError, OSError) as exc:
                why = str(exc)
        if why is not None:
            logger.debug("local sandbox of '%s' gets a new guest: %s", self.config.name, why)
            return False
        self._guest.keep()
        logger.debug("reset local sandbox of '%s' in place, its guest kept", self.config.name)
        return True

    def _reset_in_place(self) -> bool:
        """Reset a root driver's confined sandbox without a screen in place, if it can be."""
        holder = self._holder
        if holder is None or self._display.display is not None or not holder.resets_in_place:
            return False
        try:
            why = holder.reset_in_place()
        except (SandboxError, OSError, subprocess.TimeoutExpired) as exc:
            why = str(exc)
        if why is None:
            logger.debug("reset local sandbox of '%s' in place", self.config.name)
            return True
        logger.debug("local sandbox of '%s' gets a new holder: %s", self.config.name, why)
        return False

    def _new_dir(self, *, confined: bool = True) -> Path:
        """A new, empty sandbox directory (resolved) under the root directory.

        Confined, it gets a disk of its own (``disk_mb``); either way a cgroup
        (:meth:`_bound_dir`). An unconfined sandbox's commands own the host's files
        anyway, so a disk of its own would bound nothing.

        Raises:
            SandboxError: It could not be made.
        """
        root = self.settings.root_dir or Path(tempfile.gettempdir())
        try:
            root = root.expanduser()
            root.mkdir(parents=True, exist_ok=True)
            sandbox = Path(tempfile.mkdtemp(prefix=f"crabray-{self.config.name}-", dir=root))
            sandbox = Path(os.path.realpath(sandbox))
        except OSError as exc:
            raise SandboxError(
                f"cannot create the local sandbox of '{self.config.name}' under {root}: {exc}"
            ) from exc
        try:
            self._bound_dir(sandbox, confined=confined)
            self._make_dirs(sandbox)
        except OSError as exc:
            with contextlib.suppress(OSError):
                _discard(sandbox)
            raise SandboxError(
                f"cannot create the local sandbox of '{self.config.name}' at {sandbox}: {exc}"
            ) from exc
        return sandbox

    def _bound_dir(self, sandbox: Path, *, confined: bool) -> None:
        """Give new sandbox directory ``sandbox`` its disk and its cgroup, where this host can.

        See :mod:`crabray.backends.local._limits` (root only; otherwise nothing here).

        Raises:
            OSError: The cgroup could not be made.
        """
        settings = self.settings
        if settings.disk_mb is not None and confined:
            mount_disk(sandbox, settings.disk_mb)
        found = controllers()
        if found is not None and (settings.sandbox_memory_mb or settings.pids_limit):
            make_cgroup(found, sandbox.name, settings.sandbox_memory_mb, settings.pids_limit)

    def _prefix(self, sandbox: Path) -> list[str]:
        """What every process of ``sandbox`` is started through: its cgroup, then ``memory_mb``."""
        found = controllers()
        if found is None or not any(d.is_dir() for d in found.dirs(sandbox.name)):
            return list(self._bound)
        return [*join_prefix(found, sandbox.name), *self._bound]

    def _uses_spares(self) -> bool:
        """Confined without a screen, under a user other than root (root's reset in place): a
        screen's socket is bound into the holder and a new screen comes with each reset, so
        those sandboxes get a new holder at reset."""
        in_place = self._holder is not None and self._holder.identity.as_root
        return self._isolation == "bwrap" and self._display.display is None and not in_place

    def _build_spare(self) -> Built:
        """A new sandbox directory with a running holder (in the spare's thread).

        Raises:
            SandboxError: The directory or the holder could not be made.
        """
        sandbox = self._new_dir()
        try:
            holder = start_holder(
                sandbox,
                self.config.name,
                self.settings.network,
                self._display,
                self._prefix(sandbox),
            )
        except SandboxError:
            _discard(sandbox)
            raise
        return sandbox, holder

    @override
    def exec(
        self,
        command: str | list[str],
        *,
        timeout_sec: float | None = None,
        cwd: str | None = None,
        env: dict[str, str] | None = None,
    ) -> ExecResult:
        """Run ``command`` in the sandbox's working directory (or ``cwd``).

        ``cwd`` is relative to the working directory, or absolute: a sandbox
        path (``/home/user/...``, ``/tmp/...``; confined, any directory the
        sandbox sees) or, unconfined, also a host path. The environment is made
        for the sandbox, never the driver's: ``PATH`` (the standard system
        directories confined, the host's unconfined), ``HOME`` and ``TMPDIR``
        inside the sandbox (``/home/user`` and ``/tmp`` confined), ``LANG``
        (``C.UTF-8``), ``TERM`` (``dumb``), ``DISPLAY`` with a screen, then
        ``env``. A program that does not exist is a result with exit 127 (126
        when not executable), and a ``cwd`` that does not exist one with exit
        126, as a shell would report them: they are the caller's mistake, not
        an infrastructure failure to retry.

        Raises:
            ValueError: ``command`` is an empty list or holds something other than strings.
            SandboxError: Not started, closed, the host could not spawn a process, or a
                confined sandbox's bwrap process is gone.
        """
        sandbox = self._started("exec", self._root)
        argv = raw_argv = self._argv(command)
        started = time.monotonic()
        run_env = spawn_env = {**self._command_env(sandbox), **(env or {})}
        if self._holder is not None:
            inside = sandbox_abspath(cwd) if cwd is not None else SANDBOX_WORKDIR
            missing = self._confined_dir_missing(inside)
            # The host side never enters a sandbox directory: the entry changes into it inside.
            run_dir, shown, spawn_env = Path("/"), inside, entry_env(run_env)
            argv = self._holder.command(argv, cwd=inside)
        else:
            run_dir = self._unconfined_dir(sandbox, cwd)
            missing, shown = not run_dir.is_dir(), str(run_dir)
        logger.debug("exec in %s (timeout %s s): %.200r", shown, timeout_sec, command)
        if missing:
            return ExecResult(
                exit_code=126,
                stderr=f"cannot run in {shown}: no such directory\n",
            )
        if self._holder is not None:
            # A trusted guest (kept across resets, or started by a Python call) runs it: no
            # entry program. One busy, lost or not trusted leaves it to the entry; unconfined,
            # a direct spawn is cheaper than the round trip.
            through = self._guest.try_exec(
                raw_argv, cwd=shown, env=run_env, timeout_sec=timeout_sec
            )
            if through is not None:
                return through
        try:
            proc = subprocess.Popen(
                [*self._prefix(sandbox), *argv],
                cwd=run_dir,
                env=spawn_env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                start_new_session=True,
            )
        except (FileNotFoundError, NotADirectoryError, PermissionError) as exc:
            code = 126 if isinstance(exc, PermissionError) else 127
            return ExecResult(
                exit_code=code,
                stderr=f"cannot run {argv[0]!r}: {exc.strerror or exc}\n",
                duration_sec=time.monotonic() - started,
            )
        except OSError as exc:
            raise SandboxError(
                f"local sandbox of '{self.config.name}' could not spawn {argv[0]!r}: {exc}"
            ) from exc
        self._groups.track(proc.pid)
        deadline = None if timeout_sec is None else started + timeout_sec
        stdout, stderr, timed_out, (cut_out, cut_err) = communicate(proc, deadline)
        exit_code = -1 if timed_out else proc.returncode
        duration = time.monotonic() - started
        logger.debug("exec %.60r ended: exit %s after %.2f s", command, exit_code, duration)
        return ExecResult(
            exit_code=exit_code,
            stdout=output_text(stdout, cut_out),
            stderr=output_text(stderr, cut_err),
            timed_out=timed_out,
            duration_sec=duration,
        )

    @override
    def call_python(self, call: PythonCall) -> Any:
        """Run a plain-Python action in the sandbox's guest, in the working directory.

        The guest is this sandbox's own ``python3`` (the host's, seen through
        the confinement), started on the first call; confined, commands then go
        through it too.
        """
        self._require_started(f"run action '{call.action}'")
        workdir = SANDBOX_WORKDIR if self._holder is not None else str(self.workdir)
        return self._guest.call(call, cwd=workdir)

    @override
    def check_python(self) -> str:
        self._require_started("start its guest")
        return self._guest.check()

    @override
    def agent_begins(self) -> None:
        """Trust the guest running now (or start one) and have it note the harness's processes.

        Confined, the guest is what freezes the agent's processes while it is
        graded (:meth:`freeze_agent`), so one is started here if none runs.
        """
        self._guest.vouch()
        self._changed_runnable = []
        if self._holder is not None:
            self._runnable_before = runnable_files.list_runnable(self._runnable_folders())
            with contextlib.suppress(NoPythonError):
                self._guest.begin()

    @override
    def agent_ends(self) -> None:
        """Confined, list the startup files and program folders' files again: those the agent
        changed make a command's grade unverified (a grading script may source them)."""
        if self._holder is None:
            return
        after = runnable_files.list_runnable(self._runnable_folders())
        for path in runnable_files.changed(self._runnable_before, after):
            if path not in self._changed_runnable:
                self._changed_runnable.append(path)

    def _runnable_folders(self) -> dict[Path, str]:
        """The sandbox's folders the agent writes, on this host, and where the agent sees them."""
        root = self._started("list the sandbox's startup files", self._root)
        return {
            root / HOME_DIR: SANDBOX_HOME,
            root / WORK_DIR: SANDBOX_WORKDIR,
            root / TMP_DIR: SANDBOX_TMP,
        }

    @override
    def grader_distrust(self, *, ran_commands: bool) -> str | None:
        """Confined, grading is trusted unless a guest was started after the agent acted, or
        an evaluator ran commands after the agent changed files they may run unnamed.

        The system directories (the interpreter, its standard library, the
        programs commands run) are read-only in the sandbox, the guest runs
        isolated from ``/`` (see ``GUEST_ARGV``), commands get a made
        environment, and files are read on the host side. But a task's grading
        script may source ``~/.profile`` or run a program of a virtualenv in the
        home folder (:mod:`crabray.backends.runnable_files`). Unconfined, the
        agent is the host user: nothing is trusted.
        """
        if self._holder is None:
            return "an unconfined local sandbox (isolation: none): the agent is the host's user"
        if self._guest.untrusted_starts:
            return "the guest that grades was started after the agent acted"
        if ran_commands and self._changed_runnable:
            shown = ", ".join(self._changed_runnable[:5])
            return (
                "an evaluator ran commands after the agent changed what they may run: "
                f"a shell's or Python's startup files or program folders ({shown})"
            )
        return None

    @override
    def grader_replaced(self) -> bool:
        return self._holder is not None and self._guest.untrusted_starts > 0

    @override
    def probe_health(self) -> str | None:
        """The sandbox's directory and, confined, its holder: nothing of the agent's is read."""
        if self._sandbox_alive():
            return None
        return f"the local sandbox of '{self.config.name}' is gone (its directory or holder)"

    @override
    def freeze_agent(self) -> Frozen:
        """Confined, the guest stops every other process of the sandbox but the harness's."""
        self._require_started("freeze the agent's processes")
        if self._holder is None:
            return Frozen(
                unverified="an unconfined local sandbox (isolation: none) cannot stop the "
                "agent's processes: they are the host user's"
            )
        return self._guest.freeze()

    @override
    def thaw_agent(self) -> None:
        if self._holder is not None:
            self._guest.thaw()

    def _launch_guest(self) -> GuestChannel:
        """Start ``python3`` in the sandbox as a command is started, with pipes to talk to it.

        It starts in ``/`` (isolated, see ``GUEST_ARGV``), never in the working
        directory the agent writes; each call changes into its own directory.
        """
        sandbox = self._root  # set before start() returns: a kept guest starts in _start
        if sandbox is None:
            raise SandboxError(f"the local sandbox of '{self.config.name}' is not started")
        argv = list(GUEST_ARGV)
        # The guest's own environment is made like a command's: nothing of the driver's.
        env = self._command_env(sandbox)
        if self._holder is not None:
            argv = self._holder.command(argv, cwd="/")
            env = entry_env(env)
        self._channel = launch_guest(
            [*self._prefix(sandbox), *argv],
            Path("/"),
            env,
            self._groups,
            self.config.name,
            entered=self._holder is not None,
        )
        return self._channel

    @property
    def _disk_limited(self) -> bool:
        """Whether the sandbox has a disk of its own (``disk_mb``): a full one is its own."""
        return self._root is not None and os.path.ismount(self._root)

    def _sandbox_alive(self) -> bool:
        """Whether the sandbox itself is still there: its directory, and its holder if confined.

        Nothing in the sandbox can kill its holder (pid 1 of its namespace ignores
        every signal sent from inside), so a guest lost while this holds was killed
        by what ran inside.
        """
        if self._root is None or not self._root.is_dir():
            return False
        return self._isolation != "bwrap" or (self._holder is not None and self._holder.intact)

    def _command_env(self, sandbox: Path) -> dict[str, str]:
        """The environment every process of the sandbox starts with: made, never the driver's."""
        if self._holder is not None:
            path, home, tmp = SANDBOX_PATH, SANDBOX_HOME, SANDBOX_TMP
        else:
            path = os.environ.get("PATH", os.defpath)
            home, tmp = str(sandbox / HOME_DIR), str(sandbox / TMP_DIR)
        return {
            "PATH": path,
            "HOME": home,
            "TMPDIR": tmp,
            "LANG": "C.UTF-8",
            "TERM": "dumb",
            **self._display.env,
        }

    def _confined_dir_missing(self, inside: str) -> bool:
        """Whether sandbox directory ``inside`` is known to be missing (checked inside the sandbox).

        A directory of the host's system (``/usr``) or one a symlink leads out
        of is not the sandbox's own: the entry program reports on those.
        """
        if not is_mapped(inside):
            return False
        try:
            return not self._view().is_dir(inside)
        except SandboxFileError:
            return False

    def _unconfined_dir(self, sandbox: Path, cwd: str | None) -> Path:
        """Where an unconfined command runs: ``cwd`` mapped as files are, or a host path."""
        if cwd is None:
            return sandbox / WORK_DIR
        try:
            return resolve_unconfined(sandbox, cwd, "run in")
        except SandboxFileError:
            return Path(cwd) if os.path.isabs(cwd) else sandbox / WORK_DIR / cwd

    @override
    def put_file(self, path: str, data: bytes) -> None:
        """Write ``data`` atomically (temp file + rename) under the sandbox directory.

        ``path`` is a sandbox path: relative to the working directory, or under
        ``/home/user`` or ``/tmp`` (see :mod:`crabray.backends.local._paths`).

        Raises:
            SandboxFileError: The path resolves outside the sandbox directory (``..``,
                an absolute path elsewhere, a symlink pointing out), is a directory, or
                cannot be written there (a file in the way, no permission).
            SandboxError: The host failed (disk full, I/O error).
        """
        if self._holder is not None:
            with self._file_errors("write", path):
                self._view().write(path, data)
            logger.debug("put %d bytes to %s", len(data), path)
            return
        target = self._host_file(path, "write")
        with self._file_errors("write", path):
            target.parent.mkdir(parents=True, exist_ok=True)
            mode = stat.S_IMODE(target.stat().st_mode) if target.exists() else 0o644
            fd, tmp_name = tempfile.mkstemp(prefix=f".{target.name}.", dir=target.parent)
            try:
                with os.fdopen(fd, "wb") as handle:
                    handle.write(data)
                os.chmod(tmp_name, mode)
                os.replace(tmp_name, target)
            except BaseException:
                Path(tmp_name).unlink(missing_ok=True)
                raise
        logger.debug("put %d bytes to %s", len(data), target)

    @override
    def get_file(self, path: str, *, max_bytes: int | None = None) -> bytes:
        """Read a file under the sandbox directory (``path`` as for ``put_file``).

        Raises:
            FileTooLargeError: The opened file is larger than ``max_bytes``.
            SandboxFileError: The path resolves outside the sandbox directory, is
                missing, is a directory, or cannot be read (no permission).
            SandboxError: The host failed (I/O error).
        """
        if self._holder is not None:
            with self._file_errors("read", path):
                return self._view().read(path, max_bytes)
        target = self._host_file(path, "read")
        if not target.exists():
            raise SandboxFileError(
                f"cannot read '{path}': no such file in the sandbox {self._root}"
            )
        # Non-blocking, so a FIFO put there by a command cannot hang the caller.
        flags = os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC
        with self._file_errors("read", path), open(os.open(target, flags), "rb") as handle:
            if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
                raise SandboxFileError(f"cannot read '{path}': it is not a regular file")
            data = read_bounded(handle, path, max_bytes)
        logger.debug("got %d bytes from %s", len(data), target)
        return data

    @override
    def _close(self) -> None:
        sandbox, self._root = self._root, None
        self._spare.close()
        self._guest.close()
        self._stamp = None
        self._groups.kill_all()
        self._kill_holder()
        self._display.close()
        if sandbox is None:
            return
        try:
            _discard(sandbox)
        except OSError as exc:
            logger.warning("could not remove local sandbox %s: %s", sandbox, exc)
            return
        logger.debug("closed local sandbox %s", sandbox)

    @override
    def screenshot(self) -> bytes:
        """A PNG of the sandbox's Xvfb screen (``display`` setting).

        Raises:
            SandboxError: The setting is off, or the grab failed.
        """
        self._require_started("take a screenshot")
        return self._display.screenshot()

    @override
    def describe(self) -> dict[str, Any]:
        return {
            **super().describe(),
            "host": socket.gethostname(),
            "root": str(self._root) if self._root else None,
            "workdir": str(self._root / WORK_DIR) if self._root else None,
            "isolation": self.isolation,
            "network": self.settings.network if self.isolation != "none" else True,
            "sandbox_workdir": SANDBOX_WORKDIR if self._holder else None,
            "pid_namespace": self._holder.pid_namespace if self._holder else None,
            "reset": self._reset_kind(),
        }

    def _reset_kind(self) -> str:
        """How ``reset()`` makes a clean sandbox, for ``describe()``."""
        if self._holder is None:
            return "wipe"
        if self._display.display is None and self._holder.resets_in_place:
            return "in place"
        return "spare" if self._uses_spares() else "new holder"

    @staticmethod
    def _make_dirs(sandbox: Path) -> None:
        for name in (WORK_DIR, HOME_DIR, TMP_DIR):
            (sandbox / name).mkdir(exist_ok=True)
        write_owner(sandbox)

    @classmethod
    @override
    def preflight(cls, settings: dict[str, Any], env_name: str) -> None:
        """Check the shell, ``prlimit`` for ``memory_mb``, that bubblewrap confines a sandbox
        (a real one runs ``true``, once per process), ``pasta`` for ``network`` and Xvfb
        for ``display``.

        Raises:
            ConfigError: The settings do not validate.
            SandboxHostError: What is missing here, and how to install it.
        """
        parsed = parse_local_settings(settings)
        _shell(parsed, env_name)
        memory_prefix(parsed.memory_mb, env_name)
        isolation = choose_isolation(parsed.isolation, env_name)
        if isolation == "bwrap" and parsed.network:
            require_pasta(env_name)
        if parsed.display:
            missing = missing_tools()
            if missing:
                raise SandboxHostError(
                    f"the screen of '{env_name}' (backend_settings.display) needs "
                    f"{', '.join(missing)}, not installed on this host; install with: "
                    f"{DISPLAY_INSTALL_HINT}"
                )

    @classmethod
    def cleanup_orphans(cls, settings: dict[str, Any]) -> list[str]:
        """Remove local sandboxes under the root directory whose owner process is gone."""
        root = (parse_local_settings(settings).root_dir or Path(tempfile.gettempdir())).expanduser()
        removed = []
        for sandbox in root.glob("crabray-*"):
            if not sandbox.is_dir() or not is_abandoned(sandbox):
                continue
            killed = kill_processes_in(sandbox)
            try:
                _discard(sandbox)
            except OSError as exc:
                logger.warning("could not remove abandoned sandbox %s: %s", sandbox, exc)
                continue
            processes = counted(killed, "process", "processes")
            logger.info("removed abandoned sandbox %s (killed %s)", sandbox, processes)
            removed.append(f"sandbox folder {sandbox}")
        return removed

    def _argv(self, command: str | list[str]) -> list[str]:
        if isinstance(command, str):
            return [self._shell or self.settings.shell, "-c", command]
        if not command or not all(isinstance(arg, str) for arg in command):
            raise ValueError(f"a command list must be a non-empty list of strings, got {command!r}")
        return list(command)

    def _resolve(self, path: str, operation: str) -> Path:
        """Unconfined: the real host path of sandbox path ``path``, refusing anything outside.

        Raises:
            SandboxFileError: ``path`` resolves (following symlinks) outside the sandbox.
        """
        sandbox = self._started(f"{operation} '{path}'", self._root)
        return resolve_unconfined(sandbox, path, operation)

    def _host_file(self, path: str, operation: str) -> Path:
        """Unconfined: the host path of sandbox file ``path``, which must not be a directory.

        Raises:
            SandboxFileError: ``path`` resolves outside the sandbox, or is a directory.
        """
        target = self._resolve(path, operation)
        if target.is_dir():
            raise SandboxFileError(
                f"cannot {operation} '{path}': {target} is a directory, not a file"
            )
        return target

    def _view(self) -> SandboxView:
        """Confined: the sandbox's files as its processes see them (see :class:`SandboxView`).

        The one seam for file operations of a confined sandbox: they resolve
        every path inside the sandbox's own mount namespace, never on the host.

        Raises:
            SandboxError: Not started, closed, or the sandbox's bwrap process is gone.
        """
        sandbox = self._started("reach the sandbox's files", self._root)
        if self._holder is None:
            raise SandboxError(f"internal error: the sandbox of '{self.config.name}' is unconfined")
        identity = self._holder.identity
        owner = (identity.host_uid, identity.host_gid) if identity.as_root else None
        return SandboxView(self._holder.root_fd, owner, str(sandbox))

    @contextlib.contextmanager
    def _file_errors(self, verb: str, path: str) -> Iterator[None]:
        """Translate an ``OSError`` of a file operation: a bad request, or a host that is failing.

        Only the first is a ``SandboxFileError``; a full disk or an I/O error
        means the sandbox itself is broken, which is retried on a fresh one.
        """
        try:
            yield
        except OSError as exc:
            message = f"cannot {verb} '{path}' in the sandbox {self._root}: {exc.strerror or exc}"
            if exc.errno in _REQUEST_ERRNOS:
                raise SandboxFileError(f"{message} (inside the sandbox)") from exc
            if exc.errno in _FULL_ERRNOS and self._disk_limited:
                raise SandboxFileError(
                    f"{message}: the sandbox's own disk (backend_settings.disk_mb, "
                    f"{self.settings.disk_mb} MiB) is full of what ran inside it"
                ) from exc
            raise SandboxError(f"{message} (a host failure, not a bad request)") from exc

    def _kill_holder(self) -> None:
        """Confined: kill the sandbox's pid namespace, so no process of it survives."""
        holder, self._holder = self._holder, None
        if holder is not None:
            holder.kill()


def _discard(sandbox: Path) -> None:
    """Remove a whole sandbox directory: its cgroup's processes and cgroup, its disk, its files.

    Raises:
        OSError: Something of it could not be removed.
    """
    release(sandbox)
    _remove(sandbox)


def _shell(settings: LocalSettings, name: str) -> str:
    """The absolute path of the sandbox's shell (``backend_settings.shell``).

    Raises:
        SandboxHostError: It is not an executable on this host.
    """
    shell = shutil.which(settings.shell)
    if shell is None:
        raise SandboxHostError(
            f"local sandbox of '{name}': shell '{settings.shell}' "
            "(backend_settings.shell) is not an executable on this host"
        )
    return shell


def _remove(path: Path) -> None:
    """Remove a file, symlink or whole tree, even one the commands made read-only.

    Iterative (:mod:`crabray.backends.wipe`): no tree an agent can make, however
    deep or long its paths, hits a recursion limit. Whatever vanishes meanwhile counts
    as removed: the cleanups of several Ray nodes on one machine share its temporary
    directory and may remove the same abandoned sandbox at once.

    Raises:
        OSError: Something could not be removed.
    """
    remove_path(str(path))


def parse_local_settings(settings: dict[str, Any]) -> LocalSettings:
    """Validate ``backend_settings`` so a typo fails before any sandbox exists.

    Raises:
        ConfigError: A setting is unknown or has the wrong type; names the field.
    """
    return parse_settings(LocalSettings, settings, LocalBackend.kind)
