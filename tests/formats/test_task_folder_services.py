"""The service registry against real HTTP servers on loopback and real shell commands."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from crabray.core.errors import ActionError
from crabray.formats.task_folder import (
    ServiceRegistry,
    load_registry,
    lock_service,
    prepare_service,
    stop_services,
    unlock_service,
)
from tests.formats.conftest import FakeService


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def registry(tmp_path: Path, text: str) -> ServiceRegistry:
    file = tmp_path / "services.yml"
    file.write_text(text)
    return load_registry(file)


def test_reset_url_then_health(tmp_path: Path, service: FakeService) -> None:
    service.healthy_at = time.monotonic() + 1.2  # comes up a little after the reset
    reg = registry(
        tmp_path,
        f"services:\n  notes:\n    reset_url: {service.url}/reset\n"
        f"    health_url: {service.url}/health\n    timeout_sec: 10\n",
    )
    prepare_service(reg, "notes")
    assert service.resets == 1
    assert service.health_checks >= 2  # polled until healthy


def test_reset_command_runs_in_the_registry_folder(tmp_path: Path, service: FakeService) -> None:
    reg = registry(
        tmp_path,
        "services:\n  notes:\n    reset: echo reset >> reset.log\n"
        f"    health_url: {service.url}/health\n",
    )
    prepare_service(reg, "notes")
    prepare_service(reg, "notes")
    assert (tmp_path / "reset.log").read_text() == "reset\nreset\n"


def test_never_healthy_names_the_service(tmp_path: Path, service: FakeService) -> None:
    service.healthy = False
    reg = registry(
        tmp_path,
        f"services:\n  notes:\n    health_url: {service.url}/health\n    timeout_sec: 1.5\n",
    )
    started = time.monotonic()
    with pytest.raises(ActionError) as caught:
        prepare_service(reg, "notes")
    assert 1.0 <= time.monotonic() - started < 5
    assert str(caught.value) == (
        f"service 'notes' is not healthy: GET {service.url}/health did not answer 2xx "
        "within 1.5 s (last: HTTP 503)"
    )


def test_nothing_listening_names_the_service(tmp_path: Path) -> None:
    url = f"http://127.0.0.1:{free_port()}/health"
    reg = registry(tmp_path, f"services:\n  wiki:\n    health_url: {url}\n    timeout_sec: 1\n")
    with pytest.raises(ActionError, match=r"service 'wiki' is not healthy: GET .* ConnectError"):
        prepare_service(reg, "wiki")


def test_failing_reset_command_shows_its_output(tmp_path: Path) -> None:
    reg = registry(
        tmp_path, "services:\n  db:\n    reset: echo dropping tables; echo no disk >&2; exit 3\n"
    )
    with pytest.raises(ActionError) as caught:
        prepare_service(reg, "db")
    message = str(caught.value)
    assert message.startswith("service 'db': reset command `echo dropping tables; echo no disk")
    assert f"(in {tmp_path}) exited 3; output:\ndropping tables\nno disk" in message


def test_reset_command_timeout(tmp_path: Path) -> None:
    reg = registry(tmp_path, "services:\n  db:\n    reset: sleep 5\n    timeout_sec: 0.5\n")
    with pytest.raises(ActionError, match=r"service 'db': reset command `sleep 5` .* within 0.5 s"):
        prepare_service(reg, "db")


def test_reset_url_error_status(tmp_path: Path, service: FakeService) -> None:
    reg = registry(tmp_path, f"services:\n  notes:\n    reset_url: {service.url}/nope\n")
    with pytest.raises(ActionError) as caught:
        prepare_service(reg, "notes")
    assert str(caught.value) == (
        f"service 'notes': reset POST {service.url}/nope answered HTTP 404; output:\nnot ready"
    )


def test_unknown_service(tmp_path: Path) -> None:
    reg = registry(tmp_path, "services:\n  db:\n    reset: 'true'\n")
    with pytest.raises(
        ActionError, match=r"service 'nope' is not in the registry .* \(known: db\)"
    ):
        prepare_service(reg, "nope")


def test_empty_registry_file_has_no_services(tmp_path: Path) -> None:
    assert registry(tmp_path, "").services == {}


def test_a_service_is_locked_for_one_episode_at_a_time(tmp_path: Path) -> None:
    reg = registry(tmp_path, "services:\n  db:\n    reset: 'true'\n")
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time\n"
            "from pathlib import Path\n"
            "from crabray.formats.task_folder import load_registry, lock_service\n"
            f"lock_service(load_registry(Path({str(tmp_path / 'services.yml')!r})), 'db')\n"
            "print('locked', flush=True)\n"
            "time.sleep(60)\n",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "locked\n"
        with pytest.raises(ActionError) as caught:
            lock_service(reg, "db", timeout_sec=1)
        assert str(caught.value).startswith(
            "service 'db' stayed in use by another episode on this host for 1 s"
        )
    finally:
        holder.kill()
        holder.wait()
    lock_service(reg, "db", timeout_sec=10)  # the holder is gone: the kernel released it
    lock_service(reg, "db", timeout_sec=1)  # held by this process already: no wait
    unlock_service(reg, "db")
    unlock_service(reg, "db")  # harmless when not held


# A service that ignores SIGTERM, as real ones stuck in a request do: only SIGKILL stops it.
STUBBORN = (
    "import http.server, signal, sys\n"
    "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
    "class H(http.server.BaseHTTPRequestHandler):\n"
    "    def do_GET(self):\n"
    "        self.send_response(200); self.end_headers()\n"
    "http.server.HTTPServer(('127.0.0.1', int(sys.argv[1])), H).serve_forever()\n"
)


def listening(port: int) -> bool:
    with socket.socket() as sock:
        return sock.connect_ex(("127.0.0.1", port)) == 0


def started_service(tmp_path: Path, stop: str | None = None) -> tuple[ServiceRegistry, int]:
    """A registry whose reset starts a server in the background, as suites' scripts do."""
    (tmp_path / "server.py").write_text(STUBBORN)
    port = free_port()
    text = (
        "services:\n  notes:\n"
        f"    reset: nohup {sys.executable} server.py {port} > server.log 2>&1 &\n"
        f"    health_url: http://127.0.0.1:{port}/health\n    timeout_sec: 10\n"
    )
    if stop is not None:
        text += f"    stop: {stop}\n"
    reg = registry(tmp_path, text)
    prepare_service(reg, "notes")
    assert listening(port), "the reset started the service"
    return reg, port


