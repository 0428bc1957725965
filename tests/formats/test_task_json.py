"""Loading task-JSON suites: layout, index files, validation errors, the scorer seam, summaries."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path
from typing import Any

import pytest

from crabray.agents.base import AgentSpec
from crabray.agents.scripted import NoopAgent, OracleAgent
from crabray.backends import create_backend
from crabray.core import BenchmarkConfig, EnvironmentConfig, Task, action
from crabray.core.errors import ConfigError
from crabray.core.result import TerminationReason
from crabray.episode import EpisodeSettings, run_episode
from crabray.formats import SuiteErrors, load_suite, resolve_suite
from crabray.formats.task_json import summary_path
from crabray.run import check_suite
from tests.conftest import ROOT, crabray

DEMO = ROOT / "tasks" / "task_json_demo"
DEMO_IDS = 10


def write_task(
    root: Path,
    doc: dict[str, Any] | str,
    tool: str = "tool",
    task_id: str = "t1",
    files: dict[str, str] | None = None,
) -> Path:
    folder = root / "examples" / tool / task_id
    folder.mkdir(parents=True, exist_ok=True)
    file = folder / f"{task_id}.json"
    file.write_text(doc if isinstance(doc, str) else json.dumps({"id": task_id, **doc}))
    for name, content in (files or {}).items():
        (folder / name).write_text(content)
    return file


GOOD = {
    "instruction": "Write hello into out.txt.",
    "evaluation": {
        "func": "compare_text_file",
        "arguments": {"local_expected": "gold.txt", "vm_result": "out.txt"},
    },
}


def problems(path: Path, **kwargs: Any) -> list[ConfigError]:
    with pytest.raises(SuiteErrors) as caught:
        load_suite(resolve_suite(path, **kwargs))
    return caught.value.errors


def only(path: Path, **kwargs: Any) -> ConfigError:
    errors = problems(path, **kwargs)
    assert len(errors) == 1, [str(e) for e in errors]
    return errors[0]


# Loading ------------------------------------------------------------------------------------


def test_demo_suite_loads_and_validates() -> None:
    ref = resolve_suite(DEMO)
    assert (ref.format, ref.backend, ref.index) == ("task-json", "local", None)
    suite = load_suite(ref)
    check_suite(suite)
    assert len(suite.entries) == DEMO_IDS
    entry = suite.entry("1c7a2d3f-6b52-4e8f-8a1b-2d3e4f5a6b02")
    task = entry.task
    assert task.max_steps == 5
    assert task.metadata["reviewed_by"] == "demo-author"
    assert task.metadata["counterpart"] == "1c7a2d3f-6b52-4e8f-8a1b-2d3e4f5a6b99"
    assert task.metadata["tool"] == "text"
    assert task.scorer is not None and task.scorer.name == "compare_text_file"
    assert [a.name for a in task.setup] == ["download_file"]
    assert [e.name for e in entry.benchmark.task_environments(task)] == ["workstation"]
    assert entry.benchmark.task_environments(task)[0].backend == "local"


def test_index_selects_tasks_and_backend_is_passed_on(tmp_path: Path) -> None:
    ref = resolve_suite(DEMO, index="test_small.json", backend="docker")
    assert ref.index == str(DEMO / "test_small.json")
    suite = load_suite(ref)
    assert sorted(suite.entries) == sorted(
        json.loads((DEMO / "test_small.json").read_text())["data"]
        + json.loads((DEMO / "test_small.json").read_text())["legacy"]
    )
    assert suite.ref == ref
    for entry in suite.entries.values():
        assert {e.backend for e in entry.benchmark.environments} == {"docker"}
    as_path = load_suite(resolve_suite(DEMO / "test_small.json"))
    assert sorted(as_path.entries) == sorted(suite.entries)


def test_index_naming_a_missing_task(tmp_path: Path) -> None:
    write_task(tmp_path, GOOD, files={"gold.txt": "hello"})
    index = tmp_path / "idx.json"
    index.write_text(json.dumps({"tool": ["t1", "t9"]}))
    error = only(tmp_path, index=index)
    assert (error.file, error.field) == (str(index.resolve()), "tool.1")
    index.write_text("[1, 2]")
    assert "must map each tool" in only(tmp_path, index=index).reason


def test_index_is_refused_for_python_suites(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="--index"):
        resolve_suite(ROOT / "tasks" / "demo", index=DEMO / "test_small.json")
    with pytest.raises(ConfigError, match="--backend-setting"):
        resolve_suite(DEMO, backend_settings={"image": "x"})  # task-JSON has snapshots.toml


# Malformed suites ---------------------------------------------------------------------------


def test_bad_json_names_the_file_and_line(tmp_path: Path) -> None:
    file = write_task(tmp_path, '{"id": "t1", "instruction": ')
    error = only(tmp_path)
    assert error.file == str(file)
    assert "is not valid JSON" in error.reason and "line 1" in error.reason


def test_missing_instruction_names_the_field(tmp_path: Path) -> None:
    file = write_task(tmp_path, {"evaluation": GOOD["evaluation"]}, files={"gold.txt": "x"})
    error = only(tmp_path)
    assert (error.file, error.field, error.reason) == (str(file), "instruction", "Field required")


def test_unknown_function_lists_known_names(tmp_path: Path) -> None:
    doc = {**GOOD, "evaluation": {"func": "compare_vibes", "arguments": {}}}
    file = write_task(tmp_path, doc)
    error = only(tmp_path)
    assert (error.file, error.field) == (str(file), "evaluation.func")
    assert "unknown evaluation function 'compare_vibes'" in error.reason
    assert "compare_csv" in error.reason and "compare_notebook_outputs" in error.reason


def test_every_problem_of_a_task_is_reported(tmp_path: Path) -> None:
    doc = {
        **GOOD,
        "action_number": 0,
        "config": [
            {
                "func": "upload_file_to_vm",
                "arguments": {"local_path": "../../x", "remote_path": "y"},
            },
            {"func": "teleport"},
            {"func": "sleep", "arguments": {"seconds": "soon"}},
            {"what": 1},
        ],
        "evaluation": {"func": "compare_text_file", "arguments": {"vm_result": "o", "colour": 1}},
    }
    file = write_task(tmp_path, doc)
    errors = problems(tmp_path)
    assert {e.file for e in errors} == {str(file)}
    fields = {e.field: e.reason for e in errors}
    assert "greater than 0" in fields["action_number"]
    assert "leaves the task folder" in fields["config.0.arguments.local_path"]
    assert "unknown setup function 'teleport'" in fields["config.1.func"]
    assert "valid number" in fields["config.2.arguments.seconds"]
    assert '"func"' in fields["config.3"]
    assert "takes no such argument" in fields["evaluation.arguments.colour"]


def test_missing_local_file_id_mismatch_and_no_evaluation(tmp_path: Path) -> None:
    write_task(tmp_path, {**GOOD, "id": "other"}, task_id="t1")
    fields = {e.field: e.reason for e in problems(tmp_path)}
    assert "does not match the file name" in fields["id"]
    assert "no file 'gold.txt'" in fields["evaluation.arguments.local_expected"]
    write_task(tmp_path, {"instruction": "x"}, task_id="t1")
    assert "exactly one of" in only(tmp_path).reason


def test_unknown_solution_action(tmp_path: Path) -> None:
    doc = {
        **GOOD,
        "solution": [
            {"action": "hack", "arguments": {}},
            {"action": "write_file", "arguments": {"path": "x"}},
        ],
    }
    write_task(tmp_path, doc, files={"gold.txt": "hello"})
    fields = {e.field: e.reason for e in problems(tmp_path)}
    assert "unknown action 'hack'" in fields["solution.0.action"]
    assert "content" in fields["solution.1.arguments"]


def test_older_variant_problems_name_fields(tmp_path: Path) -> None:
    doc = {
        "instruction": "x",
        "config": [{"type": "execute", "parameters": {"command": "true"}}],
        "evaluator": {
            "func": "compare_vibes",
            "result": {"type": "vm_file", "path": "a"},
            "postconfig": [{"type": "nap", "parameters": {}}],
        },
    }
    file = write_task(tmp_path, doc)
    fields = {e.field: e.reason for e in problems(tmp_path)}
    assert set(fields) == {"evaluator.func", "evaluator.postconfig.0.type"}
    assert all(e.file == str(file) for e in problems(tmp_path))


def test_suite_functions_register_beside_the_tasks(tmp_path: Path) -> None:
    (tmp_path / "functions.py").write_text(
        textwrap.dedent(
            """
        from crabray.formats.task_json import evaluation_function

        @evaluation_function
        def always_half_for_tests(ctx) -> float:
            return 0.5
        """
        )
    )
    write_task(tmp_path, {"instruction": "x", "evaluation": {"func": "always_half_for_tests"}})
    suite = load_suite(resolve_suite(tmp_path))
    assert suite.entry("t1").task.scorer.name == "always_half_for_tests"


def test_suite_function_cannot_take_a_shipped_name(tmp_path: Path) -> None:
    (tmp_path / "functions.py").write_text(
        textwrap.dedent(
            """
        from crabray.formats.task_json import evaluation_function

        @evaluation_function
        def compare_csv(ctx) -> float:
            return 1.0
        """
        )
    )
    write_task(tmp_path, {"instruction": "x", "evaluation": {"func": "infeasible"}})
    error = only(tmp_path)
    assert "already registered" in error.reason and "functions.py" in str(error)


def test_cli_validate_reports_file_and_field(tmp_path: Path) -> None:
    file = write_task(tmp_path, {"evaluation": {"func": "nope"}})
    done = crabray("tasks", "validate", str(tmp_path))
    assert done.returncode == 2
    assert f"{file}: instruction: Field required" in done.stderr
    assert f"{file}: evaluation.func: unknown evaluation function 'nope'" in done.stderr


# The scoring seam ---------------------------------------------------------------------------


@action
def give(value: float) -> float:
    """Return a value.

    Args:
        value: It.
    """
    return value


@action
def explode() -> float:
    """Raise."""
    raise RuntimeError("kaboom")


@action
def broken_setup() -> None:
    """Raise during setup."""
    raise RuntimeError("no")


def run_scored(tmp_path: Path, scorer: Any, setup: list | None = None, agent: type = NoopAgent):
    env = EnvironmentConfig(name="box", backend_settings={"root_dir": str(tmp_path)})
    task = Task(
        id="t", description="d", scorer=scorer, setup=setup or [], solution=[give(value=0.0)]
    )
    benchmark = BenchmarkConfig(
        name="b", tasks=[task], environments=[env], root_action_space=[give]
    )
    backend = create_backend(env)
    backend.start()
    try:
        record = run_episode(
            benchmark,
            task,
            agent(AgentSpec(name="a", kind=agent.kind)),
            {"box": backend},
            EpisodeSettings(run_id="r", suite="s", agent="a"),
        )
    finally:
        backend.close()
    return record.result


def test_fractional_scores_come_from_the_scorer(tmp_path: Path) -> None:
    result = run_scored(tmp_path, give(value=0.25))
    assert (result.score, result.success, result.completeness) == (0.25, False, 0.25)
    assert result.termination_reason is TerminationReason.AGENT_COMPLETE
    full = run_scored(tmp_path, give(value=1.0))
    assert (full.score, full.success) == (1.0, True)


def test_a_raising_scorer_scores_zero_with_the_error(tmp_path: Path) -> None:
    result = run_scored(tmp_path, explode)
    assert result.score == 0.0 and not result.success
    assert result.termination_reason is TerminationReason.EVALUATOR_ERROR
    # A plain function: it ran inside the sandbox, and its traceback came back from there.
    assert result.error.startswith("evaluation 'explode': action 'explode' raised RuntimeError")
    assert 'raise RuntimeError("kaboom")' in result.error
    out_of_range = run_scored(tmp_path, give(value=1.5))
    assert out_of_range.termination_reason is TerminationReason.EVALUATOR_ERROR
    assert "not a score in [0, 1]" in out_of_range.error


def test_scorer_is_skipped_after_a_setup_error(tmp_path: Path) -> None:
    result = run_scored(tmp_path, give(value=1.0), setup=[broken_setup])
    assert result.termination_reason is TerminationReason.SETUP_ERROR
    assert result.score == 0.0


def test_a_task_needs_an_evaluator_or_a_scorer() -> None:
    with pytest.raises(ValueError, match="evaluator"):
        Task(id="t", description="d")
    with pytest.raises(ValueError, match="needs arguments"):
        Task(id="t", description="d", scorer=give)


# Episodes of the demo suite in-process, and their summary.json ------------------------------


def run_demo(tmp_path: Path, task_id: str, agent: type):
    suite = load_suite(resolve_suite(DEMO))
    entry = suite.entry(task_id)
    env = entry.benchmark.task_environments(entry.task)[0]
    backend = create_backend(
        env.model_copy(update={"backend_settings": {"root_dir": str(tmp_path)}})
    )
    backend.start()
    try:
        record = run_episode(
            entry.benchmark,
            entry.task,
            agent(AgentSpec(name=agent.kind, kind=agent.kind)),
            {env.name: backend},
            EpisodeSettings(run_id="run1", suite="s", agent=agent.kind),
        )
    finally:
        backend.close()
    return suite, entry, record


def test_summary_json_holds_task_fields_and_results(tmp_path: Path) -> None:
    task_id = "6bcf7c8e-b0a7-4d3e-9f60-7c8d9eafb007"
    suite, entry, record = run_demo(tmp_path, task_id, OracleAgent)
    assert record.result.score == 1.0
    files = suite.record_files(entry, record)
    assert (
        list(files) == [f"summaries/run1/oracle/{task_id}/summary.json"] == [summary_path(record)]
    )
    summary = json.loads(files[summary_path(record)])
    raw = json.loads((DEMO / "examples" / "legacy" / task_id / f"{task_id}.json").read_text())
    assert {k: summary[k] for k in raw} == raw
    results = summary["results"]
    assert results["score"] == 1.0 and results["eval_error"] is None
    assert results["state"] == "success"
    assert results["total_tokens"] == 0 and results["total_timing"] > 0
    actions = [m["action"] for m in results["messages"] if m["role"] == "tool"]
    assert actions == ["write_file", "write_file", "complete"]


def test_infeasible_demo_task(tmp_path: Path) -> None:
    task_id = "8de19eaf-d2c9-4f50-9b82-9eafb0c1d209"
    _, _, oracle = run_demo(tmp_path, task_id, OracleAgent)
    assert (oracle.result.score, oracle.result.termination_reason.value) == (1.0, "agent_fail")
    suite, entry, noop = run_demo(tmp_path, task_id, NoopAgent)
    assert noop.result.score == 0.0
    summary = json.loads(next(iter(suite.record_files(entry, noop).values())))
    assert summary["results"]["state"] == "success" and summary["results"]["score"] == 0.0
