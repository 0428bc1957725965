"""Confinement of a local sandbox with bubblewrap (``bwrap``).

A confined sandbox is one long-lived ``bwrap`` process (the *holder*) that owns
a set of fresh namespaces: user, mount (the host's system directories
read-only, an ``/etc`` made for the sandbox (:mod:`crabray.backends.local._etc`),
the sandbox directories at ``/home/user``, ``/home/user/work`` and ``/tmp``,
see :mod:`crabray.backends.local._paths`), pid (with its own ``/proc``), ipc,
uts, cgroup and network (with ``network: true``, connected to the outside but
not to the host by :mod:`crabray.backends.local._network`). Every command
joins those namespaces and drops every privilege (its capability sets, the
bounding set included, its groups; no_new_privs) before it runs, through
:mod:`crabray.backends.local._enter`, so processes a command leaves behind
(``server &``) are still there for the next command, as in a container.

Who the sandbox's processes are (:func:`identity`): when the driver runs as
root, ``bwrap`` itself runs as the unprivileged host user ``nobody``
(:data:`HOST_UID`) and maps it to the sandbox user ``user`` (uid
:data:`SANDBOX_UID`) in a user namespace, so nothing in the sandbox is root
on the host, and files it makes are owned by ``nobody``. ``bwrap`` running as
``nobody`` may not be able to reach the sandbox directory (a parent may be
private to root), so the holder first bind-mounts the three directories onto
a tmpfs covering a stage directory that it can reach (:func:`stage_dir`), in a
private mount namespace of its own
(:data:`crabray.backends.local._enter.STAGE_PROGRAM`): nothing changes on the
host, and nothing is left to remove. Otherwise the sandbox user is the
driver's own user.

Nothing of the driver's environment reaches the sandbox: the holder starts
with an empty environment, and commands get only what ``exec`` gives them.

Killing is by namespace: the holder's first process is pid 1 of the sandbox's
pid namespace, and when pid 1 dies the kernel kills everything else in it,
including processes that left their process group (``setsid``, daemons).
``kill()`` kills it and the holder's process group; ``--die-with-parent`` and a
pipe on the holder's stdin end the sandbox when its owner dies.

Each command runs in a new session on the host (``start_new_session``), so no
command has a controlling terminal to inject input into: what ``bwrap
--new-session`` protects against (the holder itself runs with it too).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import selectors
import shutil
import signal
import stat
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from crabray.backends.confinement import HOME_DIR, TMP_DIR, WORK_DIR
from crabray.backends.local._enter import (
    Entry,
    entry_env,
    init_argv,
    namespaces_of,
    stage_argv,
    unsupported,
)
from crabray.backends.local._etc import SANDBOX_HOSTNAME, etc_view
from crabray.backends.local._inplace import Fresh, record, reset_command, reset_in_place
from crabray.backends.local._network import Uplink
from crabray.backends.local._paths import SANDBOX_HOME, SANDBOX_TMP, SANDBOX_WORKDIR
from crabray.core.errors import SandboxError

logger = logging.getLogger(__name__)

INSTALL_HINT = "apt-get install bubblewrap"
"""How to get ``bwrap`` on Debian and Ubuntu."""

SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
"""Host directories a confined sandbox sees, read-only, when they exist here (and some
entries of ``/etc``: :func:`crabray.backends.local._etc.etc_view`)."""

SANDBOX_UID = 1000
"""The sandbox user's uid and gid inside the sandbox when the driver runs as root."""

HOST_UID = 65534
"""The host uid and gid (``nobody``/``nogroup``) of the sandbox user when the driver is root."""

SANDBOX_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
"""``PATH`` inside a confined sandbox (the host's ``PATH`` names directories it cannot see)."""

_STAGE_PARENTS = ("/run", "/tmp")
"""Where a root driver makes the stage directory that ``nobody`` can reach (first that exists)."""

START_TIMEOUT_SEC = 10.0
"""How long a new holder may take to report that its namespaces are ready."""

_NAMESPACES = ("user", "mnt", "uts", "ipc", "net", "pid", "cgroup")
"""``/proc/PID/ns`` names of every namespace a holder may own, the user namespace first."""

_READY = b"crabray-sandbox-ready\n"

