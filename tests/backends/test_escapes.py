"""A hostile agent tries to reach the host from inside a sandbox, on every backend.

Each test is one escape, tried for real by commands inside the sandbox (and by
the file transfers the agent's actions cause). What a backend does not isolate
is stated in ``NOT_ISOLATED`` (and in the table of docs/isolation.md): such a test
is expected to fail (a strict ``xfail``, so a claim that became untrue shows up),
instead of being left out. The races run a bounded number of transfers.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from crabray.backends import Backend
from crabray.core.errors import SandboxError, SandboxFileError
from tests.backends.conftest import BackendFactory

RACE_ROUNDS = 300
"""File transfers tried while the sandbox swaps a directory for a symlink to the host."""

_UNCONFINED = "isolation 'none' is unconfined by choice: commands run as the host user"
_SSH_USER = (
    "commands run as the SSH login user on the remote machine, unconfined there "
    "(in this test the remote machine is this host, reached over loopback)"
)

NOT_ISOLATED: dict[str, dict[str, str]] = {
    "local": {
        "driver_environment": _UNCONFINED + " and can read this host's /proc",
        "host_secrets": _UNCONFINED,
        "host_uid": _UNCONFINED,
        "other_sandboxes": _UNCONFINED,
        "host_processes": _UNCONFINED,
        "write_race": _UNCONFINED + "; file transfers check the path, then use it",
    },
    "ssh": {
        "driver_environment": _SSH_USER + ", and see that machine's processes",
        "host_secrets": _SSH_USER,
        "host_uid": _SSH_USER,
        "other_sandboxes": _SSH_USER,
        "host_processes": _SSH_USER,
        "write_race": _SSH_USER + "; SFTP checks the path, then uses it",
    },
    "docker": {
        "host_uid": "containers run as root (uid 0 on the host) unless the image sets a user",
    },
}
"""Per backend (contract id): escape -> why the backend does not prevent it."""


KNOWN_DEFECTS: dict[tuple[str, str], str] = {}
"""(backend, escape) -> a defect of the backend that is not an escape but fails the test."""


def _family(contract_kind: str) -> str:
    """The backend a contract variant runs on (``docker-python`` is docker with a python3 image)."""
    return contract_kind.removesuffix("-python")


def _expect(request: pytest.FixtureRequest, kind: str, escape: str, *, strict: bool = True) -> None:
    """Mark the test an expected failure where ``kind`` does not isolate ``escape``."""
    reason = NOT_ISOLATED.get(_family(kind), {}).get(escape)
    if reason is not None:
        request.applymarker(pytest.mark.xfail(reason=f"{kind}: {reason}", strict=strict))


@pytest.fixture
def secret(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """A secret in the driver's environment, as an API key would be.

    Set in this process (what the backend inherits) and in a host process started
    with it, as the driver and its Ray workers are (``/proc/PID/environ`` shows
    the environment a process started with, not later changes).
    """
    value = f"sk-crabray-escape-{uuid.uuid4().hex}"
    monkeypatch.setenv("OPENAI_API_KEY", value)
    worker = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(300)"],
        env={**os.environ, "OPENAI_API_KEY": value},
    )
    yield value
    worker.kill()
    worker.wait()


def test_driver_environment(
    request: pytest.FixtureRequest, contract_kind: str, backend_factory: BackendFactory, secret: str
) -> None:
    _expect(request, contract_kind, "driver_environment")
    backend = backend_factory()
    backend.exec("sleep 30 >/dev/null 2>&1 &")
    result = backend.exec(
        "env; cat /proc/self/environ /proc/1/environ; "
        "for f in /proc/[0-9]*/environ; do cat $f; echo; done",
        timeout_sec=60,
    )
    assert "OPENAI_API_KEY=" not in result.stdout
    assert secret not in result.stdout + result.stderr


def test_host_secrets(
    request: pytest.FixtureRequest, contract_kind: str, backend_factory: BackendFactory
) -> None:
    _expect(request, contract_kind, "host_secrets")
    host_keys = sorted(Path("/etc/ssh").glob("ssh_host_*_key"))
    marker = _root_marker()
    backend = backend_factory()
    try:
        result = backend.exec(
            "cat /etc/ssh/ssh_host_*_key /etc/shadow /etc/gshadow; ls -A /root; ls -A /etc/ssh",
            timeout_sec=60,
        )
    finally:
        if marker is not None:
            marker.unlink()
    output = result.stdout
    for key in host_keys:
        body = _readable(key)
        assert not body or body not in output, f"{key} is readable in the sandbox"
    for private in (Path("/etc/shadow"), Path("/etc/gshadow")):
        body = _readable(private)
        assert not body or body not in output, f"{private} is readable in the sandbox"
    if marker is not None:
        assert marker.name not in output, "the host's /root is listed in the sandbox"


def test_host_uid(
    request: pytest.FixtureRequest, contract_kind: str, backend_factory: BackendFactory
) -> None:
    if contract_kind == "vm":
        pytest.skip("not applicable: a VM's users are its own kernel's, not this host's")
    _expect(request, contract_kind, "host_uid")
    backend = backend_factory()
    result = backend.exec("id -u; touch made-inside")
    assert result.exit_code == 0, result
    workdir = backend.describe().get("workdir")
    if contract_kind.startswith("local") or contract_kind == "ssh":
        owner = (Path(workdir) / "made-inside").stat().st_uid
        assert owner != 0, "a file the sandbox made belongs to root on the host"
        if os.geteuid() != 0:
            assert owner == os.geteuid()
    else:
        assert result.stdout.split()[0] != "0", "the sandbox runs as root"


def test_other_sandboxes_and_results(
    request: pytest.FixtureRequest,
    contract_kind: str,
    backend_factory: BackendFactory,
    tmp_path: Path,
) -> None:
    _expect(request, contract_kind, "other_sandboxes")
    results = tmp_path / "results"
    results.mkdir()
    result_marker = f"results-{uuid.uuid4().hex}"
    (results / result_marker).write_text("episodes")
    neighbour_marker = f"neighbour-{uuid.uuid4().hex}"
    neighbour = backend_factory("neighbour")
    neighbour.put_file(neighbour_marker, b"private")
    attacker = backend_factory("attacker")
    listed = " ".join(
        str(p) for p in (results, neighbour.describe().get("workdir"), tmp_path) if p is not None
    )
    found = attacker.exec(f"ls -AR {listed}", timeout_sec=60).stdout
    if result_marker not in found and neighbour_marker not in found:
        # Not at their host paths: look everywhere the sandbox can see.
        found = attacker.exec(
            f"find / -path /proc -prune -o -path /sys -prune -o "
            f"\\( -name '{result_marker}' -o -name '{neighbour_marker}' \\) -print",
            timeout_sec=300,
        ).stdout
    assert result_marker not in found, "the results directory is visible"
    assert neighbour_marker not in found, "another sandbox is visible"


def test_host_processes(
    request: pytest.FixtureRequest, contract_kind: str, backend_factory: BackendFactory
) -> None:
    _expect(request, contract_kind, "host_processes")
    marker = f"host-process-{uuid.uuid4().hex}"
    host = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)", marker])
    try:
        backend = backend_factory()
        result = backend.exec("cat /proc/[0-9]*/cmdline | tr '\\0' ' '; ps -ef", timeout_sec=60)
    finally:
        host.kill()
        host.wait()
    assert marker not in result.stdout, "a host process is visible in the sandbox"


# The sandbox swaps directory ``d`` with symlink ``l`` (to a host directory) as fast
# as it can: atomically with renameat2(RENAME_EXCHANGE) when it has Python, else with mv.
_SWAP_PY = (
    "import ctypes, os\n"
    "libc = ctypes.CDLL(None, use_errno=True)\n"
    "while not os.path.exists('stop'):\n"
    "    for _ in range(1000):\n"
    "        libc.renameat2(-100, b'd', -100, b'l', 2)\n"
)
_SWAP_SH = "while [ ! -e stop ]; do mv d t; mv l d; mv d l; mv t d; done"


@pytest.fixture
def host_dir(tmp_path: Path) -> Iterator[Path]:
    """A host directory no sandbox may write to or read from."""
    target = tmp_path / "host-target"
    target.mkdir()
    os.chmod(target, 0o777)
    yield target


def _start_swapping(backend: Backend, host_dir: Path) -> None:
    backend.put_file("swap.py", _SWAP_PY.encode())
    backend.put_file("d/f", b"inside\n")
    backend.exec(["ln", "-s", str(host_dir), "l"])
    started = backend.exec(
        "if command -v python3 >/dev/null; then python3 swap.py; "
        f"else {_SWAP_SH}; fi >/dev/null 2>&1 &"
    )
    assert started.exit_code == 0, started


def test_write_race_never_lands_outside(
    request: pytest.FixtureRequest,
    contract_kind: str,
    backend_factory: BackendFactory,
    host_dir: Path,
) -> None:
    _expect(request, contract_kind, "write_race", strict=False)
    backend = backend_factory()
    _start_swapping(backend, host_dir)
    refused = 0
    try:
        for round_ in range(RACE_ROUNDS):
            try:
                backend.put_file(f"d/out-{round_}", b"written by the driver\n")
            except SandboxFileError:
                refused += 1
    finally:
        backend.put_file("stop", b"")
    landed = sorted(p.name for p in host_dir.iterdir())
    assert landed == [], f"{len(landed)} of {RACE_ROUNDS} writes landed on the host: {landed[:5]}"
    assert refused < RACE_ROUNDS, "no write got through: the race was not tried"


def test_read_race_never_reads_the_host(
    request: pytest.FixtureRequest,
    contract_kind: str,
    backend_factory: BackendFactory,
    host_dir: Path,
) -> None:
    _expect(request, contract_kind, "write_race", strict=False)
    defect = KNOWN_DEFECTS.get((_family(contract_kind), "read_race"))
    if defect is not None:
        request.applymarker(pytest.mark.xfail(reason=f"{contract_kind}: {defect}", strict=False))
    secret = f"host-only-{uuid.uuid4().hex}"
    (host_dir / "f").write_text(secret)
    backend = backend_factory()
    _start_swapping(backend, host_dir)
    leaked = 0
    try:
        for _ in range(RACE_ROUNDS):
            try:
                leaked += secret.encode() in backend.get_file("d/f")
            except SandboxFileError:
                continue
    finally:
        backend.put_file("stop", b"")
    assert leaked == 0, f"{leaked} of {RACE_ROUNDS} reads returned a host file"


def test_planted_symlink_to_a_host_file(
    backend_factory: BackendFactory, host_dir: Path, tmp_path: Path
) -> None:
    secret = f"host-only-{uuid.uuid4().hex}"
    host_file = host_dir / "secret.txt"
    host_file.write_text(secret)
    backend = backend_factory()
    backend.exec(["ln", "-s", str(host_file), "planted"])
    backend.exec(["ln", "-s", str(host_dir), "planted-dir"])
    for path in ("planted", "planted-dir/secret.txt"):
        try:
            data = backend.get_file(path)
        except SandboxFileError:
            continue
        assert secret.encode() not in data, f"get_file('{path}') read the host file"
    for path in ("planted", "planted-dir/new.txt"):
        try:
            backend.put_file(path, b"overwritten")
        except SandboxFileError:
            continue
    assert host_file.read_text() == secret
    assert sorted(p.name for p in host_dir.iterdir()) == ["secret.txt"]


def test_a_fifo_does_not_hang_the_driver(
    contract_kind: str, backend_factory: BackendFactory
) -> None:
    backend = backend_factory()
    assert backend.exec("mkfifo pipe").exit_code == 0
    outcome: list[BaseException | bytes] = []

    def read() -> None:
        try:
            outcome.append(backend.get_file("pipe"))
        except (SandboxFileError, SandboxError) as exc:
            outcome.append(exc)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    reader.join(timeout=30)
    if reader.is_alive():
        backend.exec("echo unblock > pipe", timeout_sec=5)
        reader.join(timeout=10)
        pytest.fail(
            f"get_file on a FIFO planted by the sandbox blocked the driver ({contract_kind})"
        )
    assert isinstance(outcome[0], SandboxFileError), outcome


def _readable(path: Path) -> str:
    """The text of a host file this test process may read, else ''."""
    try:
        return path.read_text(errors="replace").strip()
    except OSError:
        return ""


def _root_marker() -> Path | None:
    """A file in the host's /root to look for from inside, when this process may write there."""
    marker = Path("/root") / f".crabray-escape-{uuid.uuid4().hex}"
    try:
        marker.write_text("host only")
    except OSError:
        return None
    return marker
