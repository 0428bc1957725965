"""Docker's ``network: "crabray-net"`` reaches the outside, never the host (issue 24, item 4).

A container on one of Docker's bridge networks reaches every service bound on
the host's addresses through its gateway, Ray's unauthenticated ports among
them. These tests play the agent in a real container of ``crabray/debian``
against servers the test starts on the host, a real local Ray instance, a
second container on the same network, and an "outside" network namespace the
test makes (root only), with documentation addresses (RFC 5737) that exist
only there: nothing leaves this machine.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import textwrap
import uuid
from collections.abc import Iterator

import pytest

from crabray.backends import Backend, create_backend
from crabray.backends.docker import _network as network
from crabray.core.environment import EnvironmentConfig
from crabray.core.errors import SandboxConfigError
from tests.backends.docker.dockerd import require_docker, require_env_image
from tests.integrity.hostnet import connect_from, host_addresses, ray_ports, require

ISOLATED = "crabray-net"


def _require_firewall() -> None:
    require_docker()
    require_env_image("debian")
    if os.geteuid() != 0:
        require("crabray-net installs a host firewall rule: run these tests as root")
    require(None if network.firewall_path("iptables") else f"no iptables: {network.INSTALL_HINT}")


def _backend(network_name: str) -> Backend:
    config = EnvironmentConfig(
        name="net",
        backend="docker",
        backend_settings={
            "image": "crabray/debian:latest",
            "network": network_name,
            "warm_spare": False,
        },
    )
    return create_backend(config)


@pytest.fixture
def isolated() -> Iterator[Backend]:
    """A started container of ``crabray/debian`` on ``crabray-net``."""
    _require_firewall()
    backend = _backend(ISOLATED)
    backend.start()
    try:
        yield backend
    finally:
        backend.close()


@pytest.fixture
def host_server() -> Iterator[int]:
    """A TCP server on every IPv4 and IPv6 address of the host that accepts; its port."""
    with socket.socket(socket.AF_INET6) as server:
        server.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
        server.bind(("::", 0))
        server.listen(64)
        yield server.getsockname()[1]


def _gateway(backend: Backend) -> str:
    """The container's default gateway: the host's address on the network's bridge."""
    for line in backend.exec("cat /proc/net/route").stdout.splitlines()[1:]:
        fields = line.split()
        if fields[1] == "00000000":
            return socket.inet_ntoa(int(fields[2], 16).to_bytes(4, "little"))
    raise AssertionError("the container has no default route")


def _reachable_here(address: str, port: int) -> bool:
    """Whether the host itself connects to ``address:port``."""
    try:
        socket.create_connection((address, port), timeout=5).close()
    except OSError:
        return False
    return True


def _rules(program: str) -> list[str]:
    listed = subprocess.run([program, "-w", "-S", "INPUT"], capture_output=True, text=True)
    return [line for line in listed.stdout.splitlines() if network.RULE_COMMENT in line]


def test_the_container_has_a_default_route_and_dns_and_no_ipv6(isolated: Backend) -> None:
    assert _gateway(isolated)
    resolv = isolated.exec("cat /etc/resolv.conf").stdout
    assert "nameserver 127.0.0.11" in resolv, resolv  # Docker's embedded DNS
    assert isolated.exec("getent hosts crabray").exit_code == 0  # answered by it
    assert isolated.exec("cat /proc/net/if_inet6").stdout.strip() == ""
    assert isolated.describe()["network"] == ISOLATED


def test_no_host_address_reaches_a_host_server(isolated: Backend, host_server: int) -> None:
    addresses = sorted({_gateway(isolated), *host_addresses(), *host_addresses("-6")})
    for address in addresses:  # the server answers the host itself on each of them
        socket.create_connection((address, host_server), timeout=5).close()
    reached = {address: connect_from(isolated, address, host_server) for address in addresses}
    assert not [a for a, seen in reached.items() if seen == "connected"], reached


def test_docker_bridge_reaches_the_host_which_is_why(host_server: int) -> None:
    """The same probe on Docker's own ``bridge`` network connects: the probe can tell."""
    _require_firewall()
    backend = _backend("bridge")
    backend.start()
    try:
        seen = connect_from(backend, _gateway(backend), host_server)
    finally:
        backend.close()
    assert seen == "connected", seen


def test_no_ray_port_is_reachable(isolated: Backend) -> None:
    """A real local Ray instance, as a run starts it: none of its ports from the container."""
    gateway = _gateway(isolated)
    with ray_ports() as ports:
        exposed = [port for port in ports if _reachable_here(gateway, port)]
        assert exposed, f"no Ray port answers the host on {gateway}: the test could not fail"
        reached = {
            f"{address}:{port}": connect_from(isolated, address, port)
            for address in sorted({gateway, *host_addresses()})
            for port in ports
        }
    assert not [where for where, seen in reached.items() if seen == "connected"], reached


