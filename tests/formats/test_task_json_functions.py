"""Every shipped task-JSON function on known-good and known-bad inputs, in a real local sandbox."""

from __future__ import annotations

import io
import json
from typing import Any

import pytest
from PIL import Image

from crabray.core.errors import SandboxFileError
from crabray.formats.task_json import TaskContext, lookup
from crabray.formats.task_json._legacy import (
    GetterSpec,
    LegacyEvaluator,
    plan_evaluator,
    score_plan,
)
from crabray.formats.task_json._setup import SetupCommandError


def call(ctx: TaskContext, kind: str, name: str, **arguments: Any) -> Any:
    """Validate ``arguments`` as the loader does, then run the function."""
    function = lookup(kind, name)  # type: ignore[arg-type]
    values, problems = function.validate(arguments, ctx.task_dir)
    assert not problems, problems
    return function.func(ctx, **values)


def grade(ctx: TaskContext, name: str, **arguments: Any) -> float:
    return call(ctx, "evaluation", name, **arguments)


def local(ctx: TaskContext, name: str, content: str | bytes) -> str:
    data = content.encode() if isinstance(content, str) else content
    (ctx.task_dir / name).write_bytes(data)
    return name


def sandbox(ctx: TaskContext, path: str, content: str | bytes) -> str:
    ctx.env.put_file(path, content.encode() if isinstance(content, str) else content)
    return path


# CSV ----------------------------------------------------------------------------------------

GOLD_CSV = "name,qty\nbolts,4\nnuts,10\n"


@pytest.mark.parametrize(
    ("produced", "options", "score"),
    [
        (GOLD_CSV, {}, 1.0),
        ("name,qty\nnuts,10\nbolts,4\n", {}, 0.0),
        ("name,qty\nnuts,10\nbolts,4\n", {"ignore_order": True}, 1.0),
        ("NAME,QTY\nBOLTS,4\nNUTS,10\n", {}, 0.0),
        ("NAME,QTY\nBOLTS,4\nNUTS,10\n", {"ignore_case": True}, 1.0),
        ("name,qty\nbolts, 4.0\nnuts,10\n\n", {}, 0.0),
        ("name,qty\nbolts, 4.0\nnuts,10\n\n", {"strict": False}, 1.0),
        ("name,qty\nbolts,5\nnuts,10\n", {"strict": False, "ignore_order": True}, 0.0),
        ("name,qty\nbolts,4\n", {"ignore_order": True}, 0.0),
    ],
)
def test_compare_csv(ctx: TaskContext, produced: str, options: dict, score: float) -> None:
    gold = local(ctx, "gold.csv", GOLD_CSV)
    result = sandbox(ctx, "out/result.csv", produced)
    assert grade(ctx, "compare_csv", local_expected=gold, vm_result=result, **options) == score


def test_compare_csv_missing_result_scores_zero(ctx: TaskContext) -> None:
    gold = local(ctx, "gold.csv", GOLD_CSV)
    assert grade(ctx, "compare_csv", local_expected=gold, vm_result="nothing.csv") == 0.0


# Text ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("produced", "options", "score"),
    [
        ("Hello, crabray!\n", {}, 1.0),
        ("Hello,  crabray!\n\n", {}, 0.0),
        ("Hello,  crabray!\n\n", {"ignore_blanks": True}, 1.0),
        ("hello, CRABRAY!\n", {"ignore_blanks": True}, 0.0),
        ("hello,\tCRABRAY!", {"ignore_blanks": True, "ignore_case": True}, 1.0),
        ("Hello, world!\n", {"ignore_blanks": True, "ignore_case": True}, 0.0),
    ],
)
def test_compare_text_file(ctx: TaskContext, produced: str, options: dict, score: float) -> None:
    gold = local(ctx, "gold.txt", "Hello, crabray!\n")
    result = sandbox(ctx, "greeting.txt", produced)
    assert (
        grade(ctx, "compare_text_file", local_expected=gold, vm_result=result, **options) == score
    )


# Script logs --------------------------------------------------------------------------------


def test_compare_script_logs_include_exclude(ctx: TaskContext) -> None:
    script = local(ctx, "check.sh", "echo 'build ok'\necho 'warning: slow' >&2\n")
    args = {"local_script": script, "remote_path": "checks/check.sh"}
    assert grade(ctx, "compare_script_logs", **args, include=["build ok", "warning"]) == 1.0
    assert grade(ctx, "compare_script_logs", **args, include=["build ok"], exclude=["warn"]) == 0.0
    assert grade(ctx, "compare_script_logs", **args, include=["missing"]) == 0.0
    assert grade(ctx, "compare_script_logs", **args, include=[r"build \w+"], regex=True) == 1.0
    assert grade(ctx, "compare_script_logs", **args, expected_exit_code=0) == 1.0
    assert grade(ctx, "compare_script_logs", **args, expected_exit_code=3) == 0.0


