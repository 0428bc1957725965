"""A missing optional extra is named once, with the command that installs it into this crabray.

From a source checkout (what ``scripts/setup.sh`` makes: ``pip install -e``) the
command is the checkout's, ``.venv/bin/pip install -e '.[docker]'``; ``pip install
'crabray[docker]'`` would fail there, since no package index serves crabray.
``tests/test_wheel.py`` checks the other side: a wheel install is told ``pip install
'crabray[docker]'``.

The Docker SDK is installed in the development environment; these tests run the
``crabray`` command in a process where it cannot be imported (``sys.modules['docker']
= None``, Python's own way to make a module unimportable), as in an install without
the ``docker`` extra.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from crabray.core.install import extra_install_command, source_install
from tests.conftest import ROOT

WITHOUT_DOCKER = (
    "import sys\n"
    "sys.modules['docker'] = None\n"
    "from crabray.cli import main_entry\n"
    "sys.argv[0] = 'crabray'\n"
    "main_entry()\n"
)
CHECKOUT_COMMAND = ".venv/bin/pip install -e '.[docker]'"


def _without_docker(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    """``crabray ARGS`` run in ``cwd`` by this checkout's interpreter, without the Docker SDK."""
    env = {**os.environ, "COLUMNS": "200", "NO_COLOR": "1"}
    command = [sys.executable, "-c", WITHOUT_DOCKER, *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=300, cwd=cwd, env=env)


@pytest.fixture(autouse=True)
def _a_checkout() -> None:
    if Path(sys.executable).parent != ROOT / ".venv" / "bin":
        pytest.skip(f"runs from the checkout's .venv (bash scripts/setup.sh), not {sys.executable}")


@pytest.mark.parametrize("limit", [[], ["--limit", "1"]])
def test_validate_names_a_missing_extra_once_with_the_checkouts_command(limit: list[str]) -> None:
    """Six tasks with a docker environment each: one line, whatever ``--limit`` says."""
    done = _without_docker("tasks", "validate", "tasks/task_folder_demo", *limit)
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    assert done.stderr.count("needs the missing package 'docker'") == 1, done.stderr
    assert f"install it with: {CHECKOUT_COMMAND}" in done.stderr
    assert "pip install 'crabray[docker]'" not in done.stderr
    assert "5 other environments of the suite need it too" in done.stderr
    assert "1 problem" in done.stderr


def test_two_environments_needing_one_package_are_one_problem() -> None:
    done = _without_docker("tasks", "validate", "tasks/docker_demo")
    assert done.returncode == 2, done.stderr
    assert done.stderr.count("needs the missing package 'docker'") == 1, done.stderr
    assert "1 other environment of the suite needs it too" in done.stderr
    assert CHECKOUT_COMMAND in done.stderr


def test_every_extras_hint_comes_from_one_rule(tmp_path: Path) -> None:
    """The envs command's hint is the backends': the checkout's command, from elsewhere too."""
    done = _without_docker("envs", "prune")
    assert done.returncode == 2 and CHECKOUT_COMMAND in done.stderr, done.stderr
    elsewhere = _without_docker("envs", "prune", cwd=tmp_path)
    assert f"{ROOT}/.venv/bin/pip install -e '{ROOT}[docker]'" in elsewhere.stderr


def test_the_rule_reads_how_crabray_was_installed(monkeypatch: pytest.MonkeyPatch) -> None:
    source = source_install()
    assert source is not None and source.folder == ROOT and source.editable
    monkeypatch.chdir(ROOT)
    assert extra_install_command("site") == ".venv/bin/pip install -e '.[site]'"
