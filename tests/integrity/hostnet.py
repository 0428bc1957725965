"""What the network tests share: the host's addresses, a probe run in a sandbox, a real Ray.

The agent's side of every network test is :func:`connect_from`: a ``python3``
in the sandbox that tries one TCP connection and says what happened.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from crabray.backends import Backend

REPO = Path(__file__).resolve().parents[2]


def require(missing: str | None) -> None:
    """Skip with how to get the component, or fail under CI=true."""
    if missing is None:
        return
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(missing)
    pytest.skip(missing)


def connect_from(backend: Backend, address: str, port: int) -> str:
    """What a connection from the sandbox to ``address:port`` gives: 'connected' or the error."""
    probe = textwrap.dedent(
        f"""
        import socket
        try:
            socket.create_connection(({address!r}, {port}), timeout=3).close()
            print("connected")
        except OSError as exc:
            print(type(exc).__name__, exc)
        """
    )
    done = backend.exec(["python3", "-c", probe], timeout_sec=30)
    assert done.exit_code == 0, done.stderr
    return done.stdout.strip()


def host_addresses(family: str = "-4") -> list[str]:
    """Every address of the host's interfaces of one family (``-4``, ``-6``), loopback included.

    IPv6 link-local addresses are left out: they need an interface, and a bridge's is
    unusable for a moment whenever its first container joins (duplicate address detection).
    """
    done = subprocess.run(
        ["ip", "-o", family, "addr", "show"], capture_output=True, text=True, check=True
    )
    found = [line.split()[3].split("/")[0] for line in done.stdout.splitlines()]
    return [address for address in found if not address.startswith("fe80:")]


_RAY = textwrap.dedent(
    r"""
    import json, os, re, subprocess, sys
    from crabray.cluster.runtime.ray_runtime import connect, disconnect
    connect(num_cpus=1, hosts={"local": 1})
    import ray
    ray.get(ray.remote(lambda: 1).remote())

    def descendants(root):
        # This instance's processes only: other Ray instances may run on the machine.
        children = {}
        for entry in filter(str.isdigit, os.listdir("/proc")):
            try:
                with open(f"/proc/{entry}/stat") as stat:
                    ppid = int(stat.read().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
            children.setdefault(ppid, []).append(int(entry))
        found, todo = set(), [root]
        while todo:
            for child in children.get(todo.pop(), []):
                if child not in found:
                    found.add(child)
                    todo.append(child)
        return found

    mine = descendants(os.getpid())
    listening = subprocess.run(["ss", "-ltnpH"], capture_output=True, text=True).stdout
    ports = sorted({int(line.split()[3].rsplit(":", 1)[1]) for line in listening.splitlines()
                    if re.search(r'"(gcs_server|raylet|ray::[^"]*)"', line)
                    and any(int(pid) in mine for pid in re.findall(r"pid=(\d+)", line))})
    print(json.dumps(ports), flush=True)
    sys.stdin.read()
    disconnect()
    """
)


@contextmanager
def ray_ports() -> Iterator[list[int]]:
    """A real local Ray instance, as a run starts it, while the block runs; its TCP ports."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    ray_proc = subprocess.Popen(
        [sys.executable, "-c", _RAY], stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env
    )
    try:
        assert ray_proc.stdout is not None
        ports: list[int] = json.loads(ray_proc.stdout.readline())
        assert ports, "the Ray instance listens on no port"
        yield ports
    finally:
        if ray_proc.stdin is not None:
            ray_proc.stdin.close()
        ray_proc.wait(timeout=60)
