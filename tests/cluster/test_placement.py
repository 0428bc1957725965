"""Placement on a real multi-node cluster: kinds, slots and label selectors."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from ray.cluster_utils import Cluster

from crabray.agents import agent_spec
from crabray.cluster.runtime.placement import capacity, check_hostable, hosted_kinds
from crabray.core.errors import ConfigError
from crabray.results import read_episodes
from crabray.run import RunSpec, run_suite

pytestmark = [pytest.mark.ray, pytest.mark.slow]

SUITE = textwrap.dedent(
    """
    from crabray import BenchmarkConfig, EnvironmentConfig, Task
    from crabray.actions import FILE_ACTIONS, path_exists, write_file

    ENV = EnvironmentConfig(name="box", action_space=[*FILE_ACTIONS], label_selector=SELECTOR)
    pinned = BenchmarkConfig(
        name="pinned",
        environments=[ENV],
        tasks=[
            Task(id=f"t{i}", description="write x", evaluator=path_exists(path="x"),
                 solution=[write_file(path="x", content="1")])
            for i in range(6)
        ],
    )
    """
)


def test_capacity_counts_slots_of_matching_alive_nodes(two_workers: Cluster) -> None:
    assert hosted_kinds() == {"local": 4}
    assert capacity("local") == 4
    assert capacity("local", {"family": "b"}) == 2
    assert capacity("docker") == 0
    check_hostable([("local", (("family", "a"),))])
    with pytest.raises(ConfigError, match=r"kind 'docker'.*the cluster hosts: local=4"):
        check_hostable([("docker", ())])
    with pytest.raises(ConfigError, match=r"'local' with labels \{'family': 'c'\}"):
        check_hostable([("local", (("family", "c"),))])


def test_a_label_selector_pins_every_episode_to_matching_nodes(
    two_workers: Cluster, tmp_path: Path
) -> None:
    suite = tmp_path / "pinned.py"
    suite.write_text(SUITE.replace("SELECTOR", repr({"family": "b"})))
    summary = run_suite(
        RunSpec.of(suite=str(suite), out_dir=tmp_path, concurrency=4), [agent_spec("oracle")]
    )
    assert summary.successes == 6
    family_b = {
        n.node_id[:8] for n in two_workers.list_all_nodes() if n is not two_workers.head_node
    }
    episodes = read_episodes(tmp_path)
    ran_on = {node.split("/")[-1] for node in episodes.node}
    assert len(ran_on) == 1, f"all on the one family=b node, got {ran_on}"
    assert ran_on <= family_b
    labels = {n["NodeID"][:8]: n["Labels"].get("family") for n in __import__("ray").nodes()}
    assert {labels[node] for node in ran_on} == {"b"}


SPANNING = textwrap.dedent(
    """
    import networkx as nx
    from crabray import BenchmarkConfig, EnvironmentConfig, Task
    from crabray.actions import FILE_ACTIONS, file_contains, write_file

    LEFT = EnvironmentConfig(name="left", host_kind="alpha", action_space=[*FILE_ACTIONS])
    RIGHT = EnvironmentConfig(name="right", host_kind="beta", action_space=[*FILE_ACTIONS])
    graph = nx.DiGraph()
    graph.add_edge(
        file_contains(path="a.txt", text="from left").on("left"),
        file_contains(path="b.txt", text="from right").on("right"),
    )
    spanning = BenchmarkConfig(
        name="spanning",
        environments=[LEFT, RIGHT],
        tasks=[
            Task(
                id="both",
                description="write a.txt on left and b.txt on right",
                environments=["left", "right"],
                evaluator=graph,
                solution=[
                    write_file(path="a.txt", content="from left").on("left"),
                    write_file(path="b.txt", content="from right").on("right"),
                ],
            )
        ],
    )
    """
)


def test_one_episode_drives_environments_on_two_nodes(tmp_path: Path) -> None:
    import ray

    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1})
    alpha = cluster.add_node(num_cpus=1, resources={"crabray_alpha": 1})
    cluster.add_node(num_cpus=1, resources={"crabray_beta": 1})
    cluster.wait_for_nodes()
    ray.init(address=cluster.address, log_to_driver=False, logging_level="ERROR")
    try:
        suite = tmp_path / "spanning.py"
        suite.write_text(SPANNING)
        summary = run_suite(RunSpec.of(suite=str(suite), out_dir=tmp_path), [agent_spec("oracle")])
    finally:
        ray.shutdown()
        cluster.shutdown()
    assert summary.successes == 1
    (episode,) = read_episodes(tmp_path).to_dict("records")
    assert episode["completeness"] == 1.0, "both graph nodes passed, one per environment"
    assert episode["node"].endswith(alpha.node_id[:8]), "runs on the node of its first env"
