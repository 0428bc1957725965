"""A confined sandbox's network (``network: true``): its own namespace, outbound NAT, no host.

Sharing the host's network namespace would give the agent every service of the
host's loopback, Ray's unauthenticated ports among them, and through them code
execution on the host. So a sandbox with ``network: true`` keeps the network
namespace ``bwrap`` makes for it, and ``pasta`` (Debian's ``passt`` package)
connects that namespace to the outside: it serves a tap interface inside and
turns the sandbox's connections into ordinary sockets of its own on the host
(user-mode NAT, no privilege, no host configuration changed). Its options:

- ``--config-net``: pasta gives the namespace its interface, the host's address on
  the default route, the same gateway and a default route; ``/etc/resolv.conf``
  stays the host's (a resolver on the host's loopback is unreachable, see below).
- ``-t none -u none -T none -U none``: no port forwarding either way. pasta's
  default (``auto``) forwards every port bound on the host's loopback to the
  sandbox's loopback, which is exactly the exposure this avoids.
- ``--no-map-gw``: the gateway address is the real gateway, not the host.
- ``--outbound-if4 IFACE``: pasta's sockets are bound to the interface of the
  host's default route, so a connection to any other address of the host
  (``docker0``'s 172.17.0.1, a bridge made later) leaves by that interface to
  the gateway instead of being delivered to the host; the host's own address on
  that interface is the sandbox's own address inside, so it never reaches the
  host either.
- ``--ipv4-only``: over IPv6 pasta hands a connection to its link-local router
  address to the host's own link-local address, which reaches the host's
  services; the sandbox gets no IPv6.

pasta runs as the sandbox's host user (``nobody`` under a root driver, which
owns the sandbox's user namespace), daemonizes once the namespace is
configured and writes its process id to a file, so the sandbox's owner kills
it with the sandbox (it would otherwise keep the namespace alive).

A DNS resolver on the host's loopback (``127.0.0.53`` of systemd-resolved)
cannot be reached from the sandbox: names resolve only with a resolver
elsewhere in ``/etc/resolv.conf``.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import shutil
import signal
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

from crabray.core.errors import SandboxError, SandboxHostError

logger = logging.getLogger(__name__)

PACKAGE = "passt"
"""The Debian and Ubuntu package that provides ``pasta``."""

INSTALL_HINT = f"apt-get install {PACKAGE}"
"""How to get ``pasta``."""

START_TIMEOUT_SEC = 10.0
"""How long pasta may take to configure the sandbox's namespace and daemonize."""

_NS_GET_USERNS = 0xB701
"""``ioctl`` request: a descriptor of the user namespace that owns a namespace."""

_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

PASTA_OPTIONS = (
    "--config-net",
    "--quiet",
    "--no-map-gw",
    "--ipv4-only",
    *("--tcp-ports", "none", "--udp-ports", "none", "--tcp-ns", "none", "--udp-ns", "none"),
)
"""What every sandbox's pasta is started with (see the module's docstring for why)."""


def pasta_path() -> str | None:
    """The ``pasta`` program, or None when the ``passt`` package is not installed."""
    return shutil.which("pasta") or shutil.which("pasta", path=_PATH)


def require_pasta(name: str) -> str:
    """The ``pasta`` program a sandbox with ``network: true`` needs.

    Raises:
        SandboxHostError: pasta is missing (the run stops: every start would fail the same).
    """
    found = pasta_path()
    if found is None:
        raise SandboxHostError(
            f"local sandbox of '{name}' asks for network: true (backend_settings.network), "
            f"which needs 'pasta' from the '{PACKAGE}' package to give it a network of its own "
            f"without the host's: install it with `{INSTALL_HINT}`, or drop the setting"
        )
    return found


def outbound_interface() -> str | None:
    """The interface of the host's IPv4 default route (from ``/proc/net/route``), or None."""
    try:
        lines = Path("/proc/net/route").read_text().splitlines()[1:]
    except OSError as exc:
        raise SandboxError(f"cannot read the host's routes (/proc/net/route): {exc}") from exc
    for line in lines:
        fields = line.split()
        if len(fields) > 7 and fields[1] == "00000000" and fields[7] == "00000000":
            return fields[0]
    return None