def test_containers_on_it_do_not_reach_each_other(isolated: Backend) -> None:
    other = _backend(ISOLATED)
    other.start()
    try:
        serve = "import socket; s = socket.socket(); s.bind(('0.0.0.0', 8000)); s.listen(); "
        serve += "print('up', flush=True)\nwhile True: s.accept()[0].close()"
        other.put_file("/tmp/serve.py", serve.encode())
        started = other.exec("nohup python3 /tmp/serve.py > /tmp/out 2>&1 & sleep 1; cat /tmp/out")
        assert "up" in started.stdout, started
        assert connect_from(other, "127.0.0.1", 8000) == "connected"  # it listens
        address = other.exec("hostname -i").stdout.split()[0]
        seen = connect_from(isolated, address, 8000)
    finally:
        other.close()
    assert seen != "connected", seen


def test_a_lost_rule_is_put_back_at_the_next_start(isolated: Backend) -> None:
    assert len(_rules("iptables")) == 1, _rules("iptables")  # every start checks: still one
    subprocess.run(["iptables", "-w", "-D", "INPUT", *network.RULE_V4], check=True)
    assert _rules("iptables") == []  # as after a reboot or a firewall reload
    again = _backend(ISOLATED)
    again.start()
    again.close()
    assert len(_rules("iptables")) == 1, _rules("iptables")


def test_without_iptables_it_refuses_naming_the_package(monkeypatch: pytest.MonkeyPatch) -> None:
    _require_firewall()
    monkeypatch.setattr(network, "firewall_path", lambda _program: None)  # a host without it
    backend = _backend(ISOLATED)
    with pytest.raises(SandboxConfigError, match=r"apt-get install iptables"):
        backend.start()
    backend.close()


def test_without_a_network_the_container_has_none() -> None:
    _require_firewall()
    backend = _backend("none")
    backend.start()
    try:
        routes = backend.exec("cat /proc/net/route").stdout.splitlines()[1:]
        interfaces = backend.exec("cat /proc/net/dev").stdout.splitlines()[2:]
    finally:
        backend.close()
    assert routes == []
    assert [line.split(":")[0].strip() for line in interfaces] == ["lo"]


# The outside: a network namespace of the test's joined to the host by a veth pair, with
# addresses of a documentation range (RFC 5737) that exist only on that link.
_OUTSIDE, _HOST_SIDE = "198.51.100.1", "198.51.100.2"

_SERVER = textwrap.dedent(
    """
    import socket
    s = socket.socket(); s.bind(("0.0.0.0", 0)); s.listen(8)
    print(s.getsockname()[1], flush=True)
    while True:
        connection, peer = s.accept()
        print(peer[0], flush=True)
        connection.close()
    """
)


@pytest.fixture
def outside() -> Iterator[str]:
    """A network namespace reached from the host by a veth pair; its name."""
    _require_firewall()
    tag = uuid.uuid4().hex[:6]
    name, link = f"crabray-out-{tag}", f"crbo-{tag}"
    subprocess.run(["ip", "netns", "add", name], check=True)
    try:
        for command in (
            f"link add {link} type veth peer name eth0 netns {name}",
            f"addr add {_HOST_SIDE}/24 dev {link}",
            f"link set {link} up",
            f"-n {name} addr add {_OUTSIDE}/24 dev eth0",
            f"-n {name} link set eth0 up",
            f"-n {name} link set lo up",
        ):
            subprocess.run(["ip", *command.split()], check=True, capture_output=True)
        yield name
    finally:
        subprocess.run(["ip", "link", "delete", link], check=False, capture_output=True)
        subprocess.run(["ip", "netns", "delete", name], check=False)


def test_outbound_reaches_the_outside_through_nat(
    isolated: Backend, outside: str, host_server: int
) -> None:
    socket.create_connection((_HOST_SIDE, host_server), timeout=5).close()  # the host answers
    serving = subprocess.Popen(
        ["ip", "netns", "exec", outside, sys.executable, "-c", _SERVER],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert serving.stdout is not None
        port = int(serving.stdout.readline())
        seen = connect_from(isolated, _OUTSIDE, port)
        peer = serving.stdout.readline().strip() if seen == "connected" else None
        host_side = connect_from(isolated, _HOST_SIDE, host_server)  # the host on that link
    finally:
        serving.kill()
        serving.wait()
    assert seen == "connected", seen
    assert peer == _HOST_SIDE  # masqueraded as the host, as Docker does
    assert host_side != "connected", host_side
