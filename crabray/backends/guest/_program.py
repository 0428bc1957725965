"""The guest: one long-lived Python process inside a sandbox, serving commands and calls.

This file is sent, as text, to the sandbox's own ``python3`` over the
backend's channel (a confined process's stdin, a docker exec stream, an SSH
channel) and executed there by :data:`BOOTSTRAP`; nothing is written to the
sandbox and nothing listens on a network. It must therefore run on its own:
standard library only, and syntax every Python 3.8+ accepts (the guest's
interpreter may be older or newer than the host's).

The protocol is frames over the process's stdin and stdout: a 4-byte
big-endian length, then that many bytes of UTF-8 JSON. Each request is
answered by exactly one response, in order:

- ``{"op": "ping"}`` -> ``{"ok": true, "python": "3.13.1", "pid": 42, "sealed": true}``
- ``{"op": "exec", "argv": [...], "cwd": ..., "env": {...}, "clear_env": bool,
  "timeout_sec": ..., "marker": [NAME, VALUE], "max_bytes": N}`` ->
  ``{"ok": true, "exit_code", "stdout", "stderr", "timed_out", "cut"}``
- ``{"op": "call", "units": [[filename, first_line, text], ...], "function": name,
  "arguments": "<JSON>", "cwd": ..., "max_value": N}`` -> ``{"ok": true, "value": "<JSON>"}``
  (a value whose JSON is longer than ``max_value`` characters is refused: an error)
- ``{"op": "read", "path": ABSOLUTE, "max_bytes": N}`` -> ``{"ok": true, "data": BASE64}``,
  or ``{"ok": true, "errno": NAME}`` when the guest did not read it (see :func:`_read`)
- ``{"op": "stat", "paths": [ABSOLUTE, ...]}`` -> ``{"ok": true, "stats": [[inode, mode,
  size, mtime_ns, ctime_ns] or null, ...]}`` (see :func:`_stat`)
- ``{"op": "reset", "keyctl": N}`` -> ``{"ok": true, "clean": true}`` or ``{"ok": true,
  "clean": false, "why": ...}`` (see :func:`_reset`; a confined local sandbox whose guest
  outlives its resets asks it)

- ``{"op": "begin"}`` -> ``{"ok": true, "harness": N}``: the processes running now are the
  harness's (see :func:`_begin`)
- ``{"op": "freeze"}`` -> ``{"ok": true, "frozen": N, "live": [...]}`` and ``{"op": "thaw"}``
  -> ``{"ok": true, "thawed": N}``: the agent's processes stopped while a grader runs, and
  continued (see :func:`_freeze`)

An ``exec`` or ``reset`` request with ``"same_limits": true`` is refused (``GuestTampered``)
when the guest's resource limits are not those it started with: another process of its
user may lower them (``prlimit``), and the commands it starts would inherit them.

A failure is ``{"ok": false, "error": {"type", "message", "traceback"}}``.

The guest seals itself (:func:`seal`) before it serves a request, so that a
process of the sandbox's user cannot open its pipes or read its memory
through ``/proc``; ``sealed`` in the hello says whether that worked.
The host module imports this file for :func:`encode` and :func:`read_frame`,
so both ends share one definition of the framing.
"""

from __future__ import annotations
import __future__

import base64
import contextlib
import errno
import hashlib
import importlib.machinery
import io
import json
import linecache
import os
import selectors
import signal
import stat
import struct
import subprocess
import sys
import time
import traceback

TYPE_CHECKING = False
if TYPE_CHECKING:  # type checkers only: the guest itself never imports typing (startup cost)
    import types
    from collections.abc import Callable, Iterable, Mapping, Sequence
    from typing import IO, Any

BOOTSTRAP = (
    "import sys;b=sys.stdin.buffer;n=int(b.readline());"
    "exec(compile(b.read(n),'crabray-guest','exec'))"
)
"""The ``python3 -c`` argument that starts a guest: read the program's length, then run it."""