def test_compare_script_logs_expected_log_and_sandbox_files(ctx: TaskContext) -> None:
    sandbox(ctx, "data/n.txt", "7\n")
    script = local(ctx, "count.sh", "cat data/n.txt\necho done\n")
    log = local(ctx, "count.log", "7\n\ndone\n")
    args = {"local_script": script, "remote_path": "count.sh"}
    assert grade(ctx, "compare_script_logs", **args, local_expected_log=log) == 1.0
    sandbox(ctx, "data/n.txt", "8\n")
    assert grade(ctx, "compare_script_logs", **args, local_expected_log=log) == 0.0


def test_compare_script_logs_timeout_scores_zero(ctx: TaskContext) -> None:
    script = local(ctx, "slow.sh", "sleep 5\necho late\n")
    score = grade(
        ctx, "compare_script_logs", local_script=script, include=["late"], timeout_sec=0.5
    )
    assert score == 0.0


# Notebooks ----------------------------------------------------------------------------------


def notebook(*cells: dict) -> str:
    return json.dumps({"cells": list(cells), "metadata": {}, "nbformat": 4, "nbformat_minor": 5})


def code(source: str | list[str], outputs: list | None = None, count: int | None = None) -> dict:
    return {
        "cell_type": "code",
        "source": source,
        "outputs": outputs or [],
        "execution_count": count,
        "metadata": {},
    }


def markdown(source: str) -> dict:
    return {"cell_type": "markdown", "source": source, "metadata": {}}


def stdout(text: str | list[str]) -> dict:
    return {"output_type": "stream", "name": "stdout", "text": text}


def plain(text: str) -> dict:
    return {"output_type": "execute_result", "data": {"text/plain": text}, "metadata": {}}


def test_compare_notebook_cells(ctx: TaskContext) -> None:
    gold = local(ctx, "gold.ipynb", notebook(markdown("# T"), code("x = 1\nx")))
    args = {"local_expected": gold, "vm_result": "nb.ipynb"}
    sandbox(ctx, "nb.ipynb", notebook(markdown("# T\n"), code(["x = 1\n", "x"], [plain("1")], 1)))
    assert grade(ctx, "compare_notebook_cells", **args) == 1.0
    sandbox(ctx, "nb.ipynb", notebook(markdown("# T"), code("x = 2\nx")))
    assert grade(ctx, "compare_notebook_cells", **args) == 0.0
    sandbox(ctx, "nb.ipynb", notebook(code("# T"), code("x = 1\nx")))
    assert grade(ctx, "compare_notebook_cells", **args) == 0.0
    sandbox(ctx, "nb.ipynb", notebook(markdown("# T")))
    assert grade(ctx, "compare_notebook_cells", **args) == 0.0
    sandbox(ctx, "nb.ipynb", "{not json")
    assert grade(ctx, "compare_notebook_cells", **args) == 0.0


def test_compare_notebook_cells_bad_expected_raises(ctx: TaskContext) -> None:
    gold = local(ctx, "gold.ipynb", "[]")
    sandbox(ctx, "nb.ipynb", notebook())
    with pytest.raises(ValueError, match="not a notebook"):
        grade(ctx, "compare_notebook_cells", local_expected=gold, vm_result="nb.ipynb")


def test_compare_notebook_outputs_ignores_install_noise(ctx: TaskContext) -> None:
    gold = local(
        ctx,
        "gold.ipynb",
        notebook(
            code("%pip install x"), code("print(55)", [stdout("55\n")]), code("1+1", [plain("2")])
        ),
    )
    args = {"local_expected": gold, "vm_result": "nb.ipynb"}
    noisy = stdout(
        ["Collecting x\n", "Requirement already satisfied: y\n", "Successfully installed x-1.0\n"]
    )
    sandbox(
        ctx,
        "nb.ipynb",
        notebook(
            code("%pip install x", [noisy]),
            code("print(55)", [stdout("55\n")]),
            code("1+1", [plain("2")]),
        ),
    )
    assert grade(ctx, "compare_notebook_outputs", **args) == 1.0
    sandbox(
        ctx,
        "nb.ipynb",
        notebook(
            code("%pip install x"), code("print(55)", [stdout("56\n")]), code("1+1", [plain("2")])
        ),
    )
    assert grade(ctx, "compare_notebook_outputs", **args) == 0.0
    sandbox(ctx, "nb.ipynb", notebook(code("%pip install x"), code("print(55)"), code("1+1")))
    assert grade(ctx, "compare_notebook_outputs", **args) == 0.0


