"""``network: true`` gives a sandbox the outside, never the host (issue 24, item 4).

An agent that reaches the host's loopback services reaches Ray's
unauthenticated ports, and through them runs code on the host. A confined
local sandbox with ``network: true`` has a network namespace of its own that
pasta connects to the outside: these tests play the agent against real
servers the test starts on the host (loopback, every local address, the
gateway pasta names) and a real local Ray instance. The outside is a network
namespace the test makes itself (root only), with addresses of the
documentation ranges that exist only in it: nothing leaves this machine.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import textwrap
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from crabray.backends import LocalBackend
from crabray.backends.local import _bwrap as bwrap
from crabray.backends.local import _network as network
from crabray.core.environment import EnvironmentConfig
from crabray.core.errors import SandboxConfigError
from tests.backends.conftest import host_pid_alive, wait_until
from tests.integrity.hostnet import REPO, connect_from, host_addresses, ray_ports, require


def _require_networking() -> None:
    usable, why = bwrap.probe()
    require(None if usable else f"bubblewrap does not work here ({why}): {bwrap.INSTALL_HINT}")
    hint = f"pasta is not installed: {network.INSTALL_HINT} (or bash scripts/system-deps.sh)"
    require(None if network.pasta_path() else hint)
    require(None if network.outbound_interface() else "this host has no IPv4 default route")


def _config(tmp_path: Path, **settings: object) -> EnvironmentConfig:
    return EnvironmentConfig(
        name="net",
        backend="local",
        backend_settings={
            "root_dir": str(tmp_path / "sandboxes"),
            "isolation": "bwrap",
            "network": True,
            **settings,
        },
    )


@pytest.fixture
def networked(tmp_path: Path) -> Iterator[LocalBackend]:
    _require_networking()
    backend = LocalBackend(_config(tmp_path))
    backend.start()
    try:
        yield backend
    finally:
        backend.close()


@pytest.fixture
def host_server() -> Iterator[int]:
    """A TCP server on every IPv4 address of the host (0.0.0.0) that accepts; its port."""
    with socket.socket() as server:
        server.bind(("0.0.0.0", 0))
        server.listen(64)
        yield server.getsockname()[1]


def _gateway() -> str | None:
    """The host's IPv4 default gateway (the address pasta gives the sandbox as its router)."""
    for line in Path("/proc/net/route").read_text().splitlines()[1:]:
        fields = line.split()
        if fields[1] == "00000000" and fields[7] == "00000000":
            return socket.inet_ntoa(int(fields[2], 16).to_bytes(4, "little"))
    return None


def test_the_sandbox_has_an_interface_a_default_route_and_dns(networked: LocalBackend) -> None:
    routes = networked.exec("cat /proc/net/route").stdout.splitlines()[1:]
    assert any(line.split()[1] == "00000000" for line in routes), routes
    interfaces = networked.exec("cat /proc/net/dev").stdout
    assert network.outbound_interface() in interfaces, interfaces  # pasta names it as the host
    resolv = networked.exec("cat /etc/resolv.conf").stdout
    assert "nameserver" in resolv, resolv
    assert networked.describe()["network"] is True


def test_no_host_address_reaches_a_host_server(networked: LocalBackend, host_server: int) -> None:
    # The server answers the host itself on each address: the test can fail.
    addresses = sorted({*host_addresses(), _gateway() or "127.0.0.1"})
    for address in host_addresses():
        socket.create_connection((address, host_server), timeout=5).close()
    reached = {address: connect_from(networked, address, host_server) for address in addresses}
    assert not [a for a, seen in reached.items() if seen == "connected"], reached


def test_the_host_loopback_is_not_mapped(networked: LocalBackend) -> None:
    """pasta's default forwards every port bound on the host's loopback into the sandbox's."""
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        port = server.getsockname()[1]
        seen = connect_from(networked, "127.0.0.1", port)
    assert seen.startswith("ConnectionRefusedError"), seen


def test_no_ray_port_is_reachable(networked: LocalBackend) -> None:
    """A real local Ray instance, as a run starts it: none of its ports from the sandbox."""
    with ray_ports() as ports:
        addresses = sorted({"127.0.0.1", *host_addresses()})
        assert any(_host_reaches(a, p) for a in addresses for p in ports), "the host reaches it"
        reached = {
            f"{address}:{port}": connect_from(networked, address, port)
            for address in sorted({"127.0.0.1", *host_addresses()})
            for port in ports
        }
    assert not [where for where, seen in reached.items() if seen == "connected"], reached


def _host_reaches(address: str, port: int) -> bool:
    try:
        socket.create_connection((address, port), timeout=5).close()
    except OSError:
        return False
    return True


def test_pasta_ends_with_the_sandbox(tmp_path: Path) -> None:
    _require_networking()
    backend = LocalBackend(_config(tmp_path))
    backend.start()
    holder = backend._holder
    assert holder is not None and holder._uplink is not None
    pid = holder._uplink.pid
    assert pid is not None and host_pid_alive(pid)
    backend.close()
    assert wait_until(lambda: not host_pid_alive(pid)), f"pasta {pid} outlived its sandbox"