_STAGED = (WORK_DIR, HOME_DIR, TMP_DIR)
"""The sandbox directories a root driver's stage shows to ``nobody``."""

_probe_lock = threading.Lock()
_probe_result: tuple[bool, str] | None = None


@dataclass(frozen=True)
class Tools:
    """Absolute paths of the programs confinement runs."""

    bwrap: str
    perl: str


@dataclass(frozen=True)
class Identity:
    """Who a sandbox's processes are, inside the sandbox and on the host."""

    uid: int
    gid: int
    host_uid: int
    host_gid: int
    as_root: bool
    """The driver runs as root: ``bwrap`` is started as the host user, and commands switch to it."""


def identity() -> Identity:
    """The sandbox user: host ``nobody`` as uid 1000 under a root driver, else the driver's user."""
    if os.geteuid() == 0:
        return Identity(SANDBOX_UID, SANDBOX_UID, HOST_UID, HOST_UID, as_root=True)
    return Identity(os.getuid(), os.getgid(), os.getuid(), os.getgid(), as_root=False)


def tools() -> Tools | str:
    """The programs confinement needs, or what is missing and how to fix it."""
    names = ("bwrap", "perl")
    found = {name: shutil.which(name) or shutil.which(name, path=SANDBOX_PATH) for name in names}
    missing = [name for name, where in found.items() if where is None]
    if missing:
        fix = INSTALL_HINT if "bwrap" in missing else "apt-get install perl-base"
        return f"{', '.join(missing)} not found on PATH (install with: {fix})"
    machine = unsupported()
    if machine is not None:
        return machine
    return Tools(**{name: str(where) for name, where in found.items()})


def probe() -> tuple[bool, str]:
    """Whether confinement works on this host: a real sandbox runs ``true``; once per process.

    Returns:
        ``(True, "")`` when it works, else ``(False, why)``.
    """
    global _probe_result
    with _probe_lock:
        if _probe_result is None:
            _probe_result = _probe()
            logger.debug("bubblewrap probe: %s", _probe_result)
        return _probe_result


def _probe() -> tuple[bool, str]:
    with tempfile.TemporaryDirectory(prefix="crabray-bwrap-probe-") as scratch:
        root = Path(scratch)
        for name in (WORK_DIR, HOME_DIR, TMP_DIR):
            (root / name).mkdir()
        holder = Holder(root, label="probe")
        try:
            holder.start()
            argv = holder.command(["true"], cwd=SANDBOX_WORKDIR)
            done = subprocess.run(
                argv,
                capture_output=True,
                timeout=START_TIMEOUT_SEC,
                check=False,
                env=entry_env({"PATH": SANDBOX_PATH}),
            )
        except (SandboxError, OSError, subprocess.TimeoutExpired) as exc:
            return False, str(exc)
        finally:
            holder.kill()
        if done.returncode != 0:
            output = done.stderr.decode(errors="replace").strip()
            return False, f"a command in a test sandbox exited {done.returncode}: {output}"
    return True, ""


