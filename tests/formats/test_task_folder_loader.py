"""Loading task-folder suites: detection, every validation error at once, the tasks built."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from crabray.cli import app
from crabray.core.errors import ConfigError
from crabray.formats import SuiteErrors, load_suite, resolve_suite
from crabray.formats.task_folder import CRABRAY_BASE_IMAGE
from tests.formats.conftest import write_task_folder

ROOT = Path(__file__).resolve().parents[2]

REGISTRY = """\
services:
  notes:
    reset: "true"
    health_url: http://127.0.0.1:18770/health
    timeout_sec: 5
  wiki:
    reset_url: http://127.0.0.1:18771/reset
"""


def problems(path: Path, **options: str) -> list[str]:
    """Every problem loading the suite at ``path`` reports, as 'file: field: reason' lines."""
    with pytest.raises(SuiteErrors) as caught:
        load_suite(resolve_suite(path, **options))
    return [str(e) for e in caught.value.errors]


def only_problem(path: Path, **options: str) -> str:
    found = problems(path, **options)
    assert len(found) == 1, found
    return found[0]


def test_detects_one_task_folder_and_a_folder_of_them(tmp_path: Path) -> None:
    task = write_task_folder(tmp_path / "suite" / "hello")
    (tmp_path / "suite" / "services").mkdir()  # not a task: no task files
    assert resolve_suite(task).format == "task-folder"
    ref = resolve_suite(tmp_path / "suite")
    assert (ref.format, ref.backend) == ("task-folder", "docker")
    assert load_suite(ref).task_ids == ["hello"]


def test_detection_leaves_other_formats_alone() -> None:
    assert resolve_suite(ROOT / "tasks" / "demo").format == "python"
    assert resolve_suite(ROOT / "tasks" / "task_json_demo").format == "task-json"


def test_a_valid_task_becomes_a_task_with_its_own_docker_environment(tmp_path: Path) -> None:
    folder = write_task_folder(
        tmp_path / "suite" / "hello",
        files={"dependencies.yml": "- notes\n", "scenarios.json": '{"npc": "boss"}'},
    )
    (tmp_path / "suite" / "services.yml").write_text(REGISTRY)
    write_task_folder(tmp_path / "suite" / "offline", files={"Dockerfile": "FROM debian:12\n"})
    suite = load_suite(resolve_suite(tmp_path / "suite"))
    assert suite.name == "suite"
    assert suite.task_ids == ["hello", "offline"]

    entry = suite.entry("hello")
    task = entry.task
    assert task.description == "Write the word hello into /workspace/answer.txt."
    assert [a.name for a in task.setup] == [
        "prepare_service",
        "put_task_files",
        "run_init_script",
        "run_init_script",
        "run_init_script",
    ]
    assert [a.description for a in task.setup[2:]] == [
        f"run the init script {name}: cd /utils && python3 /utils/{name}"
        for name in ("pre_init.py", "populate_data.py", "post_init.py")
    ]
    assert task.setup[0].local
    assert [(a.name, a.local) for a in task.teardown] == [("release_services", True)]
    assert task.scorer is not None and task.scorer.kept_params == ("env", "trajectory")
    assert [(a.name, a.bound["command"]) for a in task.solution] == [
        ("run_command", "echo hello > /workspace/answer.txt\n")
    ]
    assert task.metadata["dependencies"] == ["notes"]
    assert task.metadata["scenarios"] == {"npc": "boss"}
    assert task.metadata["checkpoints"].startswith("1. init ran")
    assert task.metadata["dockerfile"] == str(folder / "Dockerfile")
    assert entry.benchmark.name == "suite"
    [env] = entry.benchmark.task_environments(task)
    assert env.backend == "docker"
    assert env.backend_settings == {
        "build_context": str(folder.resolve()),
        "dockerfile": "Dockerfile",
        "base_image": CRABRAY_BASE_IMAGE,
        "network": "host",
        "workdir": "/workspace",
    }
    assert {a.name for a in env.action_space} >= {"run_command", "write_file", "read_file"}

    offline = suite.entry("offline")
    [env] = offline.benchmark.task_environments(offline.task)
    assert env.backend_settings["network"] == "none"
    assert "base_image" not in env.backend_settings  # not the original base image: kept
    assert offline.task.setup[0].name == "put_task_files"
    assert offline.task.teardown == []


def test_base_image_option_replaces_every_from(tmp_path: Path) -> None:
    write_task_folder(tmp_path / "suite" / "a", files={"Dockerfile": "FROM debian:12\n"})
    write_task_folder(tmp_path / "suite" / "b")
    ref = resolve_suite(tmp_path / "suite", base_image="my/base:2")
    assert ref.base_image == "my/base:2"
    suite = load_suite(ref)
    for entry in suite.entries.values():
        [env] = entry.benchmark.environments
        assert env.backend_settings["base_image"] == "my/base:2"


def test_every_problem_of_every_task_is_reported_at_once(tmp_path: Path) -> None:
    suite = tmp_path / "suite"
    write_task_folder(suite / "no_md", omit=("task.md",))
    write_task_folder(suite / "empty_md", files={"task.md": "  \n\n"})
    write_task_folder(suite / "no_grader", files={"evaluator.py": "def grade():\n    pass\n"})
    write_task_folder(
        suite / "syntax", files={"evaluator.py": "def grade_checkpoints(:\n    pass\n"}
    )
    write_task_folder(suite / "no_dockerfile", omit=("Dockerfile",))
    write_task_folder(suite / "no_from", files={"Dockerfile": "# base\nRUN true\n"})
    write_task_folder(suite / "no_deps", omit=("dependencies.yml",))
    write_task_folder(suite / "deps_mapping", files={"dependencies.yml": "gitlab: yes\n"})
    write_task_folder(suite / "deps_yaml", files={"dependencies.yml": "- [gitlab\n"})
    write_task_folder(suite / "no_evaluator", omit=("evaluator.py",))
    found = problems(suite)
    expected = {
        "no_md/task.md": "is missing: every task folder needs a task.md",
        "empty_md/task.md": "is empty: it must hold the instruction",
        "no_grader/evaluator.py: grade_checkpoints": "defines no grade_checkpoints function",
        "syntax/evaluator.py": "has a syntax error at line 1, column 23",
        "no_dockerfile/Dockerfile": "is missing: every task folder needs a Dockerfile",
        "no_from/Dockerfile: FROM": "has no FROM line",
        "no_deps/dependencies.yml": "is missing: every task folder needs one",
        "deps_mapping/dependencies.yml": "must be a YAML list of service names",
        "deps_yaml/dependencies.yml": "is not valid YAML",
        "no_evaluator/evaluator.py": "is missing: every task folder needs an evaluator.py",
    }
    assert len(found) == len(expected), found
    for where, reason in expected.items():
        assert any(f"{suite}/{where}: " in p and reason in p for p in found), (where, found)


def test_syntax_error_names_its_line(tmp_path: Path) -> None:
    source = "from scoring import Result\n\n\ndef grade_checkpoints(trajectory=''):\n  return [\n"
    task = write_task_folder(tmp_path / "t", files={"evaluator.py": source})
    message = only_problem(task)
    assert message.startswith(f"{task}/evaluator.py: has a syntax error at line 5")


def test_unknown_service_lists_the_known_ones(tmp_path: Path) -> None:
    suite = tmp_path / "suite"
    write_task_folder(suite / "t", files={"dependencies.yml": "- notes\n- gitlab\n"})
    (suite / "services.yml").write_text(REGISTRY)
    message = only_problem(suite)
    assert message == (
        f"{suite}/t/dependencies.yml: 1: unknown service 'gitlab'; the registry "
        f"{(suite / 'services.yml').resolve()} knows: notes, wiki"
    )


def test_a_dependency_without_a_registry_says_where_to_put_one(tmp_path: Path) -> None:
    task = write_task_folder(tmp_path / "t", files={"dependencies.yml": "- notes\n"})
    message = only_problem(task)
    assert "names service 'notes' but the suite has no service registry" in message
    assert "services.yml at the suite root or pass --services FILE" in message


def test_services_option_names_the_registry(tmp_path: Path) -> None:
    write_task_folder(tmp_path / "suite" / "t", files={"dependencies.yml": "- wiki\n"})
    registry = tmp_path / "elsewhere.yml"
    registry.write_text(REGISTRY)
    ref = resolve_suite(tmp_path / "suite", services=registry)
    assert ref.services == str(registry.resolve())
    suite = load_suite(ref)
    assert suite.entry("t").task.metadata["dependencies"] == ["wiki"]
    with pytest.raises(ConfigError, match="--services: no such services file"):
        resolve_suite(tmp_path / "suite", services=tmp_path / "missing.yml")


def test_a_malformed_registry_is_reported_field_by_field(tmp_path: Path) -> None:
    suite = tmp_path / "suite"
    write_task_folder(suite / "t", files={"dependencies.yml": "- notes\n"})
    (suite / "services.yml").write_text(
        "services:\n"
        "  notes:\n    reset: x\n    reset_url: http://a/reset\n"
        "  wiki:\n    health_url: ftp://wiki\n    timeout_sec: -1\n"
        "  chat:\n    healthurl: http://chat\n"
    )
    found = problems(suite)
    registry = suite / "services.yml"
    assert found == [
        f"{registry}: services.notes: give 'reset' (a command) or 'reset_url', not both",
        f"{registry}: services.wiki.health_url: must be an http:// or https:// URL, "
        "got 'ftp://wiki'",
        f"{registry}: services.wiki.timeout_sec: Input should be greater than 0",
        f"{registry}: services.chat.healthurl: Extra inputs are not permitted",
    ]


def test_registry_that_is_not_yaml(tmp_path: Path) -> None:
    suite = tmp_path / "suite"
    write_task_folder(suite / "t")
    (suite / "services.yml").write_text("services:\n  notes: [\n")
    assert "services.yml: is not valid YAML" in only_problem(suite)


def test_mixed_base_images_need_the_option(tmp_path: Path) -> None:
    dockerfile = (
        "FROM ghcr.io/theagentcompany/task-base-image:1.0.0 AS base\n"
        "FROM python:3.12\nCOPY --from=base /utils /utils\n"
    )
    task = write_task_folder(tmp_path / "t", files={"Dockerfile": dockerfile})
    assert "pass --base-image IMAGE" in only_problem(task)
    load_suite(resolve_suite(task, base_image="x/y:1"))


def test_only_the_docker_backend(tmp_path: Path) -> None:
    task = write_task_folder(tmp_path / "t")
    with pytest.raises(ConfigError) as caught:
        resolve_suite(task, backend="local")
    assert caught.value.field == "--backend"
    assert "run only on the docker backend" in str(caught.value)
    assert resolve_suite(task, backend="docker").backend == "docker"


def test_options_of_other_formats_are_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="--base-image: python suites take no base-image"):
        resolve_suite(ROOT / "tasks" / "demo", base_image="x")
    with pytest.raises(ConfigError, match="--index: task-folder suites take no index"):
        resolve_suite(write_task_folder(tmp_path / "t"), index=tmp_path / "t" / "task.md")


def test_cli_validate_lists_problems_and_takes_the_options(tmp_path: Path) -> None:
    suite = tmp_path / "suite"
    write_task_folder(suite / "ok", files={"dependencies.yml": "- wiki\n"})
    write_task_folder(suite / "bad", omit=("Dockerfile",))
    registry = tmp_path / "reg.yml"
    registry.write_text(REGISTRY)
    runner = CliRunner()
    done = runner.invoke(app, ["tasks", "validate", str(suite), "--services", str(registry)])
    assert done.exit_code == 2
    assert f"{suite}/bad/Dockerfile: is missing" in done.output
    assert "1 problem" in done.output
    (suite / "bad" / "Dockerfile").write_text("FROM debian:12\n")
    done = runner.invoke(
        app,
        ["tasks", "validate", str(suite), "--services", str(registry), "--base-image", "a/b:1"],
    )
    assert done.exit_code == 0, done.output
    assert "2 tasks" in done.output
    listed = runner.invoke(app, ["tasks", "list", str(suite), "--services", str(registry)])
    assert listed.exit_code == 0 and "ok" in listed.output and "sandbox" in listed.output


def test_cli_run_refuses_another_backend(tmp_path: Path) -> None:
    task = write_task_folder(tmp_path / "t")
    done = CliRunner().invoke(
        app, ["run", str(task), "--backend", "local", "--agent", "noop", "--out", str(tmp_path)]
    )
    assert done.exit_code == 2
    assert "--backend: task-folder suites run only on the docker backend" in done.output


def test_a_folder_without_tasks(tmp_path: Path) -> None:
    (tmp_path / "suite" / "data").mkdir(parents=True)
    message = only_problem(tmp_path / "suite", format="task-folder")
    assert message.startswith(f"{tmp_path / 'suite'}: holds no task folder")
