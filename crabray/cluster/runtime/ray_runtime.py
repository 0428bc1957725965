"""Connecting to Ray: a local single-node instance by default, or an existing cluster.

Ray's own log lines stay out of the user's terminal: the driver logs Ray's
errors only and worker output is not forwarded (it stays in Ray's
session logs under ``/tmp/ray``).
"""

from __future__ import annotations

import logging
import os
import signal
import socket
import threading
from pathlib import Path
from typing import Any

import ray

from crabray.cluster.runtime.placement import node_labels, node_resources
from crabray.cluster.runtime.token_auth import use_token_auth
from crabray.core.errors import CrabrayError

logger = logging.getLogger(__name__)

_CONNECT_TIMEOUT_SEC = 5.0
TASK_EVENTS_VAR = "RAY_task_events_report_interval_ms"
"""Ray's interval for reporting task events; crabray sets 0 (none) unless the user did."""

_started_here: str | None = None
"""The node id of the local instance this process started, if any (unique per start)."""


def local_cpus(widest: int, episodes: int, concurrency: int) -> int:
    """The CPUs a local instance advertises: at most the environment actors a run has at once.

    ``widest`` is the most environments one task has; ``concurrency`` the
    run's cap on episodes in flight. crabray's actors take no CPU, and Ray
    starts a worker process ahead for every CPU a node advertises: a one-task
    run on 32 cores would start 32 Python workers and use one. The machine's
    cores stay the ceiling.
    """
    return max(1, min(os.cpu_count() or 1, min(concurrency, episodes) * widest))


def connect(
    address: str | None = None,
    num_cpus: int | None = None,
    hosts: dict[str, int] | None = None,
    labels: dict[str, str] | None = None,
) -> None:
    """Join the Ray cluster at ``address``, or start a local instance when ``None``.

    A local instance is one node that hosts ``hosts`` (kind -> slots) and
    carries ``labels``, so a suite written for a cluster runs unchanged on one
    machine. Does nothing when this process is already connected.

    Raises:
        CrabrayError: Ray could not start or the address could not be reached.
    """
    global _started_here
    if ray.is_initialized():
        return
    os.environ.setdefault("RAY_DEDUP_LOGS", "0")
    # Ray's task events feed its dashboard's task views; crabray records its episodes
    # itself. Reporting them costs CPU at every actor call, and the driver's last
    # flush 0.25 s of every disconnect. A local instance's processes inherit this.
    os.environ.setdefault(TASK_EVENTS_VAR, "0")
    kwargs: dict[str, Any] = {
        "include_dashboard": False,
        "log_to_driver": False,
        "logging_level": logging.ERROR,
    }
    if address is None:
        # "local" always starts a new instance; without it Ray would join any
        # cluster someone started on this machine (/tmp/ray/ray_current_cluster).
        kwargs["address"] = "local"
        kwargs["num_cpus"] = num_cpus or os.cpu_count() or 1
        kwargs["resources"] = node_resources(hosts or {})
        kwargs["labels"] = node_labels(hosts or {}, labels)
    else:
        _check_reachable(address)
        _check_node_here(address)
        use_token_auth(address)
        kwargs["address"] = address
    # ray.init replaces the driver's SIGTERM handler by one that exits with status 15
    # and Ray's crash dump: the caller's (crabray run stops cleanly, exit 143) is kept.
    on_sigterm = _sigterm_handler()
    try:
        ray.init(**kwargs)
    except Exception as exc:
        where = f"the Ray cluster at {address}" if address else "a local Ray instance"
        hint = " (is `ray start --head` running there?)" if address else ""
        raise CrabrayError(f"cannot connect to {where}{hint}: {exc}") from exc
    finally:
        if on_sigterm is not None:
            signal.signal(signal.SIGTERM, on_sigterm)
    context = ray.get_runtime_context()
    _started_here = context.get_node_id() if address is None else None
    logger.debug("connected to Ray: %s", context.gcs_address)


def _sigterm_handler() -> Any:
    """This process's SIGTERM handler, if it can be set again from here (the main thread)."""
    if threading.current_thread() is not threading.main_thread():
        return None
    return signal.getsignal(signal.SIGTERM)


def _check_reachable(address: str) -> None:
    """Fail fast when a ``host:port`` address has nothing listening.

    Ray itself retries an unreachable cluster for minutes; a user who mistyped
    the address should hear so at once. Other address forms (``auto``,
    ``ray://...``) are left to Ray.

    Raises:
        CrabrayError: Nothing accepts connections at ``address``.
    """
    host, sep, port = address.rpartition(":")
    if not sep or not port.isdigit() or "://" in address:
        return
    try:
        with socket.create_connection((host, int(port)), timeout=_CONNECT_TIMEOUT_SEC):
            pass
    except OSError as exc:
        raise CrabrayError(
            f"cannot connect to the Ray cluster at {address}: nothing answers there ({exc}); "
            "start one with `ray start --head` or `crabray` without --address for a local one"
        ) from exc


