"""The CLI's answers to bad input, and the commands that need no Ray."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

from tests.conftest import crabray

BAD_TASK = textwrap.dedent(
    """
    from crabray import BenchmarkConfig, EnvironmentConfig, Task
    from crabray.actions import path_exists

    ENV = EnvironmentConfig(name="box")
    bad = BenchmarkConfig(
        name="bad",
        environments=[ENV],
        tasks=[Task(id="t", description="d", evaluator="not an evaluator")],
    )
    """
)


def test_validate_reports_every_bad_module_with_file_and_field(tmp_path: Path) -> None:
    (tmp_path / "bad_task.py").write_text(BAD_TASK)
    (tmp_path / "broken.py").write_text("x = 1\nraise RuntimeError('boom at import')\n")
    done = crabray("tasks", "validate", str(tmp_path))
    assert done.returncode == 2
    assert "2 problems" in done.stderr
    assert "bad_task.py" in done.stderr
    assert "bad_task.py:9: Task.evaluator: must be an evaluator" in done.stderr
    assert "broken.py:2" in done.stderr
    assert "RuntimeError: boom at import" in done.stderr
    assert "Traceback" not in done.stderr


def test_run_refuses_a_broken_suite_before_starting(tmp_path: Path) -> None:
    (tmp_path / "broken.py").write_text("import no_such_module_xyz\n")
    out = tmp_path / "out"
    done = crabray("run", str(tmp_path), "--agent", "oracle", "--out", str(out))
    assert done.returncode == 2
    assert "broken.py:1" in done.stderr
    assert "no_such_module_xyz" in done.stderr
    assert not (out / "episodes").exists()


def test_validate_and_list_the_demo_suite(demo_suite: Path) -> None:
    ok = crabray("tasks", "validate", str(demo_suite), check=True)
    assert "11 tasks" in ok.stdout
    listed = crabray("tasks", "list", str(demo_suite), check=True)
    assert "deploy-config" in listed.stdout
    assert "workstation, server" in listed.stdout


def test_validate_finds_a_solution_outside_the_action_space(tmp_path: Path) -> None:
    (tmp_path / "suite.py").write_text(
        textwrap.dedent(
            """
            from crabray import BenchmarkConfig, EnvironmentConfig, Task
            from crabray.actions import path_exists, run_command

            ENV = EnvironmentConfig(name="box", action_space=[])
            b = BenchmarkConfig(
                name="b",
                environments=[ENV],
                tasks=[Task(id="t", description="d", evaluator=path_exists(path="x"),
                            solution=[run_command(command="touch x")])],
            )
            """
        )
    )
    done = crabray("tasks", "validate", str(tmp_path))
    assert done.returncode == 2
    assert "tasks[t].solution" in done.stderr
    assert "run_command" in done.stderr


def test_unknown_agent_and_missing_suite_are_clear_errors(tmp_path: Path) -> None:
    unknown = crabray("run", "tasks/demo", "--agent", "gpt-nobody", "--out", str(tmp_path))
    assert unknown.returncode == 2
    assert "unknown agent 'gpt-nobody'" in unknown.stderr
    assert "oracle" in unknown.stderr
    missing = crabray("run", str(tmp_path / "nowhere"), "--agent", "oracle")
    assert missing.returncode == 2
    assert "no such file or folder" in missing.stderr


def test_leaderboard_of_an_empty_directory_says_so(tmp_path: Path) -> None:
    done = crabray("leaderboard", str(tmp_path), "--format", "json")
    assert done.returncode == 2
    assert f"no runs in {tmp_path}:" in done.stderr
    assert "crabray run tasks/demo --agent oracle" in done.stderr


EXIT_PROBE = """
import atexit, gc, sys
atexit.register(lambda: print("FROZEN", gc.get_freeze_count(), file=sys.stderr))
sys.argv = ["crabray", *sys.argv[1:]]
from crabray.cli import main_entry
main_entry()
"""
"""``crabray ARGS`` as the installed command runs it, reporting the frozen objects at exit."""


def test_the_command_exits_with_its_code_and_its_heap_left_to_the_process(tmp_path: Path) -> None:
    """Python's exit would collect every live object (0.35 s after a large run): the
    command freezes them first, and its exit code is the command's own."""
    for args, code in ((["--version"], 0), (["leaderboard", str(tmp_path / "none")], 2)):
        done = subprocess.run(
            [sys.executable, "-c", EXIT_PROBE, *args], capture_output=True, text=True, timeout=120
        )
        assert done.returncode == code, done.stderr
        frozen = int(done.stderr.split("FROZEN ")[1].split()[0])
        assert frozen > 10_000, done.stderr  # the imported modules' objects, at least


def test_counts_of_one_are_singular(tmp_path: Path) -> None:
    """Issue 39: "1 episodes", "1 benchmark errors": one of a thing is said in the singular."""
    suite = tmp_path / "one.py"
    suite.write_text(
        textwrap.dedent(
            """
            from crabray import BenchmarkConfig, EnvironmentConfig, Task
            from crabray.actions import path_exists

            one = BenchmarkConfig(
                name="one",
                environments=[EnvironmentConfig(name="box")],
                tasks=[Task(id="t", description="d", evaluator=path_exists(path="x"))],
            )
            """
        )
    )
    valid = crabray("tasks", "validate", str(suite), check=True)
    assert f"1 task in {suite} is valid" in valid.stdout, valid.stdout
    listed = crabray("tasks", "list", str(suite), check=True)
    assert "one (1 of 1 task)" in listed.stdout, listed.stdout
    (tmp_path / "broken.py").write_text("raise RuntimeError('boom')\n")
    broken = crabray("tasks", "validate", str(tmp_path / "broken.py"))
    assert broken.returncode == 2 and "1 problem in" in broken.stderr, broken.stderr