class Uplink:
    """The ``pasta`` process that connects one sandbox's network namespace to the outside.

    Args:
        label: Who it serves, for messages (the environment name).
        host_uid: The host user pasta runs as: the owner of the sandbox's user namespace.
        host_gid: That user's group.
    """

    def __init__(self, label: str, host_uid: int, host_gid: int) -> None:
        self.label = label
        self.host_uid = host_uid
        self.host_gid = host_gid
        self.pid: int | None = None

    def start(self, pid: int) -> None:
        """Give the network namespace of process ``pid`` its interface and outbound NAT.

        Raises:
            SandboxHostError: pasta is not installed.
            SandboxError: The host has no default route, or pasta failed.
        """
        pasta = require_pasta(self.label)
        interface = outbound_interface()
        if interface is None:
            raise SandboxError(
                f"local sandbox of '{self.label}' asks for network: true, but this host has no "
                "IPv4 default route to give it"
            )
        with tempfile.TemporaryDirectory(prefix="crabray-pasta-") as scratch:
            if os.geteuid() == 0:
                os.chown(scratch, self.host_uid, self.host_gid)  # pasta writes as that user
            pid_file = Path(scratch) / "pid"
            argv = [pasta, *PASTA_OPTIONS, "--outbound-if4", interface, "--pid", str(pid_file)]
            if os.geteuid() == 0:
                argv += ["--runas", f"{self.host_uid}:{self.host_gid}"]
            with _owner_of_network(pid) as owner:
                argv += ["--netns", f"/proc/{pid}/ns/net", "--userns", f"/proc/self/fd/{owner}"]
                self._run(argv, pid_file, owner)
        logger.debug("pasta %d connects the sandbox of '%s' by %s", self.pid, self.label, interface)

    def _run(self, argv: list[str], pid_file: Path, owner: int) -> None:
        try:
            done = subprocess.run(
                argv,
                capture_output=True,
                timeout=START_TIMEOUT_SEC,
                check=False,
                env={"PATH": _PATH},
                cwd="/",
                start_new_session=True,
                pass_fds=(owner,),
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise SandboxError(f"cannot start pasta for '{self.label}': {exc}") from exc
        try:
            self.pid = int(pid_file.read_text().strip())
        except (OSError, ValueError):
            self.pid = None
        if done.returncode != 0 or self.pid is None:
            output = _without_syslog(done.stderr.decode(errors="replace")) or "no output"
            self.stop()
            raise SandboxError(
                f"pasta could not give the sandbox of '{self.label}' its network "
                f"(exit code {done.returncode}): {output}"
            )

    def stop(self) -> None:
        """Kill pasta (it would keep the namespace alive); harmless when not running."""
        pid, self.pid = self.pid, None
        if pid is None:
            return
        with contextlib.suppress(OSError):
            if not Path(f"/proc/{pid}/comm").read_text().startswith("pas"):
                return  # not pasta (passt.avx2 on amd64) any more: its pid was reused
            os.kill(pid, signal.SIGKILL)
            logger.debug("killed pasta %d of '%s'", pid, self.label)


@contextlib.contextmanager
def _owner_of_network(pid: int) -> Iterator[int]:
    """A descriptor of the user namespace that owns ``pid``'s network namespace.

    bwrap makes the sandbox's namespaces in one user namespace and runs the
    sandbox in another nested in it: pasta must join the owner, as joining the
    inner one gives no power over the network.

    Raises:
        SandboxError: The namespace cannot be opened (the sandbox is gone).
    """
    try:
        net = os.open(f"/proc/{pid}/ns/net", os.O_RDONLY | os.O_CLOEXEC)
    except OSError as exc:
        raise SandboxError(f"cannot open the sandbox's network namespace: {exc}") from exc
    try:
        owner = fcntl.ioctl(net, _NS_GET_USERNS)
    except OSError as exc:
        raise SandboxError(f"cannot find who owns the sandbox's network: {exc}") from exc
    finally:
        os.close(net)
    try:
        yield owner
    finally:
        os.close(owner)


def _without_syslog(output: str) -> str:
    """pasta's messages without its complaints about a missing syslog."""
    lines = [line for line in output.splitlines() if "to syslog" not in line]
    return "\n".join(lines).strip()
