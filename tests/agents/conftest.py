"""Fixtures of the agent tests: a fake chat-completions server, specs, demo episodes."""

from __future__ import annotations

import shutil
import tempfile
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
