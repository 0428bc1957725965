"""The built distribution as a user gets it: sdist and wheel, a core install in a clean venv.

The sdist and wheel are built (PyPA's ``build``) from a copy of the sources, so
nothing is written into the checkout; the wheel goes into a fresh virtual
environment outside the source tree without extras, and runs there: the demo
suite (shipped in the sdist) succeeds, and every feature whose optional extra
is missing fails with a configuration error naming that extra.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tarfile
import textwrap
import tomllib
from pathlib import Path

import pytest

from crabray.results import read_episodes
from tests.conftest import ROOT

pytestmark = [pytest.mark.ray, pytest.mark.slow]

SOURCES = ["crabray", "pyproject.toml", "README.md", "LICENSE", "MANIFEST.in", "tasks/demo"]
"""What a build reads: the package, its metadata, and what MANIFEST.in adds to the sdist."""

VERSION = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]


def _run(
    command: list[str | Path], cwd: Path, timeout: float = 600
) -> subprocess.CompletedProcess[str]:
    """``command`` in a user's environment: none of this checkout's venv or import path."""
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("PYTHONPATH", "VIRTUAL_ENV", "RAY_ADDRESS", "PYTHONSAFEPATH")
    }
    return subprocess.run(
        [str(part) for part in command],
        cwd=cwd,
        env={**env, "COLUMNS": "200", "NO_COLOR": "1"},
        capture_output=True,
        text=True,
        timeout=timeout,
    )


@pytest.fixture(scope="session")
def dist(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The sdist and the wheel built from it, in one folder."""
    src = tmp_path_factory.mktemp("src")
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    for name in SOURCES:
        if (ROOT / name).is_dir():
            shutil.copytree(ROOT / name, src / name, ignore=ignore)
        else:
            (src / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, src / name)
    out = tmp_path_factory.mktemp("dist")
    built = _run([sys.executable, "-m", "build", "--outdir", out, src], cwd=src)
    assert built.returncode == 0, built.stdout[-3000:] + built.stderr[-3000:]
    return out


@pytest.fixture(scope="session")
def core_venv(dist: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A clean venv with the wheel installed, no extras; its bin folder."""
    venv = tmp_path_factory.mktemp("venv")
    made = _run([sys.executable, "-m", "venv", "--clear", venv], cwd=venv)
    assert made.returncode == 0, made.stderr
    (wheel,) = dist.glob("crabray-*.whl")
    pip = [venv / "bin" / "python", "-m", "pip", "install", "--quiet"]
    installed = _run([*pip, "--disable-pip-version-check", wheel], cwd=venv)
    assert installed.returncode == 0, installed.stderr[-3000:]
    return venv / "bin"


@pytest.fixture(scope="session")
def unpacked_sdist(dist: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    (sdist,) = dist.glob("crabray-*.tar.gz")
    where = tmp_path_factory.mktemp("sdist")
    with tarfile.open(sdist) as archive:
        archive.extractall(where, filter="data")
    return where / f"crabray-{VERSION}"


def test_the_core_install_leaves_the_extras_out(core_venv: Path) -> None:
    probe = textwrap.dedent(
        """
        import importlib.util, crabray
        print(crabray.__file__)
        print(crabray.__version__)
        for name in ("ray", "pyarrow", "pydantic", "docker", "paramiko", "matplotlib"):
            print(name, importlib.util.find_spec(name) is not None)
        """
    )
    done = _run([core_venv / "python", "-c", probe], cwd=core_venv)
    assert done.returncode == 0, done.stderr
    where, version, *found = done.stdout.splitlines()
    assert Path(where).is_relative_to(core_venv.parent), "crabray comes from the venv"
    assert version == VERSION
    assert found == [
        "ray True",
        "pyarrow True",
        "pydantic True",
        "docker False",
        "paramiko False",
        "matplotlib False",
    ]
    shown = _run([core_venv / "crabray", "--version"], cwd=core_venv)
    assert VERSION in shown.stdout


@pytest.fixture(scope="session")
def demo_results(core_venv: Path, unpacked_sdist: Path) -> Path:
    """The demo suite run from the unpacked sdist by the installed command."""
    out = unpacked_sdist.parent / "results"
    done = _run(
        [core_venv / "crabray", "run", "tasks/demo", "--agent", "oracle", "--out", out],
        cwd=unpacked_sdist,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return out


def test_the_installed_wheel_runs_the_demo_shipped_in_the_sdist(demo_results: Path) -> None:
    episodes = read_episodes(demo_results)
    assert len(episodes) == 11
    assert episodes.success.all(), episodes[["task_id", "success"]]


OPTIONAL_SUITE = """
from crabray import BenchmarkConfig, EnvironmentConfig, Task
from crabray.actions import SHELL_ACTIONS, path_exists

suite = BenchmarkConfig(
    name="optional",
    environments=[EnvironmentConfig(name="box", backend="{kind}", action_space=SHELL_ACTIONS)],
    tasks=[Task(id="touch", description="Create /tmp/x.", evaluator=path_exists(path="/tmp/x"))],
    default_env="box",
)
"""


@pytest.mark.parametrize("kind", ["docker", "ssh", "vm"])
def test_a_backend_without_its_extra_names_the_extra(
    core_venv: Path, tmp_path: Path, kind: str
) -> None:
    (tmp_path / "suite").mkdir()
    (tmp_path / "suite" / "optional.py").write_text(OPTIONAL_SUITE.replace("{kind}", kind))
    done = _run(
        [core_venv / "crabray", "run", "suite", "--agent", "oracle", "--out", "out"], cwd=tmp_path
    )
    assert done.returncode == 2, done.stdout + done.stderr
    assert f"pip install 'crabray[{kind}]'" in done.stderr
    assert "Traceback" not in done.stderr
    assert not (tmp_path / "out").exists(), "nothing was started"


def test_docker_commands_and_the_site_without_their_extras_name_them(
    core_venv: Path, demo_results: Path
) -> None:
    pruned = _run([core_venv / "crabray", "envs", "prune"], cwd=demo_results.parent)
    assert pruned.returncode == 2, pruned.stdout + pruned.stderr
    assert "pip install 'crabray[docker]'" in pruned.stderr
    site = demo_results.parent / "site"
    built = _run(
        [core_venv / "crabray", "leaderboard", demo_results, "--html", site],
        cwd=demo_results.parent,
    )
    assert built.returncode == 2, built.stdout + built.stderr
    assert "pip install 'crabray[site]'" in built.stderr
    assert "Traceback" not in built.stderr
    assert "leaderboard" not in built.stdout, "it fails before showing anything"
    assert not (site / "index.html").exists()
