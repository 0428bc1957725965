"""Node configs and the ``ray start`` command lines they become (no Ray started)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from crabray.cluster.runtime.nodes import node_config, ray_start_command
from crabray.core.errors import ConfigError
from tests.conftest import ROOT


def test_the_shipped_example_config_is_valid() -> None:
    config = node_config(None, None, ROOT / "cluster" / "node.example.toml", None)
    assert config.hosts == {"docker": 8, "vm": 2}
    assert config.labels == {"crabray-image": "ubuntu-22.04"}
    assert config.num_cpus == 16


def test_flags_override_the_file(tmp_path: Path) -> None:
    config = node_config("docker=2,local=4", "zone=b", ROOT / "cluster" / "node.example.toml", 3)
    assert config.hosts == {"docker": 2, "vm": 2, "local": 4}
    assert config.labels == {"crabray-image": "ubuntu-22.04", "zone": "b"}
    assert config.num_cpus == 3


def test_worker_command_carries_slots_and_labels() -> None:
    config = node_config("docker=8", "crabray-image=ubuntu", None, 4)
    command = ray_start_command(config, head_port=None, address="10.0.0.1:6379")
    assert "--address=10.0.0.1:6379" in command
    assert "--num-cpus=4" in command
    resources = next(c for c in command if c.startswith("--resources="))
    assert json.loads(resources.split("=", 1)[1]) == {"crabray_docker": 8.0}
    assert "--labels=crabray-docker=yes,crabray-image=ubuntu" in command
    assert "--head" not in command
    assert not any(c.startswith("--temp-dir") for c in command)


def test_workers_started_together_each_get_their_own_ray_folder(tmp_path: Path) -> None:
    """Several ``ray start`` at once on one machine race for the same socket names in a
    shared folder (``start_workers``): each is given its own."""
    config = node_config("local=2", None, None, 1)
    command = ray_start_command(
        config, head_port=None, address="127.0.0.1:6379", temp_dir=tmp_path / "0"
    )
    assert f"--temp-dir={tmp_path / '0'}" in command


@pytest.mark.parametrize(
    ("hosts", "message"),
    [
        ("docker=0", "at least 1 slot"),
        ("bad-kind=2", "sandbox kind 'bad-kind'"),
        ("docker=two", "whole numbers"),
    ],
)
def test_bad_hosts_name_the_problem(hosts: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        node_config(hosts, None, None, None)


def test_unreadable_config_names_the_file(tmp_path: Path) -> None:
    bad = tmp_path / "node.toml"
    bad.write_text("hosts = [")
    with pytest.raises(ConfigError, match=str(bad)):
        node_config(None, None, bad, None)


def test_a_port_that_answers_but_not_in_http_is_named_not_a_traceback() -> None:
    """Seen on a busy machine: the job agent's port answered with gRPC's binary frames
    while the head started; `start-head` died with http.client.BadStatusLine."""
    import socket
    import threading

    from crabray.cluster.runtime.nodes import DashboardPorts, wait_for_job_agent
    from crabray.core.errors import CrabrayError

    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()

    def answer_binary() -> None:
        while True:
            try:
                conn, _ = server.accept()
            except OSError:
                return
            conn.recv(1024)
            conn.sendall(b"\x00\x00\x12\x04\x00\x00\x00\x00\x00\xfe\x03\x00\x00\x00\x01\r\n\r\n")
            conn.close()

    threading.Thread(target=answer_binary, daemon=True).start()
    port = server.getsockname()[1]
    try:
        with pytest.raises(CrabrayError, match="answers, but not in HTTP"):
            wait_for_job_agent(DashboardPorts(dashboard=port, agent=port), timeout_sec=1)
    finally:
        server.close()