def test_compare_ipynb_files_ignores_metadata_and_counts(ctx: TaskContext) -> None:
    gold = local(ctx, "gold.ipynb", notebook(markdown("# T"), code("print(1)", [stdout("1\n")], 1)))
    args = {"local_expected": gold, "vm_result": "nb.ipynb"}
    other = json.loads(notebook(markdown("# T"), code("print(1)\n", [stdout("1")], 9)))
    other["metadata"] = {"kernelspec": {"name": "python3"}}
    sandbox(ctx, "nb.ipynb", json.dumps(other))
    assert grade(ctx, "compare_ipynb_files", **args) == 1.0
    sandbox(ctx, "nb.ipynb", notebook(markdown("# T"), code("print(1)", [stdout("2\n")], 1)))
    assert grade(ctx, "compare_ipynb_files", **args) == 0.0


def test_is_jupyter_cell_executed(ctx: TaskContext) -> None:
    sandbox(ctx, "nb.ipynb", notebook(markdown("m"), code("a", count=1), code("b", count=None)))
    assert grade(ctx, "is_jupyter_cell_executed", vm_result="nb.ipynb") == 0.0
    assert grade(ctx, "is_jupyter_cell_executed", vm_result="nb.ipynb", expected=[2]) == 1.0
    expected = {"expected": [2]}
    assert grade(ctx, "is_jupyter_cell_executed", vm_result="nb.ipynb", expected=expected) == 1.0
    sandbox(ctx, "nb.ipynb", notebook(markdown("m"), code("a", count=1), code("b", count=2)))
    assert grade(ctx, "is_jupyter_cell_executed", vm_result="nb.ipynb") == 1.0
    assert grade(ctx, "is_jupyter_cell_executed", vm_result="missing.ipynb") == 0.0


def test_are_jupyter_outputs_cleared(ctx: TaskContext) -> None:
    sandbox(ctx, "nb.ipynb", notebook(code("a"), code("b", [stdout("x")]), markdown("m")))
    assert grade(ctx, "are_jupyter_outputs_cleared", vm_result="nb.ipynb") == 0.0
    assert grade(ctx, "are_jupyter_outputs_cleared", vm_result="nb.ipynb", expected=[1]) == 1.0
    sandbox(ctx, "nb.ipynb", notebook(code("a"), code("b"), markdown("m")))
    assert grade(ctx, "are_jupyter_outputs_cleared", vm_result="nb.ipynb") == 1.0


# Images -------------------------------------------------------------------------------------


def png(pixels: list[int], size: tuple[int, int] = (16, 16)) -> bytes:
    image = Image.new("L", size)
    image.putdata(pixels)
    buffer = io.BytesIO()
    image.convert("RGB").save(buffer, "PNG")
    return buffer.getvalue()


GRADIENT = [(x * 16 + y) % 256 for y in range(16) for x in range(16)]


