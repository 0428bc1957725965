"""The service registry: how to reset a task's services and tell when they are up again.

Task folders name the services they need in ``dependencies.yml`` (``gitlab``,
``rocketchat``, ...) but not how to reach them. crabray's registry file,
``services.yml`` at the suite root (or ``--services FILE``), says it: a reset
command (run on the worker host, in the registry's folder) or a reset URL
(POSTed), a health URL polled with GET until it answers 2xx, and a timeout.
Before a task starts, only the services it names are reset, so tasks that
share no service never wait for each other's. A task holds a host-wide lock
on each of its services from before the reset until its episode ends, so two
episodes running at once never reset a service under each other's feet.

A reset command runs in a session of its own; what it leaves running there
(the service it started) is recorded, and stopped when the run ends
(``stop_services``, however the run ends), with the service's ``stop``
command first when it has one.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import logging
import os
import signal
import subprocess
import tempfile
import time
from pathlib import Path
from typing import IO, Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from crabray.core.errors import ActionError, ConfigError

logger = logging.getLogger(__name__)

REGISTRY_FILE = "services.yml"
"""The registry's file name at a suite's root."""

LOCK_TIMEOUT_SEC = 3_600.0
"""How long a task waits for another episode on this host to release a service it uses."""

_POLL_INTERVAL_SEC = 0.5
_REQUEST_TIMEOUT_SEC = 5.0
_TAIL_CHARS = 1_500


class Service(BaseModel):
    """One entry of ``services.yml``: how to reset the service and check its health."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    reset: str | None = Field(
        default=None,
        min_length=1,
        description="Shell command that resets the service, run on the worker host in the "
        "registry file's folder; must exit 0.",
    )
    reset_url: str | None = Field(
        default=None, description="URL POSTed to reset the service (instead of 'reset')."
    )
    health_url: str | None = Field(
        default=None, description="URL polled with GET until it answers 2xx."
    )
    stop: str | None = Field(
        default=None,
        min_length=1,
        description="Shell command that stops the service when the run ends, run on the "
        "worker host in the registry file's folder (what the reset left running is stopped "
        "after it in any case).",
    )
    timeout_sec: float = Field(
        default=30.0, gt=0, description="Limit of the reset, and of the wait for health."
    )

    @field_validator("reset_url", "health_url")
    @classmethod
    def _http_url(cls, value: str | None) -> str | None:
        if value is not None and not value.startswith(("http://", "https://")):
            raise ValueError(f"must be an http:// or https:// URL, got {value!r}")
        return value

    @model_validator(mode="after")
    def _something_to_do(self) -> Service:
        if self.reset is not None and self.reset_url is not None:
            raise ValueError("give 'reset' (a command) or 'reset_url', not both")
        if self.reset is None and self.reset_url is None and self.health_url is None:
            raise ValueError("give at least one of 'reset', 'reset_url' or 'health_url'")
        return self