class Holder:
    """The ``bwrap`` process that keeps one sandbox's namespaces alive.

    Args:
        root: The sandbox root on the host (holding ``work``, ``home``, ``tmp``).
        label: Who it serves, for messages (the environment name).
        network: Connect the sandbox's network namespace to the outside (never to the host's
            own addresses) instead of leaving it with only its loopback.
        extra_binds: Host paths made visible at the same path inside (an X socket).
        bound: Command prefix the holder starts through (a ``prlimit`` memory bound).
    """

    def __init__(
        self,
        root: Path,
        *,
        label: str,
        network: bool = False,
        extra_binds: tuple[str, ...] = (),
        bound: tuple[str, ...] = (),
    ) -> None:
        self.root = root
        self.label = label
        self.network = network
        self.extra_binds = extra_binds
        self.bound = bound
        self.identity = identity()
        self._proc: subprocess.Popen[bytes] | None = None
        self._pid1: int | None = None
        self._entry: Entry | None = None
        self._stage: Path | None = None
        self._root_fd: int | None = None
        self.pid_namespace: int | None = None
        self._uplink: Uplink | None = None
        self._fresh: Fresh | None = None
        """A root driver's: how the sandbox looked at start, for :meth:`reset_in_place`."""

    def bwrap_argv(self, found: Tools, info_fd: int, etc: Path) -> list[str]:
        """The holder's command line (``etc``: the directory to show at ``/etc``)."""
        me = self.identity
        argv = [found.bwrap]
        for directory in SYSTEM_DIRS:
            if os.path.lexists(directory):
                argv += ["--ro-bind", directory, directory]
        argv += ["--ro-bind", str(etc), "/etc", "--proc", "/proc", "--dev", "/dev"]
        source = self._stage or self.root
        argv += ["--bind", str(source / HOME_DIR), SANDBOX_HOME]
        argv += ["--bind", str(source / WORK_DIR), SANDBOX_WORKDIR]
        argv += ["--bind", str(source / TMP_DIR), SANDBOX_TMP]
        for path in self.extra_binds:
            argv += ["--bind", path, path]
        argv += ["--unshare-user", "--unshare-ipc", "--unshare-pid", "--unshare-uts"]
        argv += ["--unshare-cgroup-try", "--unshare-net"]
        if me.as_root:
            argv += ["--uid", str(me.uid), "--gid", str(me.gid)]
        argv += ["--hostname", SANDBOX_HOSTNAME, "--clearenv"]
        argv += ["--setenv", "PATH", SANDBOX_PATH, "--setenv", "HOME", SANDBOX_HOME]
        argv += ["--chdir", SANDBOX_WORKDIR, "--die-with-parent", "--new-session"]
        argv += ["--mqueue", "/dev/mqueue", "--as-pid-1", "--remount-ro", "/"]
        argv += ["--info-fd", str(info_fd), "--"]
        # pid 1 copies the ready line written on its stdin at start, so it reports readiness
        # once every mount is in place (bwrap executes it last), then waits for stdin to close.
        argv += init_argv(found.perl)
        if not me.as_root:
            return argv
        # As nobody, in a private mount namespace where the sandbox directories are on the stage:
        # one perl program binds them and becomes nobody (unshare, a shell, mount and setpriv
        # cost three starts more).
        if self._stage is None:
            raise SandboxError("internal error: a root driver's holder has no stage")
        binds = [(name, str(self.root / name)) for name in _STAGED]
        return stage_argv(found.perl, str(self._stage), binds, me.host_uid, me.host_gid, argv)

    def start(self) -> None:
        """Start the holder and wait until its namespaces are ready.

        Raises:
            SandboxError: A tool is missing, or ``bwrap`` failed (its message is included).
        """
        found = tools()
        if isinstance(found, str):
            raise SandboxError(f"cannot confine the sandbox of '{self.label}': {found}")
        try:
            self._prepare_dirs()
        except OSError as exc:
            self.kill()
            raise SandboxError(f"cannot prepare the sandbox of '{self.label}': {exc}") from exc
        try:
            etc = etc_view(self.identity.uid, self.identity.gid, host_hosts=self.network)
        except SandboxError:
            self.kill()
            raise
        read_fd, write_fd = os.pipe()
        try:
            proc = subprocess.Popen(
                [*self.bound, *self.bwrap_argv(found, write_fd, etc)],
                pass_fds=(write_fd,),
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                env={"PATH": SANDBOX_PATH},
                cwd="/",
                start_new_session=True,
            )
        except OSError as exc:
            os.close(read_fd)
            self.kill()
            raise SandboxError(f"cannot start bwrap for '{self.label}': {exc}") from exc
        finally:
            os.close(write_fd)
        self._proc = proc
        try:
            if proc.stdin is None:
                raise SandboxError("internal error: the bwrap holder's stdin pipe is missing")
            with contextlib.suppress(BrokenPipeError):  # bwrap ended: _wait_ready says why
                proc.stdin.write(_READY)
                proc.stdin.flush()
            info = self._wait_ready(proc, read_fd)
            self._pid1 = int(info["child-pid"])
            self._root_fd = os.open(f"/proc/{self._pid1}/root", os.O_PATH | os.O_DIRECTORY)
            if self.network:
                self._uplink = Uplink(self.label, self.identity.host_uid, self.identity.host_gid)
                self._uplink.start(self._pid1)
            if self.identity.as_root:
                self._fresh = record(self._root_fd)
        except (SandboxError, OSError) as exc:
            self.kill()
            if isinstance(exc, SandboxError):
                raise
            raise SandboxError(f"cannot reach the sandbox of '{self.label}': {exc}") from exc
        finally:
            os.close(read_fd)
        self.pid_namespace = info.get("pid-namespace")
        me = self.identity
        joined = namespaces_of(self._pid1, _NAMESPACES)
        self._entry = Entry(found.perl, self._pid1, me.uid, me.gid, me.as_root, joined)
        logger.debug("bwrap holder of '%s': pid %d, pid 1 is %d", self.label, proc.pid, self._pid1)

    def _prepare_dirs(self) -> None:
        """Give the sandbox directories to the sandbox user; as root, make the stage."""
        me = self.identity
        if not me.as_root:
            return
        for name in (WORK_DIR, HOME_DIR, TMP_DIR):
            os.chown(self.root / name, me.host_uid, me.host_gid)
            os.chmod(self.root / name, 0o700)
        self._stage = stage_dir()

    def _wait_ready(self, proc: subprocess.Popen[bytes], info_fd: int) -> dict[str, int]:
        """Read bwrap's info JSON and the holder's ready line, or raise with bwrap's stderr."""
        if proc.stdout is None or proc.stderr is None:
            raise SandboxError("internal error: the bwrap holder's pipes are missing")
        deadline = time.monotonic() + START_TIMEOUT_SEC
        info, ready = b"", b""
        with selectors.DefaultSelector() as selector:
            selector.register(info_fd, selectors.EVENT_READ)
            selector.register(proc.stdout, selectors.EVENT_READ)
            while not ready.endswith(_READY):
                left = deadline - time.monotonic()
                if left <= 0 or not selector.get_map():
                    break
                for key, _ in selector.select(left):
                    chunk = os.read(key.fd, 4096)
                    if not chunk:
                        selector.unregister(key.fileobj)
                    elif key.fd == info_fd:
                        info += chunk
                    else:
                        ready += chunk
        try:
            parsed = json.loads(info)
        except ValueError:
            parsed = None
        if ready.endswith(_READY) and isinstance(parsed, dict) and "child-pid" in parsed:
            return parsed
        if proc.poll() is None:
            why = f"it did not get ready within {START_TIMEOUT_SEC:g} s"
        else:
            why = f"exit code {proc.returncode}: " + (
                proc.stderr.read().decode(errors="replace").strip() or "no output"
            )
        raise SandboxError(f"bwrap could not create the sandbox of '{self.label}': {why}")

    @property
    def running(self) -> bool:
        """Whether the holder still runs (its namespaces exist)."""
        return self._proc is not None and self._proc.poll() is None

    @property
    def intact(self) -> bool:
        """Whether the sandbox still stands: the holder runs and its pid 1 is not dying.

        Killed from the host, pid 1 dies and bwrap exits a moment later; on a
        busy machine that moment is long enough to mistake a lost sandbox for a
        live one. Nothing inside can signal pid 1, so a dying pid 1 is the host's.
        """
        return self.running and self._pid1 is not None and not _dying(self._pid1)

    @property
    def root_fd(self) -> int:
        """A descriptor of the sandbox's own root directory (``/`` as its processes see it).

        File operations resolve paths from here, inside the sandbox's mount
        namespace, so no symlink can lead them to the host's files.

        Raises:
            SandboxError: The holder is not running (killed, or never started).
        """
        if not self.running or self._root_fd is None:
            raise self._gone()
        return self._root_fd

    def command(self, argv: list[str], *, cwd: str) -> list[str]:
        """The host command line that runs ``argv`` inside the sandbox, in sandbox dir ``cwd``.

        Start it with :func:`crabray.backends.local._enter.entry_env` of the
        command's environment (made for the sandbox, nothing of the driver's).

        Raises:
            SandboxError: The holder is not running (killed, or never started).
        """
        if not self.running or self._entry is None:
            raise self._gone()
        return self._entry.argv(argv, cwd=cwd)

    @property
    def resets_in_place(self) -> bool:
        """Whether :meth:`reset_in_place` may work: a root driver's running holder."""
        return self._fresh is not None and self.running

    def reset_in_place(self) -> str | None:
        """Make the sandbox as clean as a new one without a new holder
        (:mod:`crabray.backends.local._inplace`); None when done, else why a new one is needed.

        Raises:
            SandboxError: The holder is not running.
            OSError: The host failed to remove a file: do not reuse the sandbox.
            subprocess.TimeoutExpired: The reset program did not end.
        """
        if self._fresh is None or self._entry is None:
            return "only a root driver's sandbox resets in place"
        argv = self.command(reset_command(own_network=True), cwd="/")
        return reset_in_place(argv, self.root_fd, self._fresh, self.root)

    def clear_in_place(self) -> str | None:
        """:meth:`reset_in_place` of a sandbox whose processes its kept guest already killed
        (and its IPC objects and keyrings): the host's part alone, the directories.

        Raises:
            SandboxError: The holder is not running.
            OSError: The host failed to remove a file: do not reuse the sandbox.
        """
        if self._fresh is None:
            return "only a root driver's sandbox resets in place"
        return reset_in_place(None, self.root_fd, self._fresh, self.root)

    def _gone(self) -> SandboxError:
        return SandboxError(
            f"the confined sandbox of '{self.label}' is gone (its bwrap process ended); "
            "reset or recreate it"
        )

    def kill(self) -> None:
        """Kill everything in the sandbox: pid 1 of its pid namespace, then the holder's group.

        Harmless when already dead or never started.
        """
        root_fd, self._root_fd = self._root_fd, None
        if root_fd is not None:
            os.close(root_fd)
        uplink, self._uplink = self._uplink, None
        if uplink is not None:
            uplink.stop()
        proc, self._proc = self._proc, None
        if proc is not None:
            if proc.poll() is None and self._pid1 is not None:
                # pid 1 is bwrap's child; while bwrap has not been reaped, its pid is not recycled.
                _signal(lambda: os.kill(self._pid1 or 0, signal.SIGKILL))
            _signal(lambda: os.killpg(proc.pid, signal.SIGKILL))
            for stream in (proc.stdin, proc.stdout, proc.stderr):
                if stream is not None:
                    stream.close()
            proc.wait()
            logger.debug("killed the bwrap holder of '%s'", self.label)


