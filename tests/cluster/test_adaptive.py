"""``--concurrency auto``: the controller's rules, and real runs on real Ray.

The controller is pure (observations in, a level out): its rules are tested
with synthetic observations. The runs use real Ray instances and real
confined local sandboxes.
"""

from __future__ import annotations

import itertools
import os
import re
import textwrap
import threading
from pathlib import Path
from typing import Any

import pytest
import ray
from ray.cluster_utils import Cluster

from crabray import backends
from crabray.agents import agent_spec
from crabray.backends import LocalBackend, register_backend
from crabray.cluster.actors.episode_call import reaches_its_worker
from crabray.cluster.actors.sandbox import SandboxSpec
from crabray.cluster.runtime.placement import actor_options, capacity, sandbox_memory_mb
from crabray.cluster.sweep.adaptive import (
    ControllerSettings,
    KindObservation,
    LevelController,
    host_memory_used,
)
from crabray.cluster.sweep.progress import SweepProgress
from crabray.core.environment import EnvironmentConfig
from crabray.core.errors import ConfigError
from crabray.results import read_episodes
from crabray.results.store.runs import read_manifest
from crabray.run import RunSpec, run_suite
from crabray.run.resume import resume_spec
from tests.conftest import ROOT, crabray, serve_mock_llm

MiB = 1024 * 1024


def busy(ceiling: int, in_flight: int, **seen: float | int | None) -> KindObservation:
    return KindObservation.model_validate({"ceiling": ceiling, "in_flight": in_flight, **seen})


def test_it_ramps_up_one_level_per_full_observation_up_to_the_ceiling() -> None:
    control = LevelController(ControllerSettings(start=2))
    levels = [control.observe("local", busy(5, control.level("local"))) for _ in range(6)]
    assert levels == [3, 4, 5, 5, 5, 5]


def test_it_does_not_ramp_while_the_level_is_not_used_or_the_host_is_busy() -> None:
    control = LevelController(ControllerSettings(start=2))
    assert control.observe("local", busy(8, 1)) == 2  # one in flight of two allowed
    assert control.observe("local", busy(8, 2, memory_used=0.8)) == 2  # memory not to spare
    assert control.observe("local", busy(8, 2, cpu_used=0.95)) == 2  # CPU not to spare
    assert control.observe("local", busy(8, 2, memory_used=0.5, cpu_used=0.5)) == 3


def test_start_failures_halve_the_level_and_hold_it() -> None:
    control = LevelController(ControllerSettings(start=8, hold_after_backoff=2))
    assert control.observe("docker", busy(16, 8, start_failures=1)) == 4
    assert control.observe("docker", busy(16, 4)) == 4  # held
    assert control.observe("docker", busy(16, 4)) == 4  # held
    assert control.observe("docker", busy(16, 4)) == 5


def test_memory_pressure_halves_the_level_never_below_1() -> None:
    control = LevelController(ControllerSettings(start=4))
    levels = [control.observe("vm", busy(8, 4, memory_used=0.9)) for _ in range(4)]
    assert levels == [2, 1, 1, 1]


def test_start_latency_well_past_a_lower_levels_steps_down() -> None:
    control = LevelController(ControllerSettings(start=2, hold_after_backoff=0))
    assert control.observe("docker", busy(8, 2, start_latency_sec=1.0)) == 3
    assert control.observe("docker", busy(8, 3, start_latency_sec=1.2)) == 4
    assert control.observe("docker", busy(8, 4, start_latency_sec=3.0)) == 3


def test_a_model_queueing_calls_holds_every_level_until_it_drains() -> None:
    """Sandboxes added while the model's limiter queues calls would only wait for the
    model: the level holds (it does not fall: the episodes in flight keep the model busy)."""
    control = LevelController(ControllerSettings(start=2))
    assert control.observe("local", busy(8, 2, model_queued=True)) == 2
    assert control.observe("local", busy(8, 2, model_queued=True)) == 2
    assert control.observe("docker", busy(8, 2, model_queued=True)) == 2
    assert control.observe("local", busy(8, 2)) == 3
    progress = SweepProgress(total=9, in_flight=2, level=2, ceiling=12, held_by_models=True)
    assert progress.in_flight_line() == "in flight 2 (auto, max 2 of 12, held: model queues)"