GUEST_ARGV = ("python3", "-I", "-S", "-c", BOOTSTRAP)
"""How every backend starts a guest. ``-I`` (isolated): neither the working
directory nor the user's site directory is on ``sys.path`` and no ``PYTHON*``
variable is read, so nothing the agent wrote in its directories or its
environment is imported before the program runs; ``-S``: no ``site`` module,
so no ``.pth`` file, ``sitecustomize`` or ``usercustomize`` runs. The program
then puts the site-packages directories on the path itself (:func:`main`)."""

_HEADER = struct.Struct(">I")
_BYTES_TAG = "$crabray_bytes"
_DRAIN_SEC = 0.25  # reading on after a command ended: see collect_output
_POLL_SEC = 0.05  # how often to look whether it ended while its pipes stay open
_CHUNK = 65536
_SWEEP_PASSES = 50
_PR_GET_DUMPABLE = 3
_PR_SET_DUMPABLE = 4
_SEALED: list[bool] = []
"""Whether :func:`seal` made this process non-dumpable (set once, by :func:`main`)."""
_LIMITS: list[list[tuple[int, int]]] = []
"""The resource limits the guest started with (set once, by :func:`main`)."""


def encode(message: dict[str, Any]) -> bytes:
    """One frame: the length, then the JSON of ``message``."""
    body = json.dumps(message, separators=(",", ":")).encode("utf-8")
    return _HEADER.pack(len(body)) + body


class FrameTooLarge(ValueError):
    """A frame announced more bytes than its reader takes; nothing of its body was read."""


def read_frame(read: Callable[[int], bytes], max_size: int | None = None) -> dict[str, Any] | None:
    """The next message, reading with ``read(n)`` (which returns up to ``n`` bytes); None at EOF.

    A frame longer than ``max_size`` bytes raises :class:`FrameTooLarge` before its
    body is read (the stream is then out of step: its channel must be dropped).
    """
    head = _read_exact(read, _HEADER.size)
    if head is None:
        return None
    size = _HEADER.unpack(head)[0]
    if max_size is not None and size > max_size:
        raise FrameTooLarge(f"a frame of {size} bytes, more than the {max_size} expected")
    body = _read_exact(read, size)
    if body is None:
        return None
    message: dict[str, Any] = json.loads(body.decode("utf-8"))
    return message


def _read_exact(read: Callable[[int], bytes], size: int) -> bytes | None:
    parts: list[bytes] = []
    while size > 0:
        chunk = read(size)
        if not chunk:
            return None
        parts.append(chunk)
        size -= len(chunk)
    return b"".join(parts)


def to_json(value: object) -> str:
    """JSON text of a call's value; ``bytes`` travel as base64 under a tag."""

    def default(obj: object) -> object:
        if isinstance(obj, (bytes, bytearray)):
            return {_BYTES_TAG: base64.b64encode(bytes(obj)).decode("ascii")}
        if isinstance(obj, (set, frozenset, tuple)):
            return list(obj)
        raise TypeError(f"returned a {type(obj).__name__}, which cannot be sent back as JSON")

    return json.dumps(value, default=default)


def from_json(text: str) -> Any:
    """The value :func:`to_json` encoded, ``bytes`` restored."""

    def hook(obj: dict[str, Any]) -> object:
        if len(obj) == 1 and _BYTES_TAG in obj:
            return base64.b64decode(obj[_BYTES_TAG])
        return obj

    return json.loads(text, object_hook=hook)


class KeptOutput:
    """One stream of a command, kept up to ``limit`` bytes; the rest is read and dropped.

    The host's own exec paths use it too, so every backend cuts output the same way.
    """

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.parts: list[bytes] = []
        self.size = 0
        self.cut = False

    def add(self, data: bytes) -> None:
        room = self.limit - self.size
        if len(data) > room:
            self.cut = True
            data = data[: max(room, 0)]
        if data:
            self.parts.append(data)
            self.size += len(data)

    def data(self) -> bytes:
        return b"".join(self.parts)

    def text(self) -> str:
        return self.data().decode("utf-8", "replace")