def stage_dir() -> Path:
    """The directory a root driver's holders cover with their stage, made once per machine.

    Each holder mounts a tmpfs on it in a mount namespace of its own, so all share
    the one empty directory and nothing is left to remove. It must be root's and
    writable by no one else (another user's directory there is refused).

    Raises:
        SandboxError: The directory cannot be made, or is not root's own.
    """
    parent = next((p for p in _STAGE_PARENTS if os.path.isdir(p)), "/tmp")
    stage = Path(parent) / "crabray-stage"
    try:
        with contextlib.suppress(FileExistsError):
            os.mkdir(stage, 0o711)
        seen = os.lstat(stage)
    except OSError as exc:
        raise SandboxError(f"cannot make the stage directory {stage}: {exc}") from exc
    if not stat.S_ISDIR(seen.st_mode) or seen.st_uid != 0 or seen.st_mode & 0o022:
        raise SandboxError(
            f"{stage} is not a directory of root's that only root can write: remove it "
            "(crabray makes it again)"
        )
    return stage


_SIGKILL_BIT = 1 << (signal.SIGKILL - 1)
_PF_EXITING = 0x4


def _dying(pid: int) -> bool:
    """Whether process ``pid`` is gone, exiting, a zombie, or has SIGKILL pending."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
        stat_fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return True
    if stat_fields[0] in ("Z", "X", "x") or int(stat_fields[6]) & _PF_EXITING:
        return True
    pending = (
        int(line.split()[1], 16)
        for line in status.splitlines()
        if line.startswith(("SigPnd:", "ShdPnd:"))
    )
    return any(mask & _SIGKILL_BIT for mask in pending)


def _signal(send: Callable[[], None]) -> None:
    try:
        send()
    except ProcessLookupError:
        pass
    except PermissionError as exc:
        logger.warning("cannot kill a bwrap sandbox process: %s", exc)
