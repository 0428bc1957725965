"""Starting and stopping the local Ray instance of a run (crabray.cluster.ray_runtime)."""

from __future__ import annotations

import os
import time
from pathlib import Path

import ray

from crabray.cluster.ray_runtime import connect, disconnect, is_local_instance


def children() -> dict[int, str]:
    """This process's live children: pid -> command line."""
    found = {}
    for proc in Path("/proc").iterdir():
        try:
            stat = (proc / "stat").read_text()
            cmdline = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except (OSError, NotADirectoryError):
            continue
        state, parent = stat[stat.rindex(")") + 2 :].split()[:2]
        if int(parent) == os.getpid() and state != "Z":
            found[int(proc.name)] = cmdline
    return found


def test_disconnect_stops_every_process_of_the_local_instance() -> None:
    """The autoscaler monitor, killed first so the shutdown does not wait on it, is one of them.

    If a Ray release renames the monitor's script, the first assertion says so:
    the shutdown would then wait a second for it again. Children this test process
    already had (the session's sshd, Xvfb, chat server...) are not the instance's.
    """
    before = children()
    connect(num_cpus=1, hosts={"local": 1})
    try:
        assert is_local_instance()
        started = {pid: cmd for pid, cmd in children().items() if pid not in before}
        scripts = list(started.values())
        assert any("autoscaler/_private/monitor.py" in script for script in scripts), scripts
        assert any("gcs_server" in script for script in scripts), scripts
    finally:
        disconnect()
    assert not ray.is_initialized() and not is_local_instance()
    deadline = time.monotonic() + 10
    while (left := set(started) & set(children())) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not left, [started[pid] for pid in left]