def _sweep(name: str, value: str) -> None:
    """SIGKILL every process whose environment holds ``name=value``, until none is left."""
    wanted = (f"{name}={value}").encode()
    me = os.getpid()
    for _ in range(_SWEEP_PASSES):
        found = False
        for entry in os.listdir("/proc"):
            if not entry.isdigit() or int(entry) == me:
                continue
            try:
                with open(f"/proc/{entry}/environ", "rb") as handle:
                    records = handle.read().split(b"\0")
            except OSError:
                continue
            if wanted in records:
                found = True
                with contextlib.suppress(OSError):
                    os.kill(int(entry), signal.SIGKILL)
        if not found:
            return


def _run(request: dict[str, Any]) -> dict[str, Any]:
    argv = request["argv"]
    env = {} if request.get("clear_env") else dict(os.environ)
    env.update(request.get("env") or {})
    marker = request.get("marker")
    if marker:
        env[marker[0]] = marker[1]
    cwd = request.get("cwd")
    if cwd is not None and not os.path.isdir(cwd):
        return {"ok": True, "exit_code": 126, "stdout": "", "timed_out": False, "cut": False,
                "stderr": f"cannot run in {cwd}: no such directory\n"}  # fmt: skip
    try:
        proc = subprocess.Popen(
            argv, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, start_new_session=True,
        )  # fmt: skip
    except OSError as exc:
        code = 126 if isinstance(exc, PermissionError) else 127
        return {"ok": True, "exit_code": code, "stdout": "", "timed_out": False, "cut": False,
                "stderr": f"cannot run {argv[0]!r}: {exc.strerror or exc}\n"}  # fmt: skip
    timeout = request.get("timeout_sec")
    deadline = None if timeout is None else time.monotonic() + timeout
    limit = int(request.get("max_bytes") or 10 * 1024 * 1024)
    out, err = KeptOutput(limit), KeptOutput(limit)
    if proc.stdout is None or proc.stderr is None:  # both are PIPE: never, but said for types
        raise RuntimeError("internal error: the command's output pipes are missing")
    streams = {proc.stdout: out, proc.stderr: err}
    timed_out = collect_output(proc, streams, deadline, lambda: _kill(proc, marker))
    proc.wait()
    return {
        "ok": True,
        "exit_code": -1 if timed_out else proc.returncode,
        "stdout": out.text(),
        "stderr": err.text(),
        "timed_out": timed_out,
        "cut": [out.cut, err.cut],
    }


def collect_output(
    proc: subprocess.Popen[bytes],
    streams: Mapping[IO[bytes], KeptOutput],
    deadline: float | None,
    kill: Callable[[], None],
) -> bool:
    """Read a command's pipes until it ended (plus a short drain) or the deadline killed it.

    The one read loop of every exec path: the guest's and the local backend's host one,
    so each reads, drains and cuts output the same way. A background child that inherited
    a pipe (``server &``) keeps it open forever, so reading stops ``_DRAIN_SEC`` after the
    command itself ended instead of at end of file.

    Args:
        proc: The command (a ``subprocess.Popen``).
        streams: Each of its output pipes, with the ``KeptOutput`` that keeps what it gives.
        deadline: A ``time.monotonic()`` time, or None for no deadline.
        kill: Called once at the deadline: kills the command and what it started.

    Returns:
        Whether the deadline killed the command. Every pipe is closed.
    """
    timed_out = False
    stop_at = None
    with selectors.DefaultSelector() as selector:
        for stream, sink in streams.items():
            selector.register(stream, selectors.EVENT_READ, sink)
        while selector.get_map():
            now = time.monotonic()
            if stop_at is None and proc.poll() is not None:
                stop_at = now + _DRAIN_SEC
            if stop_at is None and deadline is not None and now >= deadline:
                timed_out = True
                kill()
                stop_at = now + _DRAIN_SEC
            if stop_at is not None and now >= stop_at:
                break
            wake = [t for t in (now + _POLL_SEC, deadline, stop_at) if t is not None]
            for key, _ in selector.select(max(0.0, min(wake) - now)):
                data = os.read(key.fd, _CHUNK)
                if data:
                    key.data.add(data)
                else:
                    selector.unregister(key.fileobj)
    for stream in streams:
        stream.close()
    return timed_out


