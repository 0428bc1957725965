"""Python suite loading (``crabray.formats``), and the shipped demo suite end to end."""

from __future__ import annotations

import textwrap
from pathlib import Path

import networkx as nx
import pytest

from crabray.agents import AgentSpec, NoopAgent, OracleAgent
from crabray.backends import create_backend
from crabray.core.errors import ConfigError, SuiteLoadError
from crabray.core.result import TerminationReason
from crabray.episode import EpisodeSettings, run_episode
from crabray.formats import (
    Suite,
    SuiteErrors,
    SuiteRef,
    available_formats,
    load_suite,
    resolve_suite,
)
from crabray.run import check_suite
from tests.conftest import ROOT

DEMO = ROOT / "tasks" / "demo"

HEADER = """\
from crabray import BenchmarkConfig, EnvironmentConfig, Task
from crabray.actions import path_exists, write_file
"""


def good_module(name: str, *task_ids: str) -> str:
    tasks = ", ".join(
        f'Task(id="{tid}", description="make {tid}", evaluator=path_exists(path="{tid}"))'
        for tid in task_ids
    )
    return HEADER + textwrap.dedent(
        f"""
        bench = BenchmarkConfig(
            name="{name}",
            environments=[EnvironmentConfig(name="box")],
            tasks=[{tasks}],
        )
        """
    )