def test_each_kind_has_its_own_level() -> None:
    control = LevelController(ControllerSettings(start=2))
    for _ in range(3):
        control.observe("docker", busy(10, control.level("docker"), start_failures=1))
        control.observe("local", busy(10, control.level("local")))
    assert (control.level("docker"), control.level("local")) == (1, 5)


def test_the_ceiling_bounds_the_level_when_it_shrinks() -> None:
    control = LevelController(ControllerSettings(start=6))
    assert control.observe("local", busy(3, 3)) == 3
    assert control.observe("local", busy(0, 0)) == 1  # no slot now: never below 1


def test_the_progress_line_shows_the_level() -> None:
    progress = SweepProgress(total=9, in_flight=6, level=8, ceiling=12)
    assert progress.in_flight_line() == "in flight 6 (auto, max 8 of 12)"
    assert SweepProgress(total=9, in_flight=2).in_flight_line() == ""


def test_a_sandbox_asks_ray_for_its_backends_memory() -> None:
    assert sandbox_memory_mb("local", {}) == 256
    assert sandbox_memory_mb("local", {"memory_mb": 700}) == 700
    assert sandbox_memory_mb("docker", {}) == 1024
    assert sandbox_memory_mb("docker", {"memory_mb": None}) == 1024
    assert sandbox_memory_mb("vm", {"memory_mb": 2048}) == 2048
    assert sandbox_memory_mb("ssh", {"memory_mb": 2048}) == 0
    assert actor_options("local", {}, 300)["memory"] == 300 * MiB
    assert "memory" not in actor_options("local", {})
    assert 0 < host_memory_used() < 1


