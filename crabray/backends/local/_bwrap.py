"""Confinement of a local sandbox with bubblewrap (``bwrap``).

A confined sandbox is one long-lived ``bwrap`` process (the *holder*) that owns
a set of fresh namespaces: mount (the host's system directories read-only, the
sandbox directories at ``/home/user``, ``/home/user/work`` and ``/tmp``, see
:mod:`crabray.backends.local._paths`), pid, ipc, uts, cgroup, user where the
kernel allows it, and network unless the sandbox asks for the host's. Every
command joins those namespaces with ``nsenter`` and drops all capabilities with
``setpriv --no-new-privs`` before it runs, so processes a command leaves behind
(``server &``) are still there for the next command, as in a container.

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

import json
import logging
import os
import selectors
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

from crabray.backends.local._paths import (
    HOME_DIR,
    SANDBOX_HOME,
    SANDBOX_TMP,
    SANDBOX_WORKDIR,
    TMP_DIR,
    WORK_DIR,
)
from crabray.core.errors import SandboxError

logger = logging.getLogger(__name__)

INSTALL_HINT = "apt-get install bubblewrap"
"""How to get ``bwrap`` on Debian and Ubuntu."""

SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc")
"""Host directories a confined sandbox sees, read-only, when they exist here."""

MASKED_FILES = ("/etc/shadow", "/etc/gshadow")
"""Host files hidden behind ``/dev/null`` even though ``/etc`` is visible."""

START_TIMEOUT_SEC = 10.0
"""How long a new holder may take to report that its namespaces are ready."""

_NAMESPACES: tuple[tuple[str, str], ...] = (("user", "-U"), ("mnt", "-m"), ("uts", "-u"))
_NAMESPACES += (("ipc", "-i"), ("net", "-n"), ("pid", "-p"), ("cgroup", "-C"))
"""(``/proc/PID/ns`` name, ``nsenter`` flag) of every namespace a holder may own."""

_READY = b"crabray-sandbox-ready\n"

_probe_lock = threading.Lock()
_probe_result: tuple[bool, str] | None = None


def tools() -> tuple[str, str, str] | str:
    """The paths of ``bwrap``, ``nsenter`` and ``setpriv``, or what is missing and how to fix it."""
    found = {name: shutil.which(name) for name in ("bwrap", "nsenter", "setpriv")}
    missing = [name for name, where in found.items() if where is None]
    if missing:
        fix = INSTALL_HINT if "bwrap" in missing else "apt-get install util-linux"
        return f"{', '.join(missing)} not found on PATH (install with: {fix})"
    return found["bwrap"], found["nsenter"], found["setpriv"]  # type: ignore[return-value]


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
            done = subprocess.run(argv, capture_output=True, timeout=START_TIMEOUT_SEC, check=False)
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
        network: Share the host's network instead of an empty network namespace.
        extra_binds: Host paths made visible at the same path inside (an X socket).
    """

    def __init__(
        self,
        root: Path,
        *,
        label: str,
        network: bool = False,
        extra_binds: tuple[str, ...] = (),
    ) -> None:
        self.root = root
        self.label = label
        self.network = network
        self.extra_binds = extra_binds
        self._proc: subprocess.Popen[bytes] | None = None
        self._pid1: int | None = None
        self._enter: list[str] = []
        self._setpriv: list[str] = []
        self.pid_namespace: int | None = None

    def bwrap_argv(self, bwrap: str, info_fd: int) -> list[str]:
        """The holder's command line."""
        argv = [bwrap]
        for directory in SYSTEM_DIRS:
            if os.path.lexists(directory):
                argv += ["--ro-bind", directory, directory]
        for masked in MASKED_FILES:
            if os.path.isfile(masked):
                argv += ["--ro-bind", "/dev/null", masked]
        argv += ["--proc", "/proc", "--dev", "/dev"]
        argv += ["--bind", str(self.root / HOME_DIR), SANDBOX_HOME]
        argv += ["--bind", str(self.root / WORK_DIR), SANDBOX_WORKDIR]
        argv += ["--bind", str(self.root / TMP_DIR), SANDBOX_TMP]
        for path in self.extra_binds:
            argv += ["--bind", path, path]
        argv += ["--chdir", SANDBOX_WORKDIR, "--setenv", "HOME", SANDBOX_HOME]
        argv += ["--unshare-all", *(["--share-net"] if self.network else [])]
        argv += ["--die-with-parent", "--new-session", "--remount-ro", "/"]
        argv += ["--info-fd", str(info_fd), "--"]
        # Report readiness once every mount is in place, then wait for stdin to close.
        argv += ["/bin/sh", "-c", f"printf '{_READY.decode().strip()}\\n'; exec cat >/dev/null"]
        return argv

    def start(self) -> None:
        """Start the holder and wait until its namespaces are ready.

        Raises:
            SandboxError: A tool is missing, or ``bwrap`` failed (its message is included).
        """
        found = tools()
        if isinstance(found, str):
            raise SandboxError(f"cannot confine the sandbox of '{self.label}': {found}")
        bwrap, nsenter, setpriv = found
        read_fd, write_fd = os.pipe()
        try:
            proc = subprocess.Popen(
                self.bwrap_argv(bwrap, write_fd),
                pass_fds=(write_fd,),
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                start_new_session=True,
            )
        except OSError as exc:
            os.close(read_fd)
            raise SandboxError(f"cannot start bwrap for '{self.label}': {exc}") from exc
        finally:
            os.close(write_fd)
        self._proc = proc
        try:
            info = self._wait_ready(proc, read_fd)
        except SandboxError:
            self.kill()
            raise
        finally:
            os.close(read_fd)
        self._pid1 = int(info["child-pid"])
        self.pid_namespace = info.get("pid-namespace")
        self._enter = [nsenter, "-t", str(self._pid1), *self._namespace_flags(self._pid1)]
        self._enter += ["--preserve-credentials", "-r"]
        self._setpriv = [setpriv, "--no-new-privs", "--bounding-set=-all", "--inh-caps=-all"]
        logger.debug("bwrap holder of '%s': pid %d, pid 1 is %d", self.label, proc.pid, self._pid1)

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

    @staticmethod
    def _namespace_flags(pid: int) -> list[str]:
        """``nsenter`` flags for the namespaces ``pid`` does not share with this process."""
        flags = []
        for name, flag in _NAMESPACES:
            try:
                theirs = os.readlink(f"/proc/{pid}/ns/{name}")
            except OSError:
                continue
            try:
                ours = os.readlink(f"/proc/self/ns/{name}")
            except OSError:
                ours = None
            if theirs != ours:
                flags.append(flag)
        return flags

    @property
    def running(self) -> bool:
        """Whether the holder still runs (its namespaces exist)."""
        return self._proc is not None and self._proc.poll() is None

    def command(self, argv: list[str], *, cwd: str) -> list[str]:
        """The host command line that runs ``argv`` inside the sandbox, in sandbox dir ``cwd``.

        Raises:
            SandboxError: The holder is not running (killed, or never started).
        """
        if not self.running:
            raise SandboxError(
                f"the confined sandbox of '{self.label}' is gone (its bwrap process ended); "
                "reset or recreate it"
            )
        return [*self._enter, f"-W{cwd}", *self._setpriv, "--", *argv]

    def kill(self) -> None:
        """Kill everything in the sandbox: pid 1 of its pid namespace, then the holder's group.

        Harmless when already dead or never started.
        """
        proc, self._proc = self._proc, None
        if proc is None:
            return
        if proc.poll() is None and self._pid1 is not None:
            # pid 1 is bwrap's child; while bwrap has not been reaped, its pid is not recycled.
            _signal(lambda: os.kill(self._pid1 or 0, signal.SIGKILL))
        _signal(lambda: os.killpg(proc.pid, signal.SIGKILL))
        for stream in (proc.stdin, proc.stdout, proc.stderr):
            if stream is not None:
                stream.close()
        proc.wait()
        logger.debug("killed the bwrap holder of '%s'", self.label)


def _signal(send: Callable[[], None]) -> None:
    try:
        send()
    except ProcessLookupError:
        pass
    except PermissionError as exc:
        logger.warning("cannot kill a bwrap sandbox process: %s", exc)
