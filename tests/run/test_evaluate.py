"""``crabray.evaluate``: a run from Python, as ``crabray run`` makes it, on a real local Ray."""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest
from pydantic import ValidationError

import crabray
from crabray.agents import AgentSpec
from crabray.core.errors import ConfigError
from crabray.results import read_episodes
from tests.backends.conftest import require_kind
from tests.conftest import ROOT

DEMO = ROOT / "tasks" / "demo"


@pytest.mark.ray
@pytest.mark.slow
def test_evaluate_runs_a_suite_and_writes_its_rows(tmp_path: Path) -> None:
    out = tmp_path / "out"
    summary = crabray.evaluate(
        DEMO,
        ["oracle", AgentSpec(name="idle", kind="noop")],
        crabray.RunSpec.of(out_dir=out, task_ids=["hello-file", "count-lines"], concurrency=1),
    )
    episodes = read_episodes(out)
    assert summary.planned == summary.ran == len(episodes) == 4
    assert summary.out_dir == str(out), "the summary is a handle to the run's rows"
    assert summary.episodes().equals(read_episodes(out, summary.run_id))
    assert summary.table(["agent", "success"]).num_rows == 4
    assert set(summary.steps(["episode_id"]).episode_id) <= set(episodes.episode_id)
    assert summary.successes == 2
    assert episodes.groupby("agent")["success"].sum().to_dict() == {"oracle": 2, "idle": 0}
    assert set(episodes.run_id) == {summary.run_id}

    agents = ["oracle", AgentSpec(name="idle", kind="noop")]
    again = crabray.evaluate(
        DEMO,
        agents,
        crabray.RunSpec.of(
            out_dir=out, task_ids=["hello-file", "count-lines"], resume=summary.run_id
        ),
    )
    assert again.run_id == summary.run_id
    assert again.skipped == 4 and again.ran == 0


def test_evaluate_refuses_a_job_api_address_with_the_command_that_submits() -> None:
    with pytest.raises(ConfigError, match=r"crabray run .* --address http://head:8265"):
        crabray.evaluate(DEMO, ["oracle"], crabray.RunSpec.of(address="http://head:8265"))


def test_evaluate_names_an_unknown_setting() -> None:
    with pytest.raises(ConfigError, match="concurency: Extra inputs are not permitted"):
        crabray.RunSpec.of(concurency=2)
    with pytest.raises(ValidationError, match="concurency"):
        crabray.RunSpec(concurency=2)  # type: ignore[call-arg]


def test_a_run_spec_is_one_description_by_concern() -> None:
    """Issue 38: flat keys (a run file's, the flags') land in their part, typed; the results
    root is parsed once; a field set is told apart from a default, so an override sets only
    what it was given."""
    from crabray.results.store.root import ResultsRoot

    spec = crabray.RunSpec.of(
        suite="tasks/demo", agents=["oracle"], concurrency=4, max_steps=3, out_dir="s3://b/r"
    )
    assert spec.execution.concurrency == 4
    assert spec.limits.max_steps == 3 and spec.limits.episode.max_steps == 3
    assert spec.results.out_dir == ResultsRoot("s3://b/r") and spec.results.out_dir.is_store
    assert spec.what.suite == "tasks/demo" and spec.agents.names == ["oracle"]
    assert spec.given() == {"suite", "agents", "concurrency", "max_steps", "out_dir"}
    merged = spec.updated(crabray.RunSpec.of(concurrency=None, epochs=2))
    assert (merged.execution.concurrency, merged.what.epochs) == (4, 2)
    assert crabray.RunSpec.model_validate(spec.model_dump()) == spec, "it round-trips"


def test_evaluate_names_an_unknown_agent() -> None:
    with pytest.raises(ConfigError, match="unknown agent 'gpt-9'"):
        crabray.evaluate(DEMO, ["gpt-9"])


def _readme_notes() -> str:
    """The README's "A small benchmark": ``notes.py``, as a user saves it."""
    readme = (ROOT / "README.md").read_text()
    found = re.search(r'```python title="notes.py"\n(.*?)```', readme, re.S)
    assert found, "README.md has no notes.py"
    return found.group(1)


@pytest.fixture
def notes(tmp_path: Path) -> Iterator[ModuleType]:
    """``notes.py`` imported as a user imports it (``from notes import bench``)."""
    (tmp_path / "notes.py").write_text(_readme_notes())
    name = f"notes_{tmp_path.name}"
    spec = importlib.util.spec_from_file_location(name, tmp_path / "notes.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    yield module
    del sys.modules[name]


@pytest.mark.ray
@pytest.mark.slow
def test_evaluate_runs_a_benchmark_object(tmp_path: Path, notes: ModuleType) -> None:
    """Issue 39: ``crabray.evaluate(bench, ["oracle"])`` with a benchmark object, as Inspect
    users pass a task, said ``OSError: File name too long``. It runs the benchmark from the
    file that defines it, which is what every worker loads."""
    require_kind("local-bwrap")
    out = tmp_path / "out"
    summary = crabray.evaluate(notes.bench, ["oracle", "noop"], crabray.RunSpec.of(out_dir=out))
    episodes = read_episodes(out)
    assert summary.planned == summary.ran == len(episodes) == 2
    assert episodes.set_index("agent")["success"].to_dict() == {"oracle": True, "noop": False}
    assert set(episodes.task_id) == {"shopping"}


def test_evaluate_says_where_a_benchmark_object_must_live(tmp_path: Path) -> None:
    """A benchmark no file binds at module level cannot be loaded by a worker: the error
    says so and what to do, before anything starts."""
    from crabray import BenchmarkConfig, EnvironmentConfig, Task
    from crabray.actions import path_exists, write_file

    made_here = BenchmarkConfig(
        name="made-here",
        environments=[EnvironmentConfig(name="box", action_space=[write_file])],
        tasks=[Task(id="t", description="d", evaluator=path_exists(path="x"))],
    )
    with pytest.raises(ConfigError, match="bind it at module level") as caught:
        crabray.evaluate(made_here, ["oracle"], crabray.RunSpec.of(out_dir=tmp_path / "out"))
    assert "made-here" in str(caught.value)
    assert not (tmp_path / "out").exists()


def test_evaluate_called_as_a_file_is_imported_says_to_guard_it(tmp_path: Path) -> None:
    """A script that calls ``crabray.evaluate(bench, ...)`` unguarded would run again in
    every process that loads it as the suite: refused at once, saying how to guard it."""
    script = tmp_path / "notes.py"
    script.write_text(_readme_notes() + "\nimport crabray\ncrabray.evaluate(bench, ['oracle'])\n")
    done = subprocess.run(
        [sys.executable, str(script)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert done.returncode != 0, done.stdout + done.stderr
    assert "if __name__ == '__main__':" in done.stderr, done.stderr
    assert not (tmp_path / "results").exists(), "nothing ran"