def test_a_new_backend_states_its_placement_facts_on_its_own_class(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The memory a sandbox takes on its node, and whether it can reach its episode's
    worker, are read from the backend's class: a new kind touches only its own package."""
    monkeypatch.setattr(backends, "_BACKENDS", backends._BACKENDS.copy())

    @register_backend
    class RoomyBackend(LocalBackend):
        kind = "roomy"
        default_memory_mb = 3000

        @classmethod
        def reaches_worker(cls, settings: dict[str, Any]) -> bool:
            return bool(settings.get("shares_the_worker"))

    @register_backend
    class FarBackend(LocalBackend):
        kind = "far"
        uses_node_memory = False

    assert sandbox_memory_mb("roomy", {}) == 3000
    assert sandbox_memory_mb("roomy", {"memory_mb": 700}) == 700
    assert sandbox_memory_mb("far", {"memory_mb": 700}) == 0
    roomy = EnvironmentConfig(name="r", backend="roomy", backend_settings={})
    assert reaches_its_worker(SandboxSpec.of(roomy)) is False
    shared = roomy.model_copy(update={"backend_settings": {"shares_the_worker": True}})
    assert reaches_its_worker(SandboxSpec.of(shared)) is True
    unconfined = EnvironmentConfig(name="u", backend_settings={"isolation": "none"})
    assert reaches_its_worker(SandboxSpec.of(unconfined)) is True
    assert reaches_its_worker(SandboxSpec.of(EnvironmentConfig(name="c"))) is False


SUITE = textwrap.dedent(
    """
    from crabray import BenchmarkConfig, EnvironmentConfig, Task
    from crabray.actions import FILE_ACTIONS, path_exists, write_file

    ENV = EnvironmentConfig(name="box", action_space=[*FILE_ACTIONS], backend_settings=SETTINGS)
    heavy = BenchmarkConfig(
        name="heavy",
        environments=[ENV],
        tasks=[
            Task(id=f"t{i}", description="write x", evaluator=path_exists(path="x"),
                 solution=[write_file(path="x", content="1")])
            for i in range(8)
        ],
    )
    """
)


@pytest.mark.ray
@pytest.mark.slow
def test_memory_as_a_resource_keeps_sandboxes_within_a_nodes_memory(tmp_path: Path) -> None:
    """A node with 4 slots and 1 GiB for Ray, sandboxes of 600 MiB: one at a time, where
    the level (2 from the start) alone would place two."""
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1})
    cluster.add_node(
        num_cpus=2,
        memory=1024 * MiB,
        resources={"crabray_local": 4},
        labels={"crabray-local": "yes"},
    )
    cluster.wait_for_nodes()
    ray.init(address=cluster.address, log_to_driver=False, logging_level="ERROR")
    placed: list[float] = []
    done = threading.Event()

    def watch() -> None:
        """Record how much of Ray's memory resource the placed actors hold."""
        while not done.is_set():
            total = ray.cluster_resources().get("memory", 0.0)
            placed.append(total - ray.available_resources().get("memory", 0.0))
            done.wait(0.05)

    watcher = threading.Thread(target=watch)
    try:
        assert capacity("local") == 4
        assert capacity("local", None, 600) == 1
        suite = tmp_path / "heavy.py"
        suite.write_text(SUITE.replace("SETTINGS", repr({"memory_mb": 600})))
        watcher.start()
        summary = run_suite(
            RunSpec.of(
                suite=str(suite),
                out_dir=tmp_path,
                concurrency="auto",
                address=cluster.address,
            ),
            [agent_spec("oracle")],
        )
        done.set()
        watcher.join()
        too_big = tmp_path / "too_big.py"
        too_big.write_text(SUITE.replace("SETTINGS", repr({"memory_mb": 2000})))
        with pytest.raises(ConfigError, match=r"2000 MiB of Ray's memory resource"):
            run_suite(
                RunSpec.of(
                    suite=str(too_big),
                    out_dir=tmp_path / "big",
                    concurrency="auto",
                    address=cluster.address,
                ),
                [agent_spec("oracle")],
            )
    finally:
        done.set()
        if watcher.is_alive():
            watcher.join()
        ray.shutdown()
        cluster.shutdown()
    assert summary.successes == 8
    assert len(read_episodes(tmp_path)) == 8
    assert max(placed) == 600 * MiB, placed  # one sandbox's memory held, never two


@pytest.mark.ray
@pytest.mark.slow
def test_an_auto_run_records_every_episode_shows_its_level_and_a_resume_keeps_auto(
    tmp_path: Path,
) -> None:
    out = tmp_path / "out"
    run_file = tmp_path / "run.toml"
    run_file.write_text(
        f'suite = "{Path("tasks/demo").resolve()}"\nagents = ["oracle", "noop"]\n'
        f'concurrency = "auto"\nout_dir = "{out}"\n'
    )
    done = crabray("run", "--config", str(run_file))
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    episodes = read_episodes(out)
    assert len(episodes) == 22
    assert episodes.groupby("agent")["success"].sum().to_dict() == {"oracle": 11, "noop": 0}
    # Off a terminal, a line per episode, with the level of auto now.
    line = r"episodes \d+/22, \d+ ok, in flight \d+ \(auto, max \d+ of \d+\)"
    assert re.search(line, done.stderr)
    (run_id,) = set(episodes.run_id)
    assert read_manifest(out, run_id).options["concurrency"] == "auto"
    resumed = resume_spec(RunSpec.of(resume=run_id, out_dir=out))
    assert resumed.execution.concurrency == "auto"
    again = crabray("run", "--resume", run_id, "--out", str(out))
    assert again.returncode == 0, again.stderr
    assert len(read_episodes(out)) == 22