def _kill(proc: subprocess.Popen[bytes], marker: Sequence[str] | None) -> None:
    with contextlib.suppress(OSError):
        os.killpg(proc.pid, signal.SIGKILL)
    if marker:
        _sweep(marker[0], marker[1])


_DEFINED: dict[str, dict[str, Any]] = {}
"""Namespaces of the functions already compiled, by the hash of their source units."""


def _namespace(units: Sequence[Sequence[Any]]) -> dict[str, Any]:
    key = hashlib.sha256(json.dumps(units).encode("utf-8")).hexdigest()
    if key in _DEFINED:
        return _DEFINED[key]
    namespace = {"__name__": "__crabray_call__", "__builtins__": __builtins__}
    flags = __future__.annotations.compiler_flag
    for filename, first_line, text in units:
        padded = "\n" * (first_line - 1) + text
        _remember(filename, first_line, text.splitlines(True))
        exec(compile(padded, filename, "exec", flags=flags, dont_inherit=True), namespace)
    _DEFINED[key] = namespace
    return namespace


def _remember(filename: str, first_line: int, lines: list[str]) -> None:
    """Put a unit's lines where they are in their file, so tracebacks can quote them."""
    entry = linecache.cache.get(filename)
    known = list(entry[2]) if entry and len(entry) == 4 else []
    end = first_line - 1 + len(lines)
    known += ["\n"] * (end - len(known))
    known[first_line - 1 : end] = lines
    linecache.cache[filename] = (sum(map(len, known)), None, known, filename)


def _call(request: dict[str, Any]) -> dict[str, Any]:
    cwd = request.get("cwd")
    if cwd:
        os.chdir(cwd)
    captured = io.StringIO()
    saved = sys.stdout, sys.stderr
    sys.stdout = sys.stderr = captured
    try:
        function = _namespace(request["units"])[request["function"]]
        value = function(**from_json(request["arguments"]))
    finally:
        sys.stdout, sys.stderr = saved
    text = to_json(value)
    limit = request.get("max_value")
    if limit is not None and len(text) > limit:
        raise ValueError(
            f"it returned {len(text)} characters of JSON, more than the {limit} a plain-Python "
            "action may return; return less (a large result belongs in a file of the sandbox)"
        )
    return {"ok": True, "value": text, "output": captured.getvalue()[-10000:]}


def _read(request: dict[str, Any]) -> dict[str, Any]:
    """A regular file's bytes, as the guest's user sees them, or why the guest did not read it.

    The errno's name is ``ENOENT``, ``EACCES``, ``ELOOP`` (the last component is a
    symlink: never followed here, so the host resolves links its own way) and so on
    from ``open``, or ``EISDIR``, ``ENOTREG`` (a FIFO, a device: opened without
    blocking, never read), ``EFBIG`` (over ``max_bytes``) and ``ECHANGED`` (its size
    moved while it was read). The host decides what each means.
    """
    flags = os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_NOCTTY
    try:
        fd = os.open(request["path"], flags)
    except OSError as exc:
        return {"ok": True, "errno": errno.errorcode.get(exc.errno or 0, "EIO")}
    try:
        info = os.fstat(fd)
        if stat.S_ISDIR(info.st_mode):
            return {"ok": True, "errno": "EISDIR"}
        if not stat.S_ISREG(info.st_mode):
            return {"ok": True, "errno": "ENOTREG"}
        if info.st_size > int(request["max_bytes"]):
            return {"ok": True, "errno": "EFBIG"}
        parts, size = [], 0
        while size <= info.st_size:  # one byte past the size shows a file still growing
            chunk = os.read(fd, info.st_size + 1 - size)
            if not chunk:
                break
            parts.append(chunk)
            size += len(chunk)
    finally:
        os.close(fd)
    if size != info.st_size:
        return {"ok": True, "errno": "ECHANGED"}
    return {"ok": True, "data": base64.b64encode(b"".join(parts)).decode("ascii")}