class ServicesFile(BaseModel):
    """The content of a registry file."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    services: dict[str, Service] = Field(default_factory=dict)


class ServiceRegistry(BaseModel):
    """A loaded registry: its services and the file they came from."""

    model_config = ConfigDict(frozen=True)

    file: str = Field(description="The registry file; reset commands run in its folder.")
    services: dict[str, Service] = Field(default_factory=dict)

    @property
    def folder(self) -> Path:
        return Path(self.file).parent

    def known(self) -> str:
        """The service names, for messages."""
        return ", ".join(sorted(self.services)) or "none"


def read_yaml(file: Path) -> Any:
    """The parsed content of a YAML file (``None`` when it is empty).

    Raises:
        ConfigError: The file cannot be read or is not valid YAML (with the line).
    """
    try:
        text = file.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read: {exc}", file=str(file)) from exc
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark else ""
        problem = getattr(exc, "problem", None) or str(exc)
        raise ConfigError(f"is not valid YAML: {problem}{where}", file=str(file)) from exc


def load_registry(file: Path) -> ServiceRegistry:
    """Read and validate a registry file.

    Raises:
        ConfigError: The file is missing or not YAML.
        SuiteErrors: Entries do not validate; one problem per bad field.
    """
    from crabray.formats.suite import SuiteErrors

    if not file.is_file():
        raise ConfigError("no such service registry file", file=str(file))
    raw = read_yaml(file)
    try:
        parsed = ServicesFile.model_validate({} if raw is None else raw)
    except ValidationError as exc:
        problems = [
            ConfigError(
                e["msg"].removeprefix("Value error, "),
                file=str(file),
                field=".".join(str(p) for p in e["loc"]) or "services",
            )
            for e in exc.errors(include_input=False)
        ]
        raise SuiteErrors(str(file), problems) from None
    return ServiceRegistry(file=str(file.resolve()), services=parsed.services)


def prepare_service(registry: ServiceRegistry, name: str) -> None:
    """Reset the service ``name`` and wait until it is healthy.

    Raises:
        ActionError: The registry has no such service, the reset failed, or the
            service did not become healthy in time; the message names the service.
    """
    service = registry.services.get(name)
    if service is None:
        raise ActionError(
            f"service '{name}' is not in the registry {registry.file} (known: {registry.known()})"
        )
    started = time.monotonic()
    if service.reset is not None:
        _run_reset(registry, name, service.reset, service.timeout_sec)
    elif service.reset_url is not None:
        _post_reset(name, service.reset_url, service.timeout_sec)
    if service.health_url is not None:
        _wait_healthy(name, service.health_url, service.timeout_sec)
    logger.info("service '%s' reset and healthy in %.1f s", name, time.monotonic() - started)


_held: dict[str, IO[str]] = {}
"""Service locks this process holds, by lock file."""


def lock_service(
    registry: ServiceRegistry, name: str, timeout_sec: float = LOCK_TIMEOUT_SEC
) -> None:
    """Take the host-wide lock of service ``name`` (waiting for the episode holding it).

    Held until ``unlock_service``, or until this process exits.

    Raises:
        ActionError: Another holder kept it for ``timeout_sec``; names the service.
    """
    path = _lock_path(registry, name)
    if str(path) in _held:
        return
    handle = open(path, "a")  # noqa: SIM115 (held open until unlock_service)
    deadline = time.monotonic() + timeout_sec
    while True:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            break
        except BlockingIOError:
            if time.monotonic() > deadline:
                handle.close()
                raise ActionError(
                    f"service '{name}' stayed in use by another episode on this host for "
                    f"{timeout_sec:g} s (lock {path})"
                ) from None
            time.sleep(_POLL_INTERVAL_SEC)
    _held[str(path)] = handle


def unlock_service(registry: ServiceRegistry, name: str) -> None:
    """Release the lock ``lock_service`` took; harmless when it is not held."""
    handle = _held.pop(str(_lock_path(registry, name)), None)
    if handle is not None:
        fcntl.flock(handle, fcntl.LOCK_UN)
        handle.close()


def _lock_path(registry: ServiceRegistry, name: str) -> Path:
    digest = hashlib.sha1(f"{registry.file}\0{name}".encode()).hexdigest()[:16]
    return Path(tempfile.gettempdir()) / f"crabray-service-{digest}.lock"


def _run_reset(registry: ServiceRegistry, name: str, command: str, timeout_sec: float) -> None:
    """Run the reset command in a session of its own, and record that session for the stop."""
    folder = registry.folder
    try:
        proc = subprocess.Popen(
            command,
            shell=True,
            cwd=folder,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )
    except OSError as exc:
        raise ActionError(
            f"service '{name}': cannot run reset command `{command}` in {folder}: {exc}"
        ) from exc
    _remember_session(registry, name, proc.pid)
    try:
        output, _ = proc.communicate(timeout=timeout_sec)
    except subprocess.TimeoutExpired as exc:
        _kill_session(proc.pid, _session_start(proc.pid), grace_sec=0)
        output = _text(exc.stdout)
        proc.communicate()
        raise ActionError(
            f"service '{name}': reset command `{command}` (in {folder}) did not finish within "
            f"{timeout_sec:g} s{output_tail(output)}"
        ) from exc
    if proc.returncode != 0:
        raise ActionError(
            f"service '{name}': reset command `{command}` (in {folder}) exited "
            f"{proc.returncode}{output_tail(output)}"
        )


STOP_GRACE_SEC = 5.0
"""How long a service's processes get after SIGTERM before SIGKILL when the run ends."""
_KILL_WAIT_SEC = 5.0


def stop_services(registry: ServiceRegistry) -> list[str]:
    """Stop the services this host reset for runs of the registry: the ``stop`` command of
    each, then whatever its resets left running. A service another episode holds now (a
    run still using it) is left to that run. Returns the services stopped.

    Raises:
        ActionError: A ``stop`` command failed; the rest are stopped first.
    """
    stopped, failures = [], []
    for name, service in sorted(registry.services.items()):
        record = _sessions_path(registry, name)
        if not record.exists():
            continue
        with open(_lock_path(registry, name), "a") as lock:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                logger.info("service '%s' is in use by another run; left running", name)
                continue
            if service.stop is not None:
                failures += _run_stop(name, service.stop, service.timeout_sec, registry.folder)
            for line in record.read_text().split():
                sid, started = (int(part) for part in line.split(":"))
                _kill_session(sid, started, STOP_GRACE_SEC)
            record.unlink(missing_ok=True)
            stopped.append(name)
    if failures:
        raise ActionError("; ".join(failures))
    return stopped