def test_without_pasta_network_true_fails_naming_the_package(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    usable, why = bwrap.probe()
    require(None if usable else f"bubblewrap does not work here ({why}): {bwrap.INSTALL_HINT}")
    monkeypatch.setattr(network, "pasta_path", lambda: None)  # a host without passt
    backend = LocalBackend(_config(tmp_path))
    with pytest.raises(SandboxConfigError, match=r"apt-get install passt"):
        backend.start()
    backend.close()


# The outside: a network namespace of the test's, joined to a "host" namespace of the test's by
# a veth pair; the host namespace's default route leads there. Addresses from the documentation
# ranges (RFC 5737), which exist only in these namespaces.
_OUTSIDE, _HOST, _BRIDGE = "198.51.100.1", "198.51.100.2", "203.0.113.1"

_INSIDE_HOST = textwrap.dedent(
    """
    import json, socket, sys, tempfile, textwrap
    from pathlib import Path
    from crabray.backends import LocalBackend
    from crabray.core.environment import EnvironmentConfig
    outside_port = int(sys.argv[1])
    host = socket.socket(); host.bind(("0.0.0.0", 0)); host.listen(8)
    port = host.getsockname()[1]
    config = EnvironmentConfig(name="net", backend="local", backend_settings={
        "root_dir": tempfile.mkdtemp(), "isolation": "bwrap", "network": True})
    backend = LocalBackend(config)
    backend.start()
    def reach(address, port):
        probe = textwrap.dedent(f'''
            import socket
            try:
                socket.create_connection(({address!r}, {port}), timeout=3).close()
                print("connected")
            except OSError as exc:
                print(type(exc).__name__)
        ''')
        return backend.exec(["python3", "-c", probe], timeout_sec=30).stdout.strip()
    try:
        seen = {"outside": reach(sys.argv[2], outside_port)}
        for address in sys.argv[3:]:
            seen[address] = reach(address, port)
    finally:
        backend.close()
    print(json.dumps(seen))
    """
)


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True)


@pytest.fixture
def outside() -> Iterator[tuple[str, str]]:
    """Two network namespaces (the host's stand-in and the outside); their names."""
    _require_networking()
    if os.geteuid() != 0 or shutil.which("ip") is None:
        pytest.skip("making network namespaces needs root and iproute2 (apt-get install iproute2)")
    tag = uuid.uuid4().hex[:6]
    host, out = f"crabray-host-{tag}", f"crabray-out-{tag}"
    _ip("netns", "add", host)
    try:
        _ip("netns", "add", out)
        _ip("-n", host, "link", "add", "eth0", "type", "veth", "peer", "name", "eth0", "netns", out)
        _ip("-n", host, "addr", "add", f"{_HOST}/24", "dev", "eth0")
        _ip("-n", out, "addr", "add", f"{_OUTSIDE}/24", "dev", "eth0")
        _ip("-n", host, "link", "add", "bridge0", "type", "veth", "peer", "name", "bridge1")
        _ip("-n", host, "addr", "add", f"{_BRIDGE}/24", "dev", "bridge0")
        for name in (host, out):
            _ip("-n", name, "link", "set", "lo", "up")
            _ip("-n", name, "link", "set", "eth0", "up")
        _ip("-n", host, "link", "set", "bridge0", "up")  # another address of the host
        _ip("-n", host, "link", "set", "bridge1", "up")
        _ip("-n", host, "route", "add", "default", "via", _OUTSIDE)
        yield host, out
    finally:
        subprocess.run(["ip", "netns", "delete", f"crabray-out-{tag}"], check=False)
        subprocess.run(["ip", "netns", "delete", host], check=False)


def test_outbound_reaches_the_outside_but_not_the_host(outside: tuple[str, str]) -> None:
    host, out = outside
    server = textwrap.dedent(
        """
        import socket, sys
        s = socket.socket(); s.bind(("0.0.0.0", 0)); s.listen(8)
        print(s.getsockname()[1], flush=True)
        while True:
            s.accept()[0].close()
        """
    )
    serving = subprocess.Popen(
        ["ip", "netns", "exec", out, sys.executable, "-c", server], stdout=subprocess.PIPE
    )
    try:
        assert serving.stdout is not None
        port = serving.stdout.readline().decode().strip()
        env = {**os.environ, "PYTHONPATH": str(REPO)}
        argv = [sys.executable, "-c", _INSIDE_HOST, port, _OUTSIDE, "127.0.0.1", _HOST, _BRIDGE]
        done = subprocess.run(
            ["ip", "netns", "exec", host, *argv],
            capture_output=True,
            text=True,
            env=env,
            timeout=120,
            check=False,
        )
    finally:
        serving.kill()
        serving.wait()
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen["outside"] == "connected", seen
    assert seen["127.0.0.1"] == "ConnectionRefusedError", seen
    assert seen[_HOST] == "ConnectionRefusedError", seen  # the sandbox's own address inside
    assert seen[_BRIDGE] != "connected", seen  # leaves by eth0 to the outside, which has none