def test_compare_jupyterlab_images(ctx: TaskContext) -> None:
    gold = local(ctx, "gold.png", png(GRADIENT))
    args = {"local_expected_image": gold, "vm_result_image": "shot.png"}
    sandbox(ctx, "shot.png", png(GRADIENT))
    assert grade(ctx, "compare_jupyterlab_images", **args) == 1.0
    big = [(x // 2 * 16 + y // 2) % 256 for y in range(32) for x in range(32)]
    sandbox(ctx, "shot.png", png(big, (32, 32)))
    assert grade(ctx, "compare_jupyterlab_images", **args) == 1.0
    sandbox(ctx, "shot.png", png([0] * 200 + [255] * 56))
    assert grade(ctx, "compare_jupyterlab_images", **args) == 0.0
    assert grade(ctx, "compare_jupyterlab_images", **args, similarity_threshold=-1.0) == 1.0
    sandbox(ctx, "shot.png", b"not an image")
    assert grade(ctx, "compare_jupyterlab_images", **args) == 0.0
    assert grade(ctx, "compare_jupyterlab_images", **{**args, "vm_result_image": "none.png"}) == 0.0


# Infeasible and combinations ----------------------------------------------------------------


def test_infeasible_needs_fail(ctx: TaskContext) -> None:
    assert grade(ctx, "infeasible") == 0.0
    ctx.env.signals.failed = True
    assert grade(ctx, "infeasible") == 1.0


def test_evaluate_multiple_notebooks_and_or(ctx: TaskContext) -> None:
    gold = local(ctx, "gold.ipynb", notebook(code("a")))
    sandbox(ctx, "nb.ipynb", notebook(code("a", count=None)))
    passing = {
        "func": "compare_notebook_cells",
        "arguments": {"local_expected": gold, "vm_result": "nb.ipynb"},
    }
    failing = {"func": "is_jupyter_cell_executed", "arguments": {"vm_result": "nb.ipynb"}}
    multiple = "evaluate_multiple_notebooks"
    assert grade(ctx, multiple, operator="and", comparisons=[passing, failing]) == 0.0
    assert grade(ctx, multiple, operator="or", comparisons=[passing, failing]) == 1.0
    assert grade(ctx, multiple, operator="and", comparisons=[passing, passing]) == 1.0
    assert grade(ctx, multiple, operator="or", comparisons=[failing]) == 0.0


def test_evaluate_multiple_notebooks_checks_nested_at_load(ctx: TaskContext) -> None:
    function = lookup("evaluation", "evaluate_multiple_notebooks")
    comparisons = [
        {
            "func": "compare_notebook_cells",
            "arguments": {"local_expected": "../x", "vm_result": "n"},
        },
        {"func": "no_such_function", "arguments": {}},
    ]
    _, problems = function.validate({"operator": "and", "comparisons": comparisons}, ctx.task_dir)
    fields = dict(problems)
    assert "leaves the task folder" in fields["comparisons.0.arguments.local_expected"]
    assert "unknown evaluation function 'no_such_function'" in fields["comparisons.1.func"]
    assert "compare_csv" in fields["comparisons.1.func"]
    _, problems = function.validate({"operator": "xor", "comparisons": []}, ctx.task_dir)
    assert [f for f, _ in problems] == ["operator"]


# Setup functions ----------------------------------------------------------------------------


def test_upload_and_download_files(ctx: TaskContext) -> None:
    local(ctx, "data.csv", "a,b\n")
    call(ctx, "setup", "upload_file_to_vm", local_path="data.csv", remote_path="Desktop/data.csv")
    call(ctx, "setup", "download_file", local_path="data.csv", path="copy.csv")
    call(ctx, "setup", "download", files=[{"url": "data.csv", "path": "third.csv"}])
    for path in ("Desktop/data.csv", "copy.csv", "third.csv"):
        assert ctx.env.get_file(path) == b"a,b\n"


def test_local_paths_cannot_escape_the_task_folder(ctx: TaskContext) -> None:
    function = lookup("setup", "upload_file_to_vm")
    for bad in ("../secret", "/etc/passwd", "missing.txt"):
        _, problems = function.validate({"local_path": bad, "remote_path": "x"}, ctx.task_dir)
        assert [f for f, _ in problems] == ["local_path"], bad
    with pytest.raises(SandboxFileError, match="leaves the task folder"):
        ctx.read_local("../../etc/passwd")


def test_upload_script_and_execute(ctx: TaskContext) -> None:
    local(ctx, "init.sh", "echo ready > flag.txt\necho started\n")
    out = call(
        ctx, "setup", "upload_script_and_execute", local_path="init.sh", remote_path="setup/init.sh"
    )
    assert out.strip() == "started"
    assert ctx.env.get_file("setup/flag.txt") == b"ready\n"
    local(ctx, "bad.sh", "echo broken >&2\nexit 4\n")
    with pytest.raises(SetupCommandError, match="exited 4: broken"):
        call(ctx, "setup", "upload_script_and_execute", local_path="bad.sh", remote_path="bad.sh")


def test_execute_launch_open_sleep(ctx: TaskContext) -> None:
    call(ctx, "setup", "execute", command="mkdir -p d && echo hi > d/f")
    assert ctx.env.get_file("d/f") == b"hi\n"
    call(ctx, "setup", "execute", command=["touch", "argv.txt"])
    assert ctx.env.get_file("argv.txt") == b""
    with pytest.raises(SetupCommandError, match="exited 1"):
        call(ctx, "setup", "execute", command="false")
    call(ctx, "setup", "launch", command="sleep 0.2 && echo up > launched.txt")
    call(ctx, "setup", "sleep", seconds=0.6)
    assert ctx.env.get_file("launched.txt") == b"up\n"
    call(ctx, "setup", "open", path="d/f")
    with pytest.raises(SetupCommandError):
        call(ctx, "setup", "open", path="nowhere.txt")


def test_unknown_argument_names_the_function_and_its_arguments(ctx: TaskContext) -> None:
    _, problems = lookup("setup", "sleep").validate({"secs": 1}, ctx.task_dir)
    assert problems == [
        ("seconds", "required by 'sleep'"),
        ("secs", "'sleep' takes no such argument (its arguments: seconds)"),
    ]
    _, problems = lookup("setup", "sleep").validate({}, ctx.task_dir)
    assert problems == [("seconds", "required by 'sleep'")]


# The older variant: getters, metrics, and/or ---------------------------------------------------


def legacy(ctx: TaskContext, **block: Any) -> float:
    parsed = LegacyEvaluator.model_validate(block)
    plan, problems = plan_evaluator(parsed, ctx.task_dir)
    assert not problems, problems
    return score_plan(ctx, plan, parsed.conj)


def rule(**rules: Any) -> dict:
    return {"type": "rule", "rules": rules}


def test_exact_match_on_command_output(ctx: TaskContext) -> None:
    sandbox(ctx, "answer.txt", "42\n")
    command = {"type": "vm_command_line", "command": "cat answer.txt"}
    assert legacy(ctx, func="exact_match", result=command, expected=rule(expected="42")) == 1.0
    assert legacy(ctx, func="exact_match", result=command, expected=rule(expected="41")) == 0.0


def test_include_exclude_on_vm_file(ctx: TaskContext) -> None:
    sandbox(ctx, "notes.txt", "all done\n")
    file = {"type": "vm_file", "path": "notes.txt", "dest": "notes.txt"}
    good = rule(include=["done"], exclude=["TODO"])
    assert legacy(ctx, func="check_include_exclude", result=file, expected=good) == 1.0
    bad = rule(include=["done"], exclude=["all"])
    assert legacy(ctx, func="check_include_exclude", result=file, expected=bad) == 0.0
    missing = {"type": "vm_file", "path": "none.txt"}
    assert legacy(ctx, func="check_include_exclude", result=missing, expected=good) == 0.0


def test_table_and_text_metrics_with_local_file(ctx: TaskContext) -> None:
    local(ctx, "gold.csv", GOLD_CSV)
    local(ctx, "gold.txt", "a b\n")
    sandbox(ctx, "t.csv", "name,qty\nnuts,10\nbolts,4\n")
    sandbox(ctx, "t.txt", "a   b")
    table = {
        "result": {"type": "vm_file", "path": "t.csv"},
        "expected": {"type": "local_file", "path": "gold.csv"},
    }
    assert legacy(ctx, func="compare_table", **table) == 0.0
    assert legacy(ctx, func="compare_table", **table, options={"ignore_order": True}) == 1.0
    text = {
        "result": {"type": "vm_file", "path": "t.txt"},
        "expected": {"type": "local_file", "path": "gold.txt"},
    }
    assert legacy(ctx, func="compare_text_file", **text) == 0.0
    assert legacy(ctx, func="compare_text_file", **text, options={"ignore_blanks": True}) == 1.0


def test_conj_and_or_with_fractional_means(ctx: TaskContext) -> None:
    sandbox(ctx, "a.txt", "yes")
    result = {"type": "vm_file", "path": "a.txt"}
    block = {
        "func": ["exact_match", "exact_match"],
        "result": [result, result],
        "expected": [rule(expected="yes"), rule(expected="no")],
    }
    assert legacy(ctx, **block, conj="and") == 0.0
    assert legacy(ctx, **block, conj="or") == 1.0


def test_infeasible_evaluator(ctx: TaskContext) -> None:
    assert legacy(ctx, func="infeasible") == 0.0
    ctx.env.signals.failed = True
    assert legacy(ctx, func="infeasible") == 1.0


def test_legacy_plan_problems_name_fields(ctx: TaskContext) -> None:
    block = LegacyEvaluator(
        func=["exact_match", "nope"],
        result=[
            GetterSpec(type="vm_file", path="x", colour="red"),
            GetterSpec(type="vm_file", path="y"),
        ],
        expected=[GetterSpec(type="mystery"), GetterSpec(type="rule", rules={})],
    )
    _, problems = plan_evaluator(block, ctx.task_dir)
    fields = dict(problems)
    assert "unknown metric function 'nope'" in fields["func.1"]
    assert "takes no such argument" in fields["result.0.colour"]
    assert "unknown getter function 'mystery'" in fields["expected.0.type"]
    short = LegacyEvaluator(
        func=["exact_match", "exact_match"], result=[GetterSpec(type="rule", rules=1)] * 3
    )
    _, problems = plan_evaluator(short, ctx.task_dir)
    assert problems == [("result", "has 3 entries for 2 functions")]
