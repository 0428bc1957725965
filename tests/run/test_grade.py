"""``crabray tasks grade``: a task's setup, then result files handed in, graded with no
agent, for each of the three suite formats; gold scores 1 and the original 0."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.backends.docker.dockerd import require_env_image
from tests.conftest import ROOT, crabray
from tests.formats.conftest import write_task_folder
from tests.formats.test_task_folder_tac import BOOL_EVALUATOR, TAC_FROM
from tests.formats.test_task_json import write_task

ORIGINAL_CSV = "season,games\n"
GOLD_CSV = "season,games\nWinter,24\nSummer,29\n"


def graded(*args: str) -> tuple[str, str]:
    done = crabray("tasks", "grade", *args, timeout=900)
    assert done.returncode == 0, f"{done.stdout}\n{done.stderr}"
    last = done.stdout.strip().splitlines()[-1]
    return last, done.stdout


def task_json_suite(root: Path) -> Path:
    """A GUI-OS-style task: the original file uploaded by setup, a gold file beside it."""
    doc = {
        "instruction": "Count the games per season into games.csv.",
        "config": [
            {
                "func": "upload_file_to_vm",
                "arguments": {"local_path": "games.csv", "remote_path": "Desktop/games.csv"},
            }
        ],
        "evaluation": {
            "func": "compare_csv",
            "arguments": {
                "local_expected": "gold.csv",
                "vm_result": "Desktop/games.csv",
                "ignore_order": True,
            },
        },
    }
    files = {"games.csv": ORIGINAL_CSV, "gold.csv": GOLD_CSV}
    write_task(root, doc, tool="jupyter", task_id="games", files=files)
    return root / "examples" / "jupyter" / "games"


def test_task_json_gold_scores_1_and_original_0(tmp_path: Path) -> None:
    folder = task_json_suite(tmp_path)
    gold, shown = graded(str(tmp_path), "games", "-r", f"Desktop/games.csv={folder / 'gold.csv'}")
    assert gold == "score 1" and "compare_csv" in shown
    original, _ = graded(str(tmp_path), "games", "-r", f"Desktop/games.csv={folder / 'games.csv'}")
    assert original == "score 0"
    untouched, _ = graded(str(tmp_path / "examples" / "jupyter"), "games")
    assert untouched == "score 0"


def test_python_suite_shows_each_evaluator(tmp_path: Path) -> None:
    answer = tmp_path / "hello.txt"
    answer.write_text("Hello, world!\n")
    last, shown = graded(
        str(ROOT / "tasks" / "demo" / "demo.py"), "hello-file", "-r", f"hello.txt={answer}"
    )
    assert last == "score 1"
    assert "file_equals(path='hello.txt', content='Hello, world!')" in shown and "passed" in shown
    answer.write_text("Bye\n")
    last, shown = graded(
        str(ROOT / "tasks" / "demo" / "demo.py"), "hello-file", "-r", f"hello.txt={answer}"
    )
    assert last == "score 0" and "not passed" in shown


def test_bad_result_spec_and_unknown_task_are_clear_errors(tmp_path: Path) -> None:
    task_json_suite(tmp_path)
    bad = crabray("tasks", "grade", str(tmp_path), "games", "-r", "no-equals-sign")
    assert bad.returncode == 2 and "SANDBOX_PATH=LOCAL_FILE" in bad.stderr
    assert "Traceback" not in bad.stderr
    missing = crabray("tasks", "grade", str(tmp_path), "games", "-r", "x.csv=/nonexistent.csv")
    assert missing.returncode == 2 and "/nonexistent.csv" in missing.stderr
    unknown = crabray("tasks", "grade", str(tmp_path), "nope")
    assert unknown.returncode == 2 and "nope" in unknown.stderr


@pytest.mark.slow
def test_task_folder_checkpoints_for_a_correct_and_an_untouched_answer(tmp_path: Path) -> None:
    require_env_image("task-base")
    suite = tmp_path / "suite"
    write_task_folder(
        suite / "bools", files={"Dockerfile": TAC_FROM, "evaluator.py": BOOL_EVALUATOR}
    )
    answer = tmp_path / "answer.txt"
    answer.write_text("hello\n")
    last, shown = graded(str(suite), "bools", "-r", f"/workspace/answer.txt={answer}")
    assert last == "score 1"
    assert "checkpoint 1" in shown and "1/1" in shown
    last, shown = graded(str(suite), "bools")
    assert last == "score 0" and "0/1" in shown
    summary = json.dumps(shown)
    assert "checkpoint 2" in summary


TOOL_SUITE = """\
from crabray import BenchmarkConfig, EnvironmentConfig, Task
from crabray.actions import command_output_contains

benchmark = BenchmarkConfig(
    name="tools",
    environments=[EnvironmentConfig(name="box")],
    tasks=[
        Task(
            id="install-tool",
            description="Install the tool so that ./tool prints its version.",
            evaluator=command_output_contains(command="./tool", text="tool 1.17"),
        )
    ],
)
"""


def test_an_executable_handed_in_stays_executable(tmp_path: Path) -> None:
    suite = tmp_path / "tools.py"
    suite.write_text(TOOL_SUITE)
    tool = tmp_path / "tool"
    tool.write_text("#!/bin/sh\necho tool 1.17\n")
    tool.chmod(0o644)
    last, _ = graded(str(suite), "install-tool", "-r", f"tool={tool}")
    assert last == "score 0"
    tool.chmod(0o755)
    last, _ = graded(str(suite), "install-tool", "-r", f"tool={tool}")
    assert last == "score 1"