def _stat(request: dict[str, Any]) -> dict[str, Any]:
    """Each path's ``[inode, mode, size, mtime_ns, ctime_ns]`` (``lstat``: a symlink is its
    own), or None where there is nothing. The change time moves with every write and
    cannot be set back by the file's owner, unlike the modification time."""
    stats: list[list[int] | None] = []
    for path in request["paths"]:
        try:
            info = os.lstat(path)
        except OSError:
            stats.append(None)
            continue
        stats.append([info.st_ino, info.st_mode, info.st_size, info.st_mtime_ns, info.st_ctime_ns])
    return {"ok": True, "stats": stats}


def _limits() -> list[tuple[int, int]]:
    import resource

    names = sorted(n for n in dir(resource) if n.startswith("RLIMIT_"))
    return [resource.getrlimit(getattr(resource, n)) for n in names]


class GuestTampered(RuntimeError):
    """Something outside the guest changed it (its resource limits): it must not serve."""


def _check_limits(request: dict[str, Any]) -> None:
    if request.get("same_limits") and _LIMITS and _limits() != _LIMITS[0]:
        raise GuestTampered("the guest's resource limits changed since it started")


_RESET_SEC = 5.0


def _reset(request: dict[str, Any]) -> dict[str, Any]:
    """Make the sandbox around the guest as clean as a new one, the guest itself kept.

    The same work as the local backend's reset program, done by the guest: the
    kernel sends ``kill(-1, SIGKILL)`` to every process the guest may signal
    except itself and pid 1 (all of the sandbox's: one user), repeated until
    ``/proc`` lists only those two; then every System V IPC object goes, the
    user's keyrings are emptied, and any socket left in the network namespace
    (a connection in ``TIME_WAIT`` outlives its process) makes it not clean.
    """
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    me = os.getpid()
    deadline = time.monotonic() + _RESET_SEC
    while True:
        with contextlib.suppress(ProcessLookupError):
            os.kill(-1, signal.SIGKILL)
        left = [p for p in os.listdir("/proc") if p.isdigit() and int(p) not in (1, me)]
        if not left:
            break
        if time.monotonic() > deadline:
            return {"ok": True, "clean": False, "why": f"processes {left} outlived SIGKILL"}
        time.sleep(0.001)
    removers = {"shm": libc.shmctl, "msg": libc.msgctl, "sem": libc.semctl}
    for kind, remove in removers.items():
        with open(f"/proc/sysvipc/{kind}") as objects:
            lines = objects.read().splitlines()[1:]
        for line in lines:
            ident = int(line.split()[1])
            done = remove(ident, 0, 0) if kind == "sem" else remove(ident, 0, None)
            if done != 0:
                why = os.strerror(ctypes.get_errno())
                return {"ok": True, "clean": False, "why": f"System V {kind} {ident}: {why}"}
    for keyring in (-4, -5):  # KEYCTL_CLEAR (7) of the user and user session keyrings
        if libc.syscall(int(request["keyctl"]), 7, keyring) != 0:
            why = os.strerror(ctypes.get_errno())
            return {"ok": True, "clean": False, "why": f"keyring {keyring}: {why}"}
    return _sockets_left()


def _sockets_left() -> dict[str, Any]:
    for table in ("sockstat", "sockstat6"):
        with open(f"/proc/net/{table}") as counts:
            for line in counts:
                if line.startswith(("sockets", "FRAG")):
                    continue
                words = line.split()
                for at in range(1, len(words) - 1, 2):
                    if words[at] in ("inuse", "tw") and words[at + 1] != "0":
                        return {"ok": True, "clean": False, "why": f"sockets left: {line.strip()}"}
    for table in ("unix", "packet"):
        with open(f"/proc/net/{table}") as sockets:
            if len(sockets.read().splitlines()) > 1:
                return {"ok": True, "clean": False, "why": f"sockets left (/proc/net/{table})"}
    return {"ok": True, "clean": True}


_HARNESS: list[tuple[int, str]] = []
"""(pid, start time) of the processes running when the agent began: the harness's own (a
screen, services the task's setup started), never frozen."""
_FROZEN: list[tuple[int, str]] = []
"""(pid, start time) of the processes the last ``freeze`` stopped; ``thaw`` continues them."""
_FREEZE_WAIT_SEC = 2.0