def write(folder: Path, name: str, text: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(text)
    return path


def load(path: Path) -> Suite:
    return load_suite(resolve_suite(path))


def load_errors(path: Path) -> SuiteErrors:
    with pytest.raises(SuiteErrors) as info:
        load(path)
    return info.value


# -- resolving ------------------------------------------------------------------------------


def test_python_is_a_known_format() -> None:
    assert "python" in available_formats()


def test_resolve_detects_a_python_file(tmp_path: Path) -> None:
    path = write(tmp_path, "suite.py", good_module("b", "t1"))
    ref = resolve_suite(path)
    assert ref == SuiteRef(path=str(path.resolve()), format="python")


def test_resolve_with_explicit_format(tmp_path: Path) -> None:
    path = write(tmp_path, "suite.py", good_module("b", "t1"))
    assert resolve_suite(path, format="python").format == "python"


def test_resolve_nonexistent_path_is_a_config_error(tmp_path: Path) -> None:
    missing = tmp_path / "nope.py"
    with pytest.raises(ConfigError) as info:
        resolve_suite(missing)
    assert str(info.value) == f"{missing}: no such file or folder"
    assert info.value.file == str(missing)


def test_resolve_unknown_format_is_a_config_error(tmp_path: Path) -> None:
    path = write(tmp_path, "suite.py", good_module("b", "t1"))
    with pytest.raises(ConfigError) as info:
        resolve_suite(path, format="yaml-magic")
    assert "unknown format 'yaml-magic'" in str(info.value)
    assert "python" in str(info.value)
    assert info.value.field == "--suite-format"


def test_resolve_folder_without_suite_files_is_a_config_error(tmp_path: Path) -> None:
    write(tmp_path / "empty", "notes.txt", "nothing here")
    with pytest.raises(ConfigError, match="is not a suite in any known format"):
        resolve_suite(tmp_path / "empty")


# -- loading good suites --------------------------------------------------------------------


def test_load_a_good_file(tmp_path: Path) -> None:
    path = write(tmp_path, "suite.py", good_module("bench", "t1", "t2"))
    suite = load(path)
    assert suite.name == "suite"
    assert suite.task_ids == ["t1", "t2"]
    entry = suite.entry("t1")
    assert entry.benchmark.name == "bench"
    assert entry.task.id == "t1"
    assert entry.task.description == "make t1"


def test_load_a_folder_with_two_modules(tmp_path: Path) -> None:
    folder = tmp_path / "mysuite"
    write(folder, "alpha.py", good_module("alpha", "a1", "a2"))
    write(folder, "beta.py", good_module("beta", "b1"))
    write(folder, "_helpers.py", "raise RuntimeError('private modules are not imported')\n")
    suite = load(folder)
    assert suite.name == "mysuite"
    assert suite.task_ids == ["a1", "a2", "b1"]
    assert suite.entry("b1").benchmark.name == "beta"


def test_sibling_modules_can_be_imported(tmp_path: Path) -> None:
    folder = tmp_path / "withlib"
    write(folder, "_shared_lib_x7.py", "TASK_ID = 'shared'\n")
    write(
        folder,
        "main.py",
        good_module("b", "t1").replace(
            "from crabray.actions", "from _shared_lib_x7 import TASK_ID\nfrom crabray.actions"
        )
        + "assert TASK_ID == 'shared'\n",
    )
    assert load(folder).task_ids == ["t1"]


def test_unknown_task_id_is_a_config_error(tmp_path: Path) -> None:
    suite = load(write(tmp_path, "suite.py", good_module("b", "t1")))
    with pytest.raises(ConfigError, match="no task 'zz' in suite 'suite'"):
        suite.entry("zz")


# -- loading bad suites ---------------------------------------------------------------------


def test_module_raising_at_import_names_file_line_and_exception(tmp_path: Path) -> None:
    path = write(tmp_path, "boom.py", "x = 1\n\nraise RuntimeError('kaboom: missing data')\n")
    errors = load_errors(path)
    assert len(errors.errors) == 1
    assert isinstance(errors.errors[0], SuiteLoadError)
    message = str(errors)
    assert f"{path}:3" in message
    assert "RuntimeError: kaboom: missing data" in message


def test_error_inside_a_helper_points_at_the_module_line(tmp_path: Path) -> None:
    text = "def helper():\n    return {}['missing']\n\n\nvalue = helper()\n"
    path = write(tmp_path, "helper.py", text)
    message = str(load_errors(path))
    assert f"{path}:2" in message
    assert "KeyError" in message


def test_syntax_error_names_the_file(tmp_path: Path) -> None:
    path = write(tmp_path, "broken.py", "def oops(:\n")
    message = str(load_errors(path))
    assert str(path) in message
    assert "SyntaxError" in message


def test_invalid_benchmark_names_file_and_field_path(tmp_path: Path) -> None:
    text = HEADER + textwrap.dedent(
        """
        bench = BenchmarkConfig(
            name="b",
            environments=[EnvironmentConfig(name="box")],
            tasks=[{"id": "t", "description": "d", "evaluator": 42}],
        )
        """
    )
    path = write(tmp_path, "badbench.py", text)
    errors = load_errors(path)
    message = str(errors.errors[0])
    assert message.startswith(f"{path}:")
    assert "BenchmarkConfig.tasks.0.evaluator" in message
    assert "must be an evaluator" in message
    assert "not int" in message


def test_invalid_task_names_file_line_and_field(tmp_path: Path) -> None:
    text = HEADER + textwrap.dedent(
        """
        t = Task(
            id="t",
            description="d",
            evaluator=path_exists(path="x"),
            setup=[write_file],
        )
        """
    )
    path = write(tmp_path, "badtask.py", text)
    message = str(load_errors(path).errors[0])
    assert message.startswith(f"{path}:4:")  # the line of `t = Task(`
    assert "Task.setup" in message
    assert "item 0 ('write_file') needs arguments ['path', 'content']" in message
    assert "Value error" not in message


def test_benchmark_level_error_reads_cleanly(tmp_path: Path) -> None:
    text = HEADER + textwrap.dedent(
        """
        t = Task(id="t", description="d", evaluator=path_exists(path="x"))
        box = EnvironmentConfig(name="box")
        bench = BenchmarkConfig(name="b", environments=[box], tasks=[t, t])
        """
    )
    path = write(tmp_path, "dups.py", text)
    message = str(load_errors(path).errors[0])
    assert f"{path}:" in message
    assert "BenchmarkConfig: duplicate task ids: t" in message


def test_all_errors_of_several_bad_modules_are_reported_together(tmp_path: Path) -> None:
    folder = tmp_path / "many"
    boom = write(folder, "a_boom.py", "raise ValueError('first problem')\n")
    bad = write(folder, "b_bad.py", HEADER + "t = Task(id='t', description='d', evaluator=3)\n")
    write(folder, "c_good.py", good_module("fine", "ok"))
    errors = load_errors(folder)
    assert len(errors.errors) == 2
    message = str(errors)
    assert "2 problems in suite" in message
    assert f"{boom}:1: ValueError: first problem" in message
    assert f"{bad}:" in message
    assert "Task.evaluator" in message
    assert errors.file == str(folder.resolve())


def test_module_without_benchmark_is_an_error(tmp_path: Path) -> None:
    path = write(tmp_path, "empty.py", HEADER + "X = 1\n")
    errors = load_errors(path)
    assert "defines no BenchmarkConfig at module level" in str(errors)
    assert str(path) in str(errors)


def test_task_ids_two_benchmarks_share_are_qualified_by_benchmark_name(tmp_path: Path) -> None:
    folder = tmp_path / "dups"
    write(folder, "one.py", good_module("one", "shared", "x"))
    write(folder, "two.py", good_module("two", "y", "shared"))
    suite = load(folder)
    assert suite.task_ids == ["one/shared", "x", "y", "two/shared"]
    assert suite.entry("two/shared").benchmark.name == "two"
    assert suite.entry("two/shared").task.id == "two/shared"
    assert suite.entry("one/shared").task.description == "make shared"


def test_same_task_id_in_two_benchmarks_of_one_name_is_an_error(tmp_path: Path) -> None:
    folder = tmp_path / "dups"
    write(folder, "one.py", good_module("same", "shared"))
    second = write(folder, "two.py", good_module("same", "shared"))
    message = str(load_errors(folder))
    assert "task id 'shared' is declared twice by benchmarks named 'same'" in message
    assert str(second) in message


# -- the shipped demo suite -----------------------------------------------------------------


def demo_suite() -> Suite:
    return load(DEMO)


DEMO_IDS = demo_suite().task_ids


def test_demo_suite_loads_with_enough_tasks_each_with_a_solution() -> None:
    suite = demo_suite()
    assert len(suite.task_ids) >= 10
    for entry in suite.entries.values():
        assert entry.task.solution, f"task {entry.task.id} has no solution"


def test_demo_suite_covers_the_authoring_features() -> None:
    tasks = [entry.task for entry in demo_suite().entries.values()]
    combined = [t.id for t in tasks if any(n.name.startswith(("(", "~")) for n in t.evaluators)]
    graphs = [t.id for t in tasks if t.evaluator.graph.number_of_nodes() >= 3]
    non_chains = [
        t.id
        for t in tasks
        if any(t.evaluator.graph.in_degree(n) > 1 for n in t.evaluator.graph.nodes)
    ]
    submits = [t.id for t in tasks if t.requires_submit]
    multi = [t.id for t in tasks if len(t.environments) >= 2]
    assert combined, "no task uses a combined evaluator"
    assert graphs, "no task has an evaluator graph of 3 or more nodes"
    assert non_chains, "no task has a graph node with two predecessors"
    assert submits, "no task waits for a submission"
    assert multi, "no task spans two environments"
    for t in tasks:
        assert nx.is_directed_acyclic_graph(t.evaluator.graph)


def run_demo(task_id: str, agent_kind: str, sandbox_root: Path) -> TerminationReason | bool:
    entry = demo_suite().entry(task_id)
    backends = {}
    try:
        for env in entry.benchmark.task_environments(entry.task):
            config = env.model_copy(update={"backend_settings": {"root_dir": str(sandbox_root)}})
            backend = create_backend(config)
            backends[env.name] = backend
            backend.start()
        spec = AgentSpec(name=agent_kind, kind=agent_kind)
        agent = OracleAgent(spec) if agent_kind == "oracle" else NoopAgent(spec)
        record = run_episode(
            entry.benchmark,
            entry.task,
            agent,
            backends,
            EpisodeSettings(run_id="demo", suite="demo", agent=agent_kind),
        )
    finally:
        for backend in backends.values():
            backend.close()
    result = record.result
    assert result.error is None or agent_kind == "noop", result.error
    return result.success


@pytest.mark.parametrize("task_id", DEMO_IDS)
def test_demo_task_oracle_succeeds(task_id: str, tmp_path: Path) -> None:
    assert run_demo(task_id, "oracle", tmp_path) is True


@pytest.mark.parametrize("task_id", DEMO_IDS)
def test_demo_task_noop_fails(task_id: str, tmp_path: Path) -> None:
    assert run_demo(task_id, "noop", tmp_path) is False


def test_checking_a_suite_reports_backend_settings_its_sandboxes_would_refuse(
    tmp_path: Path,
) -> None:
    text = good_module("bench", "t1").replace(
        'EnvironmentConfig(name="box")',
        'EnvironmentConfig(name="box", backend="docker", backend_settings={"imag": "x"})',
    )
    path = write(tmp_path, "suite.py", text)
    with pytest.raises(SuiteErrors) as caught:
        check_suite(load(path))
    (error,) = caught.value.errors
    assert (error.file, error.field) == (str(path), "environments[box].backend_settings.imag")
    assert "did you mean 'image'?" in error.reason
