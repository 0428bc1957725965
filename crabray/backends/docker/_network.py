"""crabray's own docker network (``network: "crabray-net"``): the outside, never the host.

A container on any bridge network of Docker's reaches every service bound on
the host's every address through the bridge's gateway (``172.17.0.1`` on the
default ``bridge``) and the host's other addresses: packets for an address of
the host are delivered to the host itself, which Docker never filters. Ray's
ports (GCS, raylet, workers) listen on every interface and accept whoever
connects, so an agent in such a container can run code on the host.

``crabray-net`` is a bridge network crabray creates on first use, labelled
``crabray=1``, whose bridge interface has a fixed name (``crabray0``), so one
rule of the host's firewall can name it. What a container on it gets:

- outbound access as Docker gives it (its ``FORWARD`` and ``MASQUERADE``
  rules), and Docker's embedded DNS (``127.0.0.11``, served inside the
  container's own network namespace, forwarding from there);
- none of the host: crabray inserts first in the host's ``INPUT`` chain a rule
  rejecting every packet from ``crabray0`` that opens a new flow (``iptables -I
  INPUT -i crabray0 -m conntrack ! --ctstate ESTABLISHED,RELATED -j REJECT``),
  so no address of the host (the gateway, the host's other interfaces, other
  bridges) answers on any port; ``ip6tables`` rejects everything from it, and
  the container's IPv6 is turned off;
- none of the other containers on it (``enable_icc`` false): two sandboxes
  never talk to each other.

The rules are checked, and put back when missing, at every sandbox's start
(not only when the network is made): a reboot or a firewall reload drops them
while Docker keeps the network. That needs root and ``iptables`` on the host
where the engine runs, and that engine's bridge in this process's network
namespace (a local engine, not rootless, not Docker Desktop); otherwise the
sandbox refuses to start and says why, it never falls back to a network that
reaches the host.
"""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

from docker.errors import APIError

from crabray.backends.docker._engine import ENGINE_ERRORS, LABEL
from crabray.backends.docker._settings import ISOLATED_NETWORK
from crabray.backends.envs import build_lock
from crabray.core.errors import SandboxConfigError, SandboxError

logger = logging.getLogger(__name__)

BRIDGE = "crabray0"
"""The host's interface of ``crabray-net``: what the firewall rules name."""

LABEL_NETWORK = "crabray.network"
"""Label of the networks crabray makes (value: what the network is for)."""

OPTIONS = {
    "com.docker.network.bridge.name": BRIDGE,
    "com.docker.network.bridge.enable_icc": "false",
    "com.docker.network.bridge.enable_ip_masquerade": "true",
}
"""The bridge driver's options of ``crabray-net``: its interface's name, no traffic
between its containers, outbound NAT."""

RULE_COMMENT = "crabray-net: no host services"
"""Comment of crabray's firewall rules, so a reader of ``iptables -S`` knows whose they are."""

RULE_V4 = (
    *("-i", BRIDGE, "-m", "conntrack", "!", "--ctstate", "ESTABLISHED,RELATED"),
    *("-m", "comment", "--comment", RULE_COMMENT, "-j", "REJECT"),
)
"""The ``INPUT`` rule: a container may answer the host, never open a flow to it."""

RULE_V6 = ("-i", BRIDGE, "-m", "comment", "--comment", RULE_COMMENT, "-j", "REJECT")
"""The ``INPUT`` rule over IPv6: the container has none, so nothing from it at all."""

INSTALL_HINT = "apt-get install iptables"
"""How to get ``iptables`` and ``ip6tables``."""

_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


def firewall_path(program: str) -> str | None:
    """``iptables`` or ``ip6tables``, or None when the host does not have it."""
    return shutil.which(program) or shutil.which(program, path=_PATH)


def _ipv6_on() -> bool:
    """Whether this host's kernel speaks IPv6 (then ``ip6tables`` is needed too)."""
    return Path("/proc/net/if_inet6").exists()


def ensure_isolated_network(client: Any, label: str) -> None:
    """Make ``crabray-net`` if missing, and the host's rules that keep it off the host.

    Args:
        client: A client of the engine the sandbox runs on.
        label: Who asks, for messages (the environment's name).

    Raises:
        SandboxConfigError: Not root, ``iptables`` missing, the engine's bridge not
            on this host, or a ``crabray-net`` that is not crabray's; says what to do.
        SandboxError: The engine or ``iptables`` failed.
    """
    programs = _require_firewall(label)
    with build_lock(ISOLATED_NETWORK):  # host-wide: one network and one rule, never two
        network = _find_or_create(client, label)
        _check_network(network, label)
        if not Path("/sys/class/net", BRIDGE).exists():
            raise SandboxConfigError(
                f"docker sandbox of '{label}' asks for network '{ISOLATED_NETWORK}', but the "
                f"engine's bridge '{BRIDGE}' is not in this host's network namespace (a remote "
                "DOCKER_HOST, rootless Docker or Docker Desktop): crabray cannot keep its "
                "containers off the host there; run the worker on the engine's host, or use "
                "network 'none'"
            )
        for program, rule in zip(programs, (RULE_V4, RULE_V6), strict=False):
            _ensure_rule(program, rule)