def _processes() -> dict[int, tuple[str, str, str, int]]:
    """Every process this guest sees: pid -> (state, start time, name, parent), from ``/proc``."""
    found: dict[int, tuple[str, str, str, int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as handle:
                stat_line = handle.read().decode("utf-8", "replace")
        except OSError:
            continue  # ended meanwhile
        name, _, rest = stat_line.partition(" (")[2].rpartition(")")
        fields = rest.split()
        if len(fields) > 20:
            found[int(entry)] = (fields[0], fields[19], name, int(fields[1]))
    return found


def _depths(procs: dict[int, tuple[str, str, str, int]]) -> dict[int, int]:
    """How far each process is from the top of the tree this guest sees (parents first)."""
    depths: dict[int, int] = {}
    for pid in procs:
        chain = []
        at = pid
        while at in procs and at not in depths and at not in chain:
            chain.append(at)
            at = procs[at][3]
        base = depths.get(at, -1)
        for offset, member in enumerate(reversed(chain)):
            depths[member] = base + 1 + offset
    return depths


def _begin(request: dict[str, Any]) -> dict[str, Any]:
    """Remember the processes running now, before the agent's first action: the harness's."""
    me = os.getpid()
    _HARNESS[:] = [(p, v[1]) for p, v in _processes().items() if p not in (1, me)]
    del _FROZEN[:]
    return {"ok": True, "harness": len(_HARNESS)}


def _stopped(pids: list[int], deadline: float) -> None:
    """Wait until each of ``pids`` is stopped or gone, or the deadline passes."""
    waiting = list(pids)
    while waiting and time.monotonic() < deadline:
        now = _processes()
        waiting = [p for p in waiting if p in now and now[p][0] not in "tTZXx"]
        if waiting:
            time.sleep(0.001)


def _freeze(request: dict[str, Any]) -> dict[str, Any]:
    """Stop every process of the agent's before a grader runs, parents before children.

    A job-control shell that saw its child stop would take the terminal back
    from it (vim in an xterm would become a stopped background job), so each
    level of the process tree is stopped, and seen stopped, before the next.
    Then ``kill(-1, SIGSTOP)`` reaches, in one step of the kernel, every
    process this guest may signal but itself and pid 1, those forked meanwhile
    included. The harness's own processes (:func:`_begin`) are continued at
    once, and what the agent had stopped itself stays stopped after ``thaw``.
    What still runs after ``_FREEZE_WAIT_SEC`` (another user's process this
    guest may not signal, one stuck in the kernel) is named in ``live``: a
    grade taken beside it is not verified.
    """
    me = os.getpid()
    harness = set(_HARNESS)
    deadline = time.monotonic() + _FREEZE_WAIT_SEC
    before = _processes()
    targets = {p: v for p, v in before.items() if p not in (1, me) and (p, v[1]) not in harness}
    depths = _depths(before)
    for level in sorted({depths[p] for p in targets}):
        pids = [p for p in targets if depths[p] == level]
        for pid in pids:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGSTOP)
        _stopped(pids, deadline)
    with contextlib.suppress(ProcessLookupError):
        os.kill(-1, signal.SIGSTOP)
    for pid, start in harness:
        if before.get(pid, ("", "", "", 0))[1] == start:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGCONT)
    while True:
        now = _processes()
        agents = {p: v for p, v in now.items() if p not in (1, me) and (p, v[1]) not in harness}
        live = {p: v for p, v in agents.items() if v[0] not in "tTZXx"}
        if not live or time.monotonic() > deadline:
            break
        time.sleep(0.005)
    stopped_before = {(p, v[1]) for p, v in before.items() if v[0] in "tT"}
    depths = _depths(now)
    frozen = [p for p, v in agents.items() if (p, v[1]) not in stopped_before]
    frozen.sort(key=lambda p: depths.get(p, 0), reverse=True)  # children first, for thaw
    _FROZEN[:] = [(p, agents[p][1]) for p in frozen]
    return {
        "ok": True,
        "frozen": len(_FROZEN),
        "live": sorted(f"{v[2][:32]} (pid {p})" for p, v in live.items())[:20],
    }


