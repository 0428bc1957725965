"""The GUI-OS repository's spellings and step forms: its argument names, its folder-valued
``remote_path``, a ``type`` step mixed into ``func`` steps, and its suite paths."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from crabray.agents.base import AgentSpec
from crabray.agents.scripted import NoopAgent
from crabray.backends import create_backend
from crabray.episode import EpisodeSettings, run_episode
from crabray.formats import load_suite, resolve_suite
from crabray.formats.task_json import TaskContext, lookup
from tests.conftest import crabray
from tests.formats.test_task_json import problems, write_task
from tests.formats.test_task_json_functions import grade, local, sandbox

# Reference spellings ------------------------------------------------------------------------


def test_compare_text_file_takes_the_repository_spelling(ctx: TaskContext) -> None:
    gold = local(ctx, "code_gold.txt", "print('hi')\n")
    sandbox(ctx, "Desktop/code.txt", "print('hi')  \n\n")
    args = {"local_expected_file": gold, "vm_result_file": "Desktop/code.txt"}
    assert grade(ctx, "compare_text_file", **args, ignore_blanks=True) == 1.0
    assert grade(ctx, "compare_text_file", **args) == 0.0


def test_compare_text_file_spellings_are_one_argument(ctx: TaskContext) -> None:
    gold = local(ctx, "gold.txt", "x")
    function = lookup("evaluation", "compare_text_file")
    _, both = function.validate(
        {"local_expected": gold, "local_expected_file": gold, "vm_result": "r"}, ctx.task_dir
    )
    assert [f for f, _ in both] == ["local_expected_file"]
    _, none = function.validate({"vm_result_file": "r"}, ctx.task_dir)
    assert [f for f, _ in none] == ["local_expected"]
    _, missing = function.validate(
        {"local_expected_file": "nope.txt", "vm_result_file": "r"}, ctx.task_dir
    )
    assert [f for f, _ in missing] == ["local_expected_file"]


EVAL_SH = """\
#!/bin/bash
set -euo pipefail
EVAL_LOG="$PWD/eval.log"
if [ -f answer.txt ] && grep -q 42 answer.txt; then
    echo "SUCCESS: answer found" > "$EVAL_LOG"
else
    echo "FAILURE: no answer" > "$EVAL_LOG"
fi
"""


def test_compare_script_logs_takes_the_repository_spelling(ctx: TaskContext) -> None:
    """``eval_script`` runs, writes ``vm_eval_logs``; ``rules`` grade that file's text."""
    script = local(ctx, "eval.sh", EVAL_SH)
    args: dict[str, Any] = {
        "eval_script": script,
        "remote_path": "work/eval.sh",
        "vm_eval_logs": "work/eval.log",
        "rules": {"include": ["SUCCESS"], "exclude": ["FAILURE"]},
    }
    assert grade(ctx, "compare_script_logs", **args) == 0.0
    sandbox(ctx, "work/answer.txt", "42\n")
    assert grade(ctx, "compare_script_logs", **args) == 1.0
    assert grade(ctx, "compare_script_logs", **{**args, "rules": {}}) == 0.0
    missing_log = {**args, "vm_eval_logs": "work/never-written.log"}
    assert grade(ctx, "compare_script_logs", **missing_log) == 0.0


def test_compare_script_logs_checks_the_eval_script_at_load(ctx: TaskContext) -> None:
    function = lookup("evaluation", "compare_script_logs")
    _, problems = function.validate(
        {"eval_script": "absent.sh", "vm_eval_logs": "x.log", "rules": {"include": ["a"]}},
        ctx.task_dir,
    )
    assert [f for f, _ in problems] == ["eval_script"]
    _, problems = function.validate({"vm_eval_logs": "x.log"}, ctx.task_dir)
    assert [f for f, _ in problems] == ["local_script"]


def test_upload_script_and_execute_remote_path_is_a_folder_unless_it_names_the_script(
    ctx: TaskContext,
) -> None:
    local(ctx, "init.sh", "echo made > made.txt\n")
    function = lookup("setup", "upload_script_and_execute")
    for remote, made in (("setup", "setup/made.txt"), ("other/init.sh", "other/made.txt")):
        values, problems = function.validate(
            {"local_path": "init.sh", "remote_path": remote}, ctx.task_dir
        )
        assert not problems
        function.func(ctx, **values)
        assert ctx.env.get_file(made) == b"made\n"
    assert ctx.env.get_file("setup/init.sh") == b"echo made > made.txt\n"