def _require_firewall(label: str) -> list[str]:
    """``iptables`` (and ``ip6tables`` when the host has IPv6), usable by this process."""
    asks = f"docker sandbox of '{label}' asks for network '{ISOLATED_NETWORK}'"
    if os.geteuid() != 0:
        raise SandboxConfigError(
            f"{asks}, which needs root to install the host's firewall rule that keeps its "
            "containers away from the host's services (Ray's ports among them): run the worker "
            "as root (access to the Docker engine is root's power already), or use network "
            "'none'"
        )
    wanted = ["iptables", "ip6tables"] if _ipv6_on() else ["iptables"]
    found = [firewall_path(name) for name in wanted]
    missing = [name for name, path in zip(wanted, found, strict=True) if path is None]
    if missing:
        raise SandboxConfigError(
            f"{asks}, which needs {' and '.join(missing)} to keep its containers away from the "
            f"host's services: install it with `{INSTALL_HINT}`, or use network 'none'"
        )
    return [path for path in found if path is not None]


def _find_or_create(client: Any, label: str) -> Any:
    """The engine's ``crabray-net``, made now when it has none."""
    try:
        found = client.networks.list(names=[ISOLATED_NETWORK])
        exact = [network for network in found if network.name == ISOLATED_NETWORK]
        if exact:
            return client.networks.get(exact[0].id)
        network = client.networks.create(
            ISOLATED_NETWORK,
            driver="bridge",
            options=dict(OPTIONS),
            labels={LABEL: "1", LABEL_NETWORK: "outbound without the host"},
            enable_ipv6=False,
            check_duplicate=True,
        )
    except APIError as exc:
        raise SandboxError(f"cannot make docker network '{ISOLATED_NETWORK}': {exc}") from exc
    except ENGINE_ERRORS as exc:
        raise SandboxError(f"cannot list or make docker networks for '{label}': {exc}") from exc
    logger.info("made docker network %s (bridge %s)", ISOLATED_NETWORK, BRIDGE)
    return network


def _check_network(network: Any, label: str) -> None:
    """Refuse a ``crabray-net`` someone else made: its bridge may not be the one the rule names."""
    attrs = network.attrs or {}
    options = attrs.get("Options") or {}
    wrong = {key: options.get(key) for key, value in OPTIONS.items() if options.get(key) != value}
    if attrs.get("Driver") != "bridge" or attrs.get("EnableIPv6") or wrong:
        raise SandboxConfigError(
            f"docker sandbox of '{label}': the engine's network '{ISOLATED_NETWORK}' was not "
            f"made by crabray (driver {attrs.get('Driver')!r}, IPv6 {attrs.get('EnableIPv6')}, "
            f"options {wrong}), so crabray's firewall rule may not cover it: remove it "
            f"(`docker network rm {ISOLATED_NETWORK}`) and crabray makes its own"
        )


def _ensure_rule(program: str, rule: tuple[str, ...]) -> None:
    """Insert ``rule`` first in the host's ``INPUT`` chain unless it is there already."""
    check = _firewall(program, "-C", "INPUT", *rule)
    if check.returncode == 0:
        return
    inserted = _firewall(program, "-I", "INPUT", "1", *rule)
    if inserted.returncode != 0:
        raise SandboxError(
            f"cannot install the host's firewall rule of '{ISOLATED_NETWORK}' "
            f"({Path(program).name} exit code {inserted.returncode}): "
            f"{inserted.stderr.strip() or check.stderr.strip() or 'no output'}"
        )
    logger.info("%s: inserted INPUT %s", Path(program).name, " ".join(rule))


def _firewall(program: str, *args: str) -> subprocess.CompletedProcess[str]:
    """Run ``iptables``/``ip6tables``, waiting for the host's lock of the rules (``-w``)."""
    try:
        return subprocess.run(
            [program, "-w", *args],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
            env={"PATH": _PATH},
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise SandboxError(f"cannot run {program}: {exc}") from exc


_WARNED: set[str] = set()
"""The networks this process already warned about."""


def warn_if_host_reachable(network: str, label: str) -> None:
    """Log once per network that ``network`` lets containers reach the host's services."""
    if network in ("none", ISOLATED_NETWORK) or network in _WARNED:
        return
    _WARNED.add(network)
    logger.warning(
        "docker sandbox of '%s' uses network '%s': its containers reach the host's services "
        "(Ray's ports among them, which run code on the host); network '%s' reaches the "
        "outside without the host",
        label,
        network,
        ISOLATED_NETWORK,
    )
