"""CRAB composed-task datasets: the fixture ``notes/`` is written in crab-benchmark-v0's layout.

Subtask modules at the root (``SubTask`` lists, CRAB-style plain evaluators),
task JSON files below (``{"description", "tasks", "adjlist", "id"}``, chains of
two and a three-subtask DAG), plus crabray's ``solution`` field for the oracle.
One module imports a package installed nowhere (``notes_ocr_engine``), as
CRAB's modules import ``cv2``: only the task whose episode-side evaluator uses
it fails.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest

from crabray.formats import load_suite, resolve_suite
from crabray.formats.crab_dataset import load
from crabray.formats.suite import SuiteErrors
from crabray.results import read_episodes
from tests.conftest import ROOT, crabray

DATASET = ROOT / "tests" / "crab_dataset" / "notes"
WRITE = "31ddd59c-6d48-40dd-b482-b0faf11cf688"
MKDIR = "9856d6bc-522f-4e91-90ed-5a6fbb03e1b2"
COPY = "1b7b31ea-7ff3-420e-9b94-691e52fe6b47"
RUNNABLE = {
    "write-note",
    "draft-then-file",
    "note-then-submit",
    "two-dirs-then-copy",
    "save-anything",
}
NEEDS_OCR = "screen-text"


def _copy(tmp_path: Path) -> Path:
    folder = tmp_path / "notes"
    shutil.copytree(DATASET, folder, ignore=shutil.ignore_patterns("__pycache__"))
    return folder


def _task_file(folder: Path, name: str, tasks: list[dict[str, object]], adjlist: str) -> Path:
    file = folder / "tasks" / f"{name}.json"
    doc = {"description": f"Task {name}.", "tasks": tasks, "adjlist": adjlist, "id": name}
    file.write_text(json.dumps(doc, indent=4))
    return file


def test_detected_and_every_task_valid() -> None:
    ref = resolve_suite(DATASET)
    assert ref.format == "crab-dataset"
    done = crabray("tasks", "validate", str(DATASET), check=True)
    assert "6 tasks" in done.stdout
    # The task a missing module stops is valid, and said to fail with its reason.
    shown = " ".join(done.stdout.split())
    assert "! task 'screen-text' cannot run here: subtask '0e7bbbc9-" in shown
    assert "needs the Python module 'notes_ocr_engine'" in shown


def test_graphs_are_chained_from_sinks_to_sources_as_crab_does() -> None:
    """``0 2\n1 2\n2``: the sinks of subtasks 0 and 1 lead to the source of subtask 2."""
    suite = load_suite(resolve_suite(DATASET))
    dag = suite.entry("two-dirs-then-copy").task.evaluator
    inbox = "check_directory_exists(dir_path='/home/user/inbox')"
    exists = "check_file_exist(file_path='/home/user/memo.txt')"
    content = "check_file_content(file_path='/home/user/memo.txt', content='call back')"
    copied = "check_file_copied(source='/home/user/memo.txt', dir_path='/home/user/inbox')"
    assert sorted((u.label, v.label) for u, v in dag.graph.edges) == sorted(
        [(exists, content), (inbox, copied), (inbox, inbox), (content, inbox)]
    )
    assert dag.graph.number_of_nodes() == 5
    assert dag.sink.label == copied
    submit = suite.entry("note-then-submit").task
    assert [a.name for a in submit.extra_actions] == ["submit"]
    assert suite.entry("write-note").task.environments == ["ubuntu"]


def test_an_adjlist_edge_points_from_the_node_listed_first(tmp_path: Path) -> None:
    folder = _copy(tmp_path)
    first = {"task": MKDIR, "attribute": {"dir_path": "/home/user/a"}, "output": None}
    then = {"task": MKDIR, "attribute": {"dir_path": "/home/user/b"}, "output": None}
    _task_file(folder, "reversed", [first, then], "1 0\n0")
    dag = load(folder).entry("reversed").task.evaluator
    assert [(u.label, v.label) for u, v in dag.graph.edges] == [
        (
            "check_directory_exists(dir_path='/home/user/b')",
            "check_directory_exists(dir_path='/home/user/a')",
        )
    ]


def test_a_missing_optional_module_fails_only_the_task_that_uses_it_in_the_episode() -> None:
    suite = load_suite(resolve_suite(DATASET))
    refused = suite.entry(NEEDS_OCR).task
    assert [a.name for a in refused.setup] == ["missing_module"]
    (warning,) = refused.metadata["warnings"]
    assert "'notes_ocr_engine'" in warning
    assert "0e7bbbc9-9af5-4364-b701-ce038c6bcebc" in warning
    assert "vision_subtasks.py" in warning
    # The same module's other subtask never uses the package: its task is whole.
    assert suite.entry("save-anything").task.setup == []
    # The stand-in left no trace: elsewhere the import fails as usual.
    assert "notes_ocr_engine" not in sys.modules
    with pytest.raises(ModuleNotFoundError):
        __import__("notes_ocr_engine")


def test_a_part_that_runs_in_its_sandbox_takes_its_imports_there(tmp_path: Path) -> None:
    """``~screen_has_text`` runs in the episode, but its plain part runs in the sandbox."""
    folder = _copy(tmp_path)
    blank = {"task": "bbd58e57-7877-4df9-a694-dc92233491d6", "attribute": {}, "output": None}
    _task_file(folder, "blank-screen", [blank], "0")
    task = load(folder).entry("blank-screen").task
    assert task.setup == []
    assert "warnings" not in task.metadata


def test_a_benchmark_config_in_a_module_gives_environments_and_limits(tmp_path: Path) -> None:
    """As crab-benchmark-v0's main.py: a BenchmarkConfig, ``tasks=[]``, CRAB's root actions."""
    folder = _copy(tmp_path)
    (folder / "benchmark.py").write_text(
        "from crabray import BenchmarkConfig, EnvironmentConfig\n"
        "from crabray.actions import FILE_ACTIONS\n"
        "from crabray.actions.crab_actions import complete, wait\n\n"
        "ubuntu = EnvironmentConfig(name='ubuntu', backend='local', action_space=[*FILE_ACTIONS])\n"
        "benchmark = BenchmarkConfig(name='notes_benchmark', tasks=[], environments=[ubuntu],\n"
        "    root_action_space=[complete, wait], multienv=True, step_limit=7)\n"
    )
    (folder / "handmade_tasks.py").write_text(
        "from crabray import Task\n"
        "from crabray.actions import path_exists\n\n"
        "handmade_tasks = [Task(id='handmade', description='Make /tmp/x.',\n"
        "    evaluator=path_exists(path='/tmp/x'))]\n"
    )
    with pytest.raises(SuiteErrors) as caught:
        load(folder)
    suite = caught.value.partial
    assert suite is not None
    entry = suite.entry("note-then-submit")
    assert entry.benchmark.name == "notes_benchmark"
    assert entry.benchmark.step_limit_of(entry.task) == 7
    assert [a.name for a in entry.benchmark.root_action_space] == ["complete", "wait"]
    assert suite.entry("handmade").benchmark is entry.benchmark
    # The solution's run_command is not in this action space: named with file, line, field.
    done = crabray("tasks", "validate", str(folder))
    assert done.returncode == 2
    shown = " ".join((done.stdout + done.stderr).split())
    draft = folder / "tasks" / "chains" / "draft-then-file.json"
    assert f"{draft}:25: solution.1.action: no action 'run_command' in environment" in shown


def test_validate_names_file_line_field_and_reason(tmp_path: Path) -> None:
    folder = _copy(tmp_path)
    write = {"task": WRITE, "attribute": {"file_path": "/home/user/x"}, "output": None}
    unknown = {"task": "no-such-subtask", "attribute": {}, "output": None}
    mkdir = {"task": MKDIR, "attribute": {"dir_path": "/home/user/a"}, "output": None}
    _task_file(folder, "missing-attribute", [mkdir, write], "0 1\n1")
    _task_file(folder, "unknown-subtask", [unknown], "0")
    _task_file(folder, "bad-adjlist", [mkdir, mkdir], "0 5\n5")
    _task_file(folder, "left-out", [mkdir, mkdir], "0")
    (folder / "tasks" / "broken.json").write_text('{"id": "broken",\n "tasks": [}')
    done = crabray("tasks", "validate", str(folder))
    assert done.returncode == 2, done.stdout + done.stderr
    shown = " ".join((done.stdout + done.stderr).split())
    assert "Traceback" not in shown
    tasks = folder / "tasks"
    for expected in (
        f"{tasks / 'missing-attribute.json'}:13: tasks.1.attribute: missing attribute "
        f"'content' of subtask '{WRITE}'",
        f"{tasks / 'unknown-subtask.json'}:5: tasks.0.task: unknown subtask 'no-such-subtask'",
        f"{tasks / 'bad-adjlist.json'}:19: adjlist: names [5], but 'tasks' has 2 entries",
        f"{tasks / 'left-out.json'}:11: tasks.1: is not in the adjlist",
        f"{tasks / 'broken.json'}:2: is not valid JSON",
    ):
        assert " ".join(expected.split()) in shown


@pytest.mark.ray
@pytest.mark.slow
def test_oracle_passes_noop_fails_and_the_ocr_task_fails_with_its_reason(tmp_path: Path) -> None:
    out = tmp_path / "out"
    done = crabray("run", str(DATASET), "--agent", "oracle", "--agent", "noop", "--out", str(out))
    assert done.returncode == 1, done.stderr  # the OCR task is the benchmark's error here
    assert "2 benchmark errors" in done.stdout
    episodes = read_episodes(out)
    oracle = episodes[episodes.agent == "oracle"].set_index("task_id")
    noop = episodes[episodes.agent == "noop"].set_index("task_id")
    assert oracle.score.to_dict() == {**dict.fromkeys(RUNNABLE, 1.0), NEEDS_OCR: 0.0}
    assert noop.score.to_dict() == {**dict.fromkeys(RUNNABLE, 0.0), NEEDS_OCR: 0.0}
    assert set(oracle.loc[sorted(RUNNABLE)].termination_reason) == {"success"}
    for agent in (oracle, noop):
        assert agent.termination_reason[NEEDS_OCR] == "setup_error"
        assert agent.attribution[NEEDS_OCR] == "benchmark"
        assert "'notes_ocr_engine'" in agent.error[NEEDS_OCR]


def test_task_generator_builds_what_the_format_builds() -> None:
    """CRAB's ``TaskGenerator(subtasks=...).get_task_from_file`` (crab-benchmark-v0's main.py)."""
    from crabray import TaskGenerator

    suite = load_suite(resolve_suite(DATASET))
    subtasks = [s for s in _module_values(suite) if type(s).__name__ == "SubTask"]
    generator = TaskGenerator(subtasks=subtasks)
    for task_id in ("two-dirs-then-copy", "note-then-submit"):
        loaded = suite.entry(task_id).task
        built = generator.get_task_from_file(loaded.metadata["file"])
        assert built.id == task_id
        assert built.description == loaded.description
        assert sorted((u.label, v.label) for u, v in built.evaluator.graph.edges) == sorted(
            (u.label, v.label) for u, v in loaded.evaluator.graph.edges
        )
        assert [a.name for a in built.extra_actions] == [a.name for a in loaded.extra_actions]


def _module_values(suite: object) -> list[object]:
    modules = [m for name, m in sys.modules.items() if name.startswith("crabray_dataset_")]
    return [s for m in modules for v in vars(m).values() if isinstance(v, list) for s in v]


STANDINS = """
import crab_fixture_vision as cv
import crab_fixture_torch.nn as nn
from crab_fixture_linalg.sub import norm
import networkx as nx
from crabray import SubTask, evaluator


