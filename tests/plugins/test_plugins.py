"""A separate package adds a backend, an agent, a suite format and a task function.

``crabray_plugin_example`` (beside this file) declares them in crabray's
entry-point groups only; it is installed for real with pip into a temporary
folder (never into the project's venv) and put on ``sys.path`` or
``PYTHONPATH``, as a user's ``pip install`` would.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from crabray import backends
from crabray.agents import AgentSpec, agent_spec, available_agents, create_agent
from crabray.agents import registry as agent_registry
from crabray.backends import available_backends, create_backend
from crabray.episode import EpisodeSettings, run_episode
from crabray.formats import available_formats, load_suite, resolve_suite
from crabray.formats import base as format_base
from crabray.formats.task_json import _registry as function_registry
from crabray.formats.task_json import lookup

PLUGIN_SOURCE = Path(__file__).parent / "crabray_plugin_example"
PLUGIN = "crabray_plugin_example"


@pytest.fixture(scope="module")
def plugin_site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The plugin installed by pip into a folder of its own (built from a copy of its source).

    pip builds it with the ``flit_core`` of the test venv (the ``dev`` extra), so
    the test needs no package index; the copy keeps build files out of ``tests/``.
    """
    work = tmp_path_factory.mktemp("plugin")
    source = work / "source"
    shutil.copytree(PLUGIN_SOURCE, source)
    site = work / "site"
    pip = [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation"]
    done = subprocess.run(
        [*pip, "--target", str(site), str(source)],
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert (site / PLUGIN / "backend.py").is_file()
    return site


@pytest.fixture
def plugin(plugin_site: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """The plugin on ``sys.path``, with crabray's registries restored afterwards."""
    monkeypatch.setattr(backends, "_BACKENDS", backends._BACKENDS.copy())
    monkeypatch.setattr(agent_registry, "_AGENTS", agent_registry._AGENTS.copy())
    monkeypatch.setattr(format_base, "_FORMATS", format_base._FORMATS.copy())
    copies = {kind: r.copy() for kind, r in function_registry._FUNCTIONS.items()}
    monkeypatch.setattr(function_registry, "_FUNCTIONS", copies)
    monkeypatch.syspath_prepend(str(plugin_site))
    yield plugin_site
    for name in [m for m in sys.modules if m == PLUGIN or m.startswith(f"{PLUGIN}.")]:
        del sys.modules[name]


def write_suite(folder: Path, text: str = "hello: Hello, plugin!\nbye: Goodbye\n") -> Path:
    suite = folder / "greetings.lines"
    suite.write_text(text)
    return suite


def test_without_the_plugin_its_names_are_unknown(tmp_path: Path) -> None:
    assert "example" not in available_backends()
    assert "example" not in available_agents()
    assert "example-lines" not in available_formats()
    assert PLUGIN not in sys.modules


def test_crabray_lists_the_plugins_parts_without_importing_them(plugin: Path) -> None:
    assert "example" in available_backends()
    assert "example" in available_agents()
    assert "example-lines" in available_formats()
    assert PLUGIN not in sys.modules


def test_crabray_creates_the_plugins_parts_and_runs_an_episode(
    plugin: Path, tmp_path: Path
) -> None:
    ref = resolve_suite(write_suite(tmp_path))
    assert (ref.format, ref.backend) == ("example-lines", "example")
    suite = load_suite(ref)
    assert suite.task_ids == ["hello", "bye"]
    entry = suite.entry("hello")
    backend = create_backend(entry.benchmark.environments[0])
    assert type(backend).__name__ == "ExampleBackend" and backend.kind == "example"
    agent = create_agent(agent_spec("example"))
    assert type(agent).__name__ == "ExampleAgent" and agent.kind == "example"
    backend.start()
    try:
        record = run_episode(
            entry.benchmark,
            entry.task,
            agent,
            {"sandbox": backend},
            EpisodeSettings(run_id="r", suite=suite.name, agent="example"),
        )
    finally:
        backend.close()
    assert record.result.success is True, record.result.error


def test_a_plugins_task_json_function_is_found_on_first_use(plugin: Path) -> None:
    function = lookup("evaluation", "example_file_is_nonempty")
    assert function.source == f"{PLUGIN}.functions.example_file_is_nonempty"
    assert list(function.parameters.model_fields) == ["vm_path"]


def test_the_plugin_agent_is_an_agent_spec_of_its_own(plugin: Path) -> None:
    assert create_agent(AgentSpec(name="mine", kind="example")).spec.name == "mine"


def cli(site: Path | None, *args: str) -> subprocess.CompletedProcess[str]:
    """The ``crabray`` command a user would type, with the plugin's folder on PYTHONPATH."""
    script = Path(sys.executable).parent / "crabray"
    command = [str(script)] if script.is_file() else [sys.executable, "-m", "crabray"]
    env = {**os.environ, "COLUMNS": "200", "NO_COLOR": "1"}
    env.pop("PYTHONPATH", None)
    if site is not None:
        env["PYTHONPATH"] = str(site)
    return subprocess.run([*command, *args], capture_output=True, text=True, timeout=120, env=env)


def test_the_cli_sees_the_plugins_format_and_backend(plugin_site: Path, tmp_path: Path) -> None:
    suite = write_suite(tmp_path)
    done = cli(plugin_site, "tasks", "validate", str(suite))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "2 tasks" in done.stdout and "are valid" in done.stdout


def test_the_cli_refuses_an_option_the_plugins_format_does_not_declare(
    plugin_site: Path, tmp_path: Path
) -> None:
    suite = write_suite(tmp_path)
    (tmp_path / "index.json").write_text("{}")
    done = cli(
        plugin_site, "tasks", "validate", str(suite), "--index", str(tmp_path / "index.json")
    )
    assert done.returncode != 0
    assert "example-lines suites take no index option" in done.stdout + done.stderr