def _thaw(request: dict[str, Any]) -> dict[str, Any]:
    """Continue what the last :func:`_freeze` stopped, children before their parents (so no
    parent sees a child of its still stopped)."""
    now = _processes()
    for pid, start in _FROZEN:
        if now.get(pid, ("", "", "", 0))[1] == start:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGCONT)
    thawed = len(_FROZEN)
    del _FROZEN[:]
    return {"ok": True, "thawed": thawed}


def seal() -> bool:
    """Make this process non-dumpable; whether the kernel now says it is.

    A non-dumpable process's ``/proc/<pid>/fd``, ``environ`` and ``mem`` belong
    to root and ptrace needs ``CAP_SYS_PTRACE``, so another process of the same
    user (an agent's command; root in a container without that capability)
    can no longer write requests to the guest's stdin, forge answers on its
    stdout or read its environment. The commands it starts are exec'd and so
    dumpable again, with none of its descriptors. A Python without ``ctypes``
    leaves the guest unsealed, which the host sees in the hello.
    """
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0)
        dumpable: int = libc.prctl(_PR_GET_DUMPABLE, 0, 0, 0, 0)
        return dumpable == 0
    except (ImportError, OSError, AttributeError):
        return False


def _error(exc: BaseException) -> dict[str, Any]:
    tb = exc.__traceback__
    while tb is not None and tb.tb_frame.f_code.co_filename == "crabray-guest":
        tb = tb.tb_next  # the guest's own frames say nothing about the action
    return {
        "ok": False,
        "error": {
            "type": type(exc).__name__,
            "message": str(exc),
            "traceback": "".join(traceback.format_exception(type(exc), exc, tb)),
        },
    }


def _answer(request: dict[str, Any]) -> dict[str, Any]:
    op = request.get("op")
    try:
        if op == "ping":
            return {
                "ok": True,
                "python": ".".join(map(str, sys.version_info[:3])),
                "pid": os.getpid(),
                "sealed": bool(_SEALED and _SEALED[0]),
            }
        if op == "exec":
            _check_limits(request)
            return _run(request)
        if op == "call":
            return _call(request)
        if op == "read":
            return _read(request)
        if op == "stat":
            return _stat(request)
        if op == "reset":
            _check_limits(request)
            return _reset(request)
        if op == "begin":
            return _begin(request)
        if op == "freeze":
            return _freeze(request)
        if op == "thaw":
            return _thaw(request)
        raise ValueError(f"unknown request {op!r}")
    except Exception as exc:
        return _error(exc)


def _take_stdin() -> Callable[[int], bytes]:
    """Move the request pipe off fd 0 (which becomes ``/dev/null``); its ``read(n)``.

    What a call starts then inherits ``/dev/null`` as stdin, never the pipe
    that carries the host's requests. The bytes the bootstrap's buffered
    reader already holds (the first request may be among them) come first.
    """
    os.set_blocking(0, False)
    try:
        pending = bytearray(sys.stdin.buffer.read() or b"")
    finally:
        os.set_blocking(0, True)
    fd = os.dup(0)  # not inheritable
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)

    def read(size: int) -> bytes:
        if pending:
            chunk = bytes(pending[:size])
            del pending[:size]
            return chunk
        return os.read(fd, size)

    return read


class _UnchangedSource(importlib.machinery.SourceFileLoader):
    """Loads a standard-library module from its source, refused if it changed since the start.

    The cached bytecode is never used: a ``.pyc`` planted beside an unchanged source
    would otherwise run instead of it. The file is checked and read through one
    descriptor, so it cannot be swapped in between.
    """

    since_ns = 0

    def get_code(self, fullname: str) -> types.CodeType:
        path = self.get_filename(fullname)
        with open(path, "rb") as handle:
            _check_unchanged(os.fstat(handle.fileno()), path, fullname, self.since_ns)
            source = handle.read()
        return self.source_to_code(source, path)