class Matcher(nn.Module):
    pass


reader = cv.Reader(["en"])


@evaluator(env_name="ubuntu")
def brighter(path: str) -> bool:
    return norm(cv.imread(path)) > 1


subtasks = [
    SubTask(
        id="bright",
        description="Brighten {path}.",
        attribute_dict={"path": "file_path"},
        output_type="None",
        evaluator_generator=lambda path: nx.path_graph([brighter(path)], create_using=nx.DiGraph),
    ),
    SubTask(
        id="normalized",
        description="Normalize {path}.",
        attribute_dict={"path": "file_path"},
        output_type="None",
        evaluator_generator=lambda path: nx.path_graph(
            [brighter(cv.normalize(path))], create_using=nx.DiGraph
        ),
    ),
]
"""


def test_stand_ins_load_the_module_and_travel_to_the_sandbox_as_imports(tmp_path: Path) -> None:
    """Module-level code using missing packages runs; a sandbox-run evaluator ships their imports,
    and on this machine any use of them afterwards names the module."""
    from crabray.backends.guest._source import function_units
    from crabray.formats.crab_dataset import MissingModuleError

    folder = tmp_path / "vision"
    (folder / "tasks").mkdir(parents=True)
    (folder / "vision_subtasks.py").write_text(STANDINS)
    use = {"task": "bright", "attribute": {"path": "/tmp/a.png"}, "output": None}
    _task_file(folder, "bright", [use], "0")
    (node,) = load(folder).entry("bright").task.evaluators
    function = node.entry.func  # bound arguments wrap the function in a partial
    shipped = "".join(text for _, _, text in function_units(function))
    assert "import crab_fixture_vision as cv\n" in shipped
    assert "from crab_fixture_linalg.sub import norm as norm\n" in shipped
    with pytest.raises(MissingModuleError, match="'crab_fixture_vision' is not installed"):
        function.__globals__["cv"].imread("/tmp/a.png")
    assert not any(name.startswith("crab_fixture_") for name in sys.modules)


def test_an_evaluator_generator_using_a_missing_module_fails_its_task_only(
    tmp_path: Path,
) -> None:
    folder = tmp_path / "vision"
    (folder / "tasks").mkdir(parents=True)
    (folder / "vision_subtasks.py").write_text(STANDINS)
    for subtask in ("bright", "normalized"):
        use = {"task": subtask, "attribute": {"path": "/tmp/a.png"}, "output": None}
        _task_file(folder, subtask, [use], "0")
    suite = load(folder)
    assert suite.entry("bright").task.setup == []
    (warning,) = suite.entry("normalized").task.metadata["warnings"]
    assert "subtask 'normalized' (making its evaluators) uses 'crab_fixture_vision.normalize'" in (
        warning
    )
    assert "'crab_fixture_vision' is not installed" in warning
