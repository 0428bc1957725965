"""A python suite tried on another backend: ``--backend`` and ``backend_settings`` replace
its environments' own, in the driver and in the workers that load it again."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from crabray.formats import load_suite, resolve_suite
from crabray.results import read_episodes
from tests.backends.docker.dockerd import require_env_image
from tests.conftest import ROOT, crabray

DEMO = ROOT / "tasks" / "demo"


def test_backend_and_its_settings_replace_every_environments_own() -> None:
    ref = resolve_suite(DEMO, backend="docker", backend_settings={"image": "crabray/debian:latest"})
    suite = load_suite(ref)
    envs = {
        env.name: (env.backend, env.backend_settings)
        for entry in suite.entries.values()
        for env in entry.benchmark.environments
    }
    assert envs == {
        "workstation": ("docker", {"image": "crabray/debian:latest"}),
        "server": ("docker", {"image": "crabray/debian:latest"}),
    }
    assert suite.ref == ref, "a worker loading the suite's ref gets the same environments"


def test_settings_alone_update_the_environments_own_backend() -> None:
    suite = load_suite(resolve_suite(DEMO, backend_settings={"memory_mb": 256}))
    env = suite.entry("hello-file").benchmark.environments[0]
    assert (env.backend, env.backend_settings["memory_mb"]) == ("local", 256)


@pytest.mark.ray
@pytest.mark.slow
def test_the_demo_runs_on_docker_from_a_run_file(tmp_path: Path) -> None:
    require_env_image("debian")
    config = tmp_path / "run.toml"
    config.write_text(
        f'suite = "{DEMO}"\nagents = ["oracle"]\ntask_ids = ["hello-file", "deploy-config"]\n'
        'backend = "docker"\n\n[backend_settings]\nimage = "crabray/debian:latest"\n'
    )
    out = tmp_path / "out"
    done = crabray("run", "--config", str(config), "--out", str(out), timeout=600)
    assert done.returncode == 0, f"{done.stdout}\n{done.stderr}"
    episodes = read_episodes(out)
    assert sorted(episodes.task_id) == ["deploy-config", "hello-file"]
    assert episodes.success.all()
    (manifest,) = (out / "runs").glob("*.json")
    options = json.loads(manifest.read_text())["options"]
    assert (options["backend"], options["backend_settings"]) == (
        "docker",
        {"image": "crabray/debian:latest"},
    ), "recorded, so a resume runs the rest on docker too"


def test_backend_setting_takes_key_value_pairs(tmp_path: Path) -> None:
    from crabray.cli.options import backend_settings_of

    assert backend_settings_of(["image=crabray/debian:latest", "memory_mb=512"]) == {
        "image": "crabray/debian:latest",
        "memory_mb": 512,
    }
    done = crabray(
        "run", str(DEMO), "-a", "oracle", "--backend-setting", "image", "--out", str(tmp_path)
    )
    assert done.returncode == 2
    assert "'image' is not KEY=VALUE" in done.stderr
    assert "Traceback" not in done.stderr
