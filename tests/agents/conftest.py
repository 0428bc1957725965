"""Fixtures of the agent tests: a fake chat-completions server, specs, demo episodes."""

from __future__ import annotations

import json
import shutil
import tempfile
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from crabray.agents import AgentConfig, AgentSpec, create_agent
from crabray.backends import Backend, create_backend
from crabray.core.result import EpisodeRecord
from crabray.episode import EpisodeSettings, run_episode
from crabray.formats import Suite, load_suite, resolve_suite
from tests.agents.fake_server import FakeChatServer
from tests.conftest import ROOT

KEY_ENV = "CRABRAY_TEST_API_KEY"
SECRET = "sk-test-very-secret-4b1d"

SpecMaker = Callable[..., AgentSpec]
EpisodeRunner = Callable[..., EpisodeRecord]

HELLO_SUITE = textwrap.dedent(
    """
    from crabray import BenchmarkConfig, EnvironmentConfig, Task
    from crabray.actions import FILE_ACTIONS, SHELL_ACTIONS, file_contains

    BOX = EnvironmentConfig(name="box", action_space=ACTION_SPACE)
    bench = BenchmarkConfig(
        name="mini",
        environments=[BOX],
        tasks=[
            Task(
                id="hello",
                description="Write hi to hello.txt",
                evaluator=file_contains(path="hello.txt", text="hi"),
            )
        ],
    )
    """
)


def write_hello_suite(folder: Path, actions: str = "FILE_ACTIONS") -> Path:
    """A suite file of one task, 'hello': write hi to hello.txt, with ``actions`` (Python)."""
    suite = folder / "suite.py"
    suite.write_text(HELLO_SUITE.replace("ACTION_SPACE", actions))
    return suite


def write_agents_file(folder: Path, **table: str | int | float) -> Path:
    """An agents file of one ``[[agents]]`` table with ``table``'s fields."""
    config = folder / "agents.toml"
    lines = [f"{name} = {json.dumps(value)}" for name, value in table.items()]
    config.write_text("\n".join(["[[agents]]", *lines, ""]))
    return config


@pytest.fixture
def server() -> Iterator[FakeChatServer]:
    with FakeChatServer() as fake:
        yield fake


@pytest.fixture
def api_key(monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv(KEY_ENV, SECRET)
    return SECRET


@pytest.fixture
def make_spec(server: FakeChatServer, api_key: str, tmp_path: Path) -> SpecMaker:
    """An agent spec pointing at the fake server, as an agents file would build it."""

    def make(kind: str = "openai", name: str = "llm", **fields: Any) -> AgentSpec:
        fields.setdefault("model", "fake-model")
        fields.setdefault("base_url", server.base_url)
        fields.setdefault("key_env", KEY_ENV)
        fields.setdefault("retries", 0)
        config = AgentConfig(name=name, kind=kind, **fields)  # type: ignore[arg-type]
        return config.to_spec(tmp_path / "agents.toml")

    return make


@pytest.fixture(scope="session")
def demo() -> Suite:
    return load_suite(resolve_suite(ROOT / "tasks" / "demo"))


@pytest.fixture
def run_demo(demo: Suite, tmp_path: Path) -> Iterator[EpisodeRunner]:
    """Run one demo task in-process on fresh local sandboxes with an agent built from a spec."""
    started: list[Backend] = []

    def go(task_id: str, spec: AgentSpec, **settings: Any) -> EpisodeRecord:
        entry = demo.entry(task_id)
        backends = {}
        for env in entry.benchmark.task_environments(entry.task):
            local = env.model_copy(update={"backend_settings": {"root_dir": str(tmp_path)}})
            backend = create_backend(local)
            backend.start()
            started.append(backend)
            backends[env.name] = backend
        settings.setdefault("max_tokens", spec.max_tokens)
        settings.setdefault("max_cost_usd", spec.max_cost_usd)
        return run_episode(
            entry.benchmark,
            entry.task,
            create_agent(spec),
            backends,
            EpisodeSettings(
                run_id="run-1", suite="demo", agent=spec.name, model=spec.model, **settings
            ),
        )

    yield go
    for backend in started:
        backend.close()


@pytest.fixture
def private_ray(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """A private Ray temp dir: without one, ``ray.init()`` attaches to any cluster another
    process on this machine started. Short, because Ray's socket paths must stay short."""
    ray_tmp = tempfile.mkdtemp(prefix="crt", dir="/tmp")
    monkeypatch.setenv("RAY_TMPDIR", ray_tmp)
    yield
    shutil.rmtree(ray_tmp, ignore_errors=True)