@pytest.mark.slow  # waits out the SIGTERM its server ignores
def test_what_a_reset_started_is_stopped_when_the_run_ends(tmp_path: Path) -> None:
    reg, port = started_service(tmp_path, stop="echo stopping > stopped.txt")
    assert stop_services(reg) == ["notes"]
    assert not listening(port), "the server ignoring SIGTERM was killed"
    assert (tmp_path / "stopped.txt").read_text() == "stopping\n", "its stop command ran first"
    assert stop_services(reg) == [], "nothing is left to stop"


@pytest.mark.slow  # waits out the SIGTERM its server ignores
def test_a_service_in_use_by_another_run_is_left_running(tmp_path: Path) -> None:
    reg, port = started_service(tmp_path)
    lock_service(reg, "notes")  # an episode of another run holds it
    try:
        assert stop_services(reg) == []
        assert listening(port)
    finally:
        unlock_service(reg, "notes")
    assert stop_services(reg) == ["notes"]
    assert not listening(port)


@pytest.mark.slow  # waits out the SIGTERM its server ignores
def test_a_failing_stop_command_is_reported_and_the_service_still_stopped(
    tmp_path: Path,
) -> None:
    reg, port = started_service(tmp_path, stop="echo no such thing >&2; exit 3")
    with pytest.raises(ActionError, match=r"service 'notes': stop command .* exited 3"):
        stop_services(reg)
    assert not listening(port)