def _run_stop(name: str, command: str, timeout_sec: float, folder: Path) -> list[str]:
    """Run a service's ``stop`` command; the failure, if any, as a message."""
    try:
        done = subprocess.run(
            command, shell=True, cwd=folder, capture_output=True, text=True, timeout=timeout_sec
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return [f"service '{name}': stop command `{command}` (in {folder}) failed: {exc}"]
    if done.returncode != 0:
        return [
            f"service '{name}': stop command `{command}` (in {folder}) exited "
            f"{done.returncode}{output_tail(done.stdout + done.stderr)}"
        ]
    return []


def _sessions_path(registry: ServiceRegistry, name: str) -> Path:
    return _lock_path(registry, name).with_suffix(".sessions")


def _remember_session(registry: ServiceRegistry, name: str, sid: int) -> None:
    """Record session ``sid`` (a reset command's, just started) as the service's."""
    with open(_sessions_path(registry, name), "a") as record:
        record.write(f"{sid}:{_session_start(sid)}\n")


def _proc_stat(pid: int) -> list[str] | None:
    """The fields of ``/proc/PID/stat`` after the command name (state first), or None."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None


def _session_start(pid: int) -> int:
    """When process ``pid`` started, in clock ticks since boot (0 if it is gone already)."""
    fields = _proc_stat(pid)
    return int(fields[19]) if fields else 0


def _session_members(sid: int, since: int) -> list[int]:
    """The live processes of session ``sid`` started at or after ``since`` (not a recycled
    id's); zombies are dead already, only waiting for their parent."""
    members = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            fields = _proc_stat(int(entry.name))
            if fields and fields[0] != "Z" and int(fields[3]) == sid and int(fields[19]) >= since:
                members.append(int(entry.name))
    return members


def _kill_session(sid: int, since: int, grace_sec: float) -> None:
    """SIGTERM every process of the session, then SIGKILL what is left after ``grace_sec``."""
    deadline = time.monotonic() + grace_sec
    sent = signal.SIGTERM if grace_sec > 0 else signal.SIGKILL
    give_up = deadline + _KILL_WAIT_SEC
    while members := _session_members(sid, since):
        if time.monotonic() > give_up:
            logger.warning("processes %s of a service outlived SIGKILL; left as they are", members)
            return
        if sent == signal.SIGTERM and time.monotonic() > deadline:
            sent = signal.SIGKILL
        for pid in members:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, sent)
        time.sleep(_POLL_INTERVAL_SEC / 5)


def _post_reset(name: str, url: str, timeout_sec: float) -> None:
    import httpx  # here: every run registers this format, few reset a service (~70 ms)

    try:
        response = httpx.post(url, timeout=timeout_sec)
    except httpx.HTTPError as exc:
        raise ActionError(f"service '{name}': reset POST {url} failed: {exc!r}") from exc
    if not response.is_success:
        raise ActionError(
            f"service '{name}': reset POST {url} answered HTTP {response.status_code}"
            f"{output_tail(response.text)}"
        )


def _wait_healthy(name: str, url: str, timeout_sec: float) -> None:
    import httpx  # see _post_reset

    deadline = time.monotonic() + timeout_sec
    last = "no answer yet"
    while True:
        remaining = deadline - time.monotonic()
        try:
            response = httpx.get(url, timeout=max(0.1, min(_REQUEST_TIMEOUT_SEC, remaining)))
            if response.is_success:
                return
            last = f"HTTP {response.status_code}"
        except httpx.HTTPError as exc:
            last = f"{type(exc).__name__}: {exc}"
        if time.monotonic() + _POLL_INTERVAL_SEC > deadline:
            raise ActionError(
                f"service '{name}' is not healthy: GET {url} did not answer 2xx within "
                f"{timeout_sec:g} s (last: {last})"
            )
        time.sleep(_POLL_INTERVAL_SEC)


def _text(data: str | bytes | None) -> str:
    if data is None:
        return ""
    return data.decode(errors="replace") if isinstance(data, bytes) else data


def output_tail(output: str) -> str:
    """The end of a command's output, as a suffix of an error message."""
    output = output.strip()
    if not output:
        return ""
    clipped = output if len(output) <= _TAIL_CHARS else "[...]" + output[-_TAIL_CHARS:]
    return f"; output:\n{clipped}"