def test_notebook_checks_take_the_version_option(ctx: TaskContext) -> None:
    notebook = {"cells": [{"cell_type": "code", "source": "1", "execution_count": 1}]}
    sandbox(ctx, "nb.ipynb", json.dumps(notebook))
    for name in ("is_jupyter_cell_executed", "are_jupyter_outputs_cleared"):
        assert grade(ctx, name, vm_result="nb.ipynb", expected=[], version=4) == 1.0


# Step forms ---------------------------------------------------------------------------------

MIXED = {
    "instruction": "Make the answer.",
    "snapshot": "jupyter",
    "config": [
        {
            "func": "upload_file_to_vm",
            "arguments": {"local_path": "data.csv", "remote_path": "data.csv"},
        },
        {
            "type": "upload_script_and_execute",
            "parameters": {"src": "init.sh", "dest": "/home/user/init.sh"},
        },
    ],
    "evaluation": {
        "func": "compare_text_file",
        "arguments": {"local_expected_file": "gold.txt", "vm_result_file": "data.csv"},
    },
}


def test_type_step_among_func_steps_is_skipped_with_a_warning(tmp_path: Path) -> None:
    write_task(tmp_path, MIXED, tool="jupyter", files={"data.csv": "a\n", "gold.txt": "a\n"})
    suite = load_suite(resolve_suite(tmp_path, backend="local"))  # its sandbox is local
    entry = suite.entry("t1")
    (warning,) = entry.task.metadata["warnings"]
    assert "config.1" in warning and "skipped" in warning
    env = entry.benchmark.task_environments(entry.task)[0]
    backend = create_backend(
        env.model_copy(update={"backend_settings": {"root_dir": str(tmp_path / "sandboxes")}})
    )
    backend.start()
    try:
        record = run_episode(
            entry.benchmark,
            entry.task,
            NoopAgent(AgentSpec(name="noop", kind="noop")),
            {env.name: backend},
            EpisodeSettings(run_id="r", suite="s", agent="noop"),
        )
    finally:
        backend.close()
    assert record.result.termination_reason.value != "setup_error", record.result.error
    assert record.result.score == 1.0
    files = suite.record_files(entry, record)
    summary = json.loads(next(iter(files.values())))
    assert summary["results"]["warnings"] == [warning]


def test_type_step_in_a_type_style_config_is_still_an_error(tmp_path: Path) -> None:
    doc = {**MIXED, "config": MIXED["config"][1:]}
    write_task(tmp_path, doc, tool="jupyter", files={"data.csv": "a\n", "gold.txt": "a\n"})
    fields = {error.field for error in problems(tmp_path)}
    assert fields == {
        "config.0.parameters.src",
        "config.0.parameters.dest",
        "config.0.parameters.local_path",
    }


# Suite paths --------------------------------------------------------------------------------


@pytest.mark.parametrize("where", ["", "examples", "examples/jupyter"])
def test_suite_root_examples_and_one_tool_folder_load(tmp_path: Path, where: str) -> None:
    files = {"data.csv": "a\n", "gold.txt": "a\n"}
    write_task(tmp_path, MIXED, tool="jupyter", task_id="j1", files=files)
    write_task(tmp_path, MIXED, tool="jupyter", task_id="j2", files=files)
    write_task(tmp_path, MIXED, tool="os", task_id="o1", files=files)
    suite = load_suite(resolve_suite(tmp_path / where))
    ids = sorted(suite.entries)
    assert ids == (["j1", "j2"] if where.endswith("jupyter") else ["j1", "j2", "o1"])
    shown = crabray("tasks", "validate", str(tmp_path / where))
    assert shown.returncode == 0, shown.stderr
    listed = crabray("tasks", "list", str(tmp_path / where))
    assert listed.returncode == 0, listed.stderr
    assert ("o1" in listed.stdout) == (not where.endswith("jupyter"))