class _GuardedPaths:
    """A ``sys.meta_path`` finder: the path finder, minus standard-library files changed later.

    Root in a container can rewrite its standard library; a module the guest
    imports after it started (an evaluator's ``import pathlib``) must then not
    run the agent's code. A file's ``ctime`` cannot be set back without
    changing the clock, so a file changed (or added, replaced, renamed) since
    the guest started has a later one: importing it is an ``ImportError``.
    Site-packages are not guarded: a third-party package is the sandbox's own
    state, like any file the agent may change.
    """

    def __init__(self, dirs: Iterable[str], since_ns: int) -> None:
        named = [d for d in dirs if d]
        self.dirs = tuple(
            {os.path.join(os.path.abspath(d), "") for d in named}
            | {os.path.join(os.path.realpath(d), "") for d in named}
        )
        self.since_ns = since_ns

    def find_spec(
        self,
        fullname: str,
        path: Sequence[str] | None = None,
        target: types.ModuleType | None = None,
    ) -> importlib.machinery.ModuleSpec | None:
        spec = importlib.machinery.PathFinder.find_spec(fullname, path, target)
        origin = getattr(spec, "origin", None)
        if spec is None or not origin or not spec.has_location:
            return spec
        if not (
            os.path.abspath(origin).startswith(self.dirs)
            or os.path.realpath(origin).startswith(self.dirs)
        ):
            return spec
        self._check_names(origin, fullname)
        if isinstance(spec.loader, importlib.machinery.SourceFileLoader):
            loader = _UnchangedSource(fullname, origin)
            loader.since_ns = self.since_ns
            spec.loader = loader
        else:
            _check_unchanged(os.stat(origin), origin, fullname, self.since_ns)
        return spec

    def _check_names(self, origin: str, fullname: str) -> None:
        """Refuse a module whose path, as named, was made or replaced since the start.

        The file opened is checked too, but a name replaced by a symlink to a
        file made elsewhere would pass that check: the name itself, and each
        symlinked directory between the guarded folder and the module, must be
        as old as the guest.
        """
        path = os.path.abspath(origin)
        _check_unchanged(os.lstat(path), path, fullname, self.since_ns)
        path = os.path.dirname(path)
        while path.startswith(self.dirs):  # a directory's own writes (__pycache__) are fine
            info = os.lstat(path)
            if stat.S_ISLNK(info.st_mode):
                _check_unchanged(info, path, fullname, self.since_ns)
            path = os.path.dirname(path)

    def invalidate_caches(self) -> None:
        importlib.machinery.PathFinder.invalidate_caches()


def _check_unchanged(info: os.stat_result, path: str, fullname: str, since_ns: int) -> None:
    if info.st_ctime_ns > since_ns:
        raise ImportError(
            f"module {fullname!r} ({path}) changed inside the sandbox after its guest started; "
            "the guest does not run standard-library code the agent may have written",
            name=fullname,
            path=path,
        )


def _guard_imports(since_ns: int) -> None:
    """Route path imports through :class:`_GuardedPaths` for the directories now on the path."""
    guarded = _GuardedPaths(list(sys.path), since_ns)
    sys.meta_path[:] = [
        guarded if f is importlib.machinery.PathFinder else f for f in sys.meta_path
    ]
    sys.path_importer_cache.clear()


def _add_site_packages() -> None:
    """Put the interpreter's site-packages on the path without running their ``.pth`` files.

    Under ``-S`` importing ``site`` changes nothing by itself; it only says where
    the directories are, so installed packages stay importable by calls.
    """
    import site

    for directory in site.getsitepackages():
        if os.path.isdir(directory) and directory not in sys.path:
            sys.path.append(directory)


def main() -> None:
    """Serve requests until stdin closes."""
    started = time.time_ns()
    _SEALED.append(seal())
    _LIMITS.append(_limits())
    if "" in sys.path:  # a call's imports never come from the directory the agent writes
        sys.path.remove("")
    sys.dont_write_bytecode = True
    _guard_imports(started)
    _add_site_packages()
    read = _take_stdin()
    channel = os.fdopen(os.dup(1), "wb", buffering=0)
    null = os.open(os.devnull, os.O_RDWR)
    os.dup2(null, 1)  # a call's print() or a child's output must never corrupt the frames
    os.dup2(null, 2)
    while True:
        request = read_frame(read)
        if request is None:
            return
        channel.write(encode(_answer(request)))


if __name__ == "__main__":
    main()