@pytest.mark.parametrize("value", ["0", "fast", "-3"])
def test_a_bad_concurrency_is_a_usage_error_naming_the_option(value: str) -> None:
    done = crabray("run", "tasks/demo", "--agent", "oracle", "--concurrency", value)
    assert done.returncode == 2
    assert "--concurrency" in done.stderr and "auto" in done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.ray
@pytest.mark.slow
def test_a_probe_on_each_node_reads_its_memory_by_the_kinds_it_hosts() -> None:
    from crabray.cluster.sweep.node_load import NodeLoad

    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1})
    cluster.add_node(num_cpus=1, resources={"crabray_local": 2})
    cluster.add_node(num_cpus=1, resources={"crabray_docker": 1})
    cluster.wait_for_nodes()
    ray.init(address=cluster.address, log_to_driver=False, logging_level="ERROR")
    try:
        load = NodeLoad(every_sec=0.0)
        for _ in range(600):  # until both probes answered: a wait, never a time assertion
            load.poll()
            if None not in (load.worst("local")[0], load.worst("docker")[0]):
                break
            threading.Event().wait(0.1)
        for kind in ("local", "docker"):
            memory, cpu = load.worst(kind)
            assert memory is not None and 0 < memory < 1
            assert cpu is not None and cpu >= 0
        assert load.worst("vm") == (None, None)
    finally:
        ray.shutdown()
        cluster.shutdown()


MODEL_AGENT = """
[[agents]]
name = "limited"
kind = "openai"
model = "crabray-mock"
base_url = "{url}"
{limits}
"""


def auto_run_against_the_mock(tmp_path: Path, limits: str) -> tuple[str, list[tuple[int, bool]]]:
    """``crabray run --concurrency auto`` of 8 LLM episodes against the mock (1 s a call);
    the run's stderr, and each progress line's level and whether a model queue held it."""
    env = {**os.environ, "COLUMNS": "200", "NO_COLOR": "1"}
    tmp_path.mkdir()
    with serve_mock_llm("tasks/demo", ROOT, env, tmp_path / "serve.log", ("--latency", "1")) as url:
        agents = tmp_path / "agents.toml"
        agents.write_text(MODEL_AGENT.format(url=url, limits=limits))
        run = crabray(
            "run", "tasks/demo", "--agent-config", str(agents), "--agent", "limited",
            "--task", "deploy-config", "--epochs", "8", "--concurrency", "auto",
            "--max-attempts", "1", "--out", str(tmp_path / "out"), timeout=600,
        )  # fmt: skip
    assert run.returncode == 0, run.stdout + run.stderr
    episodes = read_episodes(tmp_path / "out")
    assert (episodes["termination_reason"] == "success").all(), episodes["error"].tolist()
    shown = re.findall(r"\(auto, max (\d+) of \d+(, held: model queues)?\)", run.stderr)
    assert shown, run.stderr
    return run.stderr, [(int(level), bool(held)) for level, held in shown]


@pytest.mark.ray
@pytest.mark.slow
def test_auto_holds_its_level_while_the_models_limiter_queues_calls(tmp_path: Path) -> None:
    """One call at a time for the model (its limiter, not adaptive): the episodes' calls
    queue, so no line that says a model held the level shows it higher than the line
    before (it may have risen before the first call queued, while the hosts had room),
    and the progress says why. The same run with a limiter that never queues: no line
    says a model held the level."""
    stderr, shown = auto_run_against_the_mock(
        tmp_path / "queued", "max_connections = 1\nadaptive = false\nrpm = 0"
    )
    assert any(held for _, held in shown), stderr
    rises = [
        (before, level)
        for (before, _), (level, held) in itertools.pairwise(shown)
        if held and level > before
    ]
    assert rises == [], f"the level rose while the model queued: {rises}\n{stderr}"
    assert re.search(r"model crabray-mock: limit 1, 1 in flight, 1 waiting", stderr), stderr
    stderr, shown = auto_run_against_the_mock(tmp_path / "free", "rpm = 0")
    assert not any(held for _, held in shown), stderr