def _check_node_here(address: str) -> None:
    """Fail fast when this machine runs no node of the cluster at a ``host:port`` address.

    A Ray driver joins a cluster through a node on its own machine: from a
    laptop that is no node (a port forwarded to the head, say), ``ray.init``
    waits a minute and fails with a misleading message. Such a machine
    submits the run as a Ray job instead. Nodes are found as Ray finds them:
    the ``raylet`` processes of this machine and the GCS address each serves.

    Raises:
        CrabrayError: No raylet here serves the cluster at ``address``.
    """
    host, sep, port = address.rpartition(":")
    if not sep or not port.isdigit() or "://" in address or not Path("/proc").is_dir():
        return
    for gcs in _local_raylet_gcs_addresses():
        gcs_host, _, gcs_port = gcs.rpartition(":")
        if gcs_port == port and _same_machine_address(host, gcs_host):
            return
    raise CrabrayError(
        f"this machine runs no node of the Ray cluster at {address}, and a Ray driver joins a "
        "cluster only from one of its nodes. From another machine, submit the run as a Ray job "
        "to the head's dashboard: crabray run SUITE --agent NAME --address http://HEAD:8265 "
        "(see cluster/README.md)"
    )


def _local_raylet_gcs_addresses() -> set[str]:
    """The GCS addresses (``--gcs-address=``) of the raylet processes on this machine.

    Only raylets in this process's network namespace count: a node in a
    container on this machine is another machine to Ray.
    """
    found = set()
    here = os.readlink("/proc/self/ns/net")
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            argv = (proc / "cmdline").read_bytes().split(b"\0")
            if os.readlink(proc / "ns" / "net") != here:
                continue
        except OSError:
            continue
        if not argv or Path(argv[0].decode(errors="replace")).name != "raylet":
            continue
        for arg in argv:
            if arg.startswith(b"--gcs-address="):
                found.add(arg.split(b"=", 1)[1].decode(errors="replace"))
    return found


def _same_machine_address(given: str, served: str) -> bool:
    """Whether two host names reach the same machine: equal, or both addresses of this one."""
    try:
        given_ip, served_ip = socket.gethostbyname(given), socket.gethostbyname(served)
    except OSError:
        return given == served
    return given_ip == served_ip or (_is_local_ip(given_ip) and _is_local_ip(served_ip))


def _is_local_ip(ip: str) -> bool:
    """Whether ``ip`` belongs to this machine: a socket can bind to it."""
    try:
        with socket.socket() as sock:
            sock.bind((ip, 0))
    except OSError:
        return False
    return True


def is_local_instance() -> bool:
    """Whether this process is connected to a local instance it started: one node, this host."""
    return ray.is_initialized() and ray.get_runtime_context().get_node_id() == _started_here


def disconnect() -> None:
    """Leave Ray (stopping the local instance if this process started it).

    Call it once the results are on disk: Ray's own exit handler would do the
    same, after half a second of sleep to let worker logs print (crabray's
    workers do not print to the driver).
    """
    global _started_here
    if ray.is_initialized():
        if is_local_instance():
            _kill_autoscaler_monitor()
        ray.shutdown()
    _started_here = None


_MONITOR_SCRIPT = "autoscaler/_private/monitor.py"
"""The script of Ray's autoscaler monitor, which a local instance starts beside its GCS."""


def _kill_autoscaler_monitor() -> None:
    """Kill the autoscaler monitor of the local instance this process started.

    ``ray.shutdown`` stops the GCS first, then sends the monitor SIGTERM, on
    which the monitor tries to report its end to the stopped GCS and hangs
    until ``ray.shutdown`` kills it a second later. A one-node instance has
    nothing to scale, so the monitor is killed first; Ray has no option for a
    local instance without it. The monitor is found as a child of this process
    running Ray's monitor script: if a Ray release moves it, nothing is killed
    and the shutdown takes its second again.
    """
    if not Path("/proc").is_dir():
        return
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            stat = (proc / "stat").read_text()
            argv = (proc / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        parent = int(stat[stat.rindex(")") + 2 :].split()[1])
        if parent == os.getpid() and any(
            arg.decode(errors="replace").endswith(_MONITOR_SCRIPT) for arg in argv
        ):
            try:
                os.kill(int(proc.name), signal.SIGKILL)
            except ProcessLookupError:
                continue
            logger.debug("killed Ray's autoscaler monitor, pid %s", proc.name)


def remote_cause(exc: BaseException) -> BaseException:
    """The exception a remote task or actor method raised, without Ray's wrapper.

    Ray re-raises a remote exception as a ``RayTaskError`` whose text carries the
    remote stack trace; users and result rows want the original error and its
    message (a ``ConfigError`` naming a file, say). Other errors come back as is.
    """
    cause = getattr(exc, "cause", None)
    if isinstance(exc, ray.exceptions.RayTaskError) and isinstance(cause, BaseException):
        return cause
    return exc
