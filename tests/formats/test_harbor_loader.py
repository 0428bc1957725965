"""Harbor suites on the host: detection, what task.toml maps onto, and the problems
`crabray tasks validate` reports (file, field, reason; exit 2). Nothing runs in a sandbox."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from crabray.core.errors import ConfigError
from crabray.formats import SuiteErrors, load_suite, resolve_suite
from crabray.formats.harbor import is_harbor_task
from crabray.formats.harbor._config import resolve_env, size_mb
from tests.conftest import crabray

SUITE = Path(__file__).resolve().parent / "harbor_suite"


@pytest.fixture
def suite(tmp_path: Path) -> Path:
    """A copy of the fixture suite, to break."""
    return Path(shutil.copytree(SUITE, tmp_path / "suite"))


def test_suite_and_single_task_are_detected_as_harbor() -> None:
    assert resolve_suite(SUITE).format == "harbor"
    assert resolve_suite(SUITE / "write-hello").format == "harbor"
    assert is_harbor_task(SUITE / "count-lines")
    assert not is_harbor_task(SUITE)


def test_task_toml_maps_onto_limits_and_docker_settings() -> None:
    loaded = load_suite(resolve_suite(SUITE, base_image="crabray/debian:latest"))
    assert sorted(e.task.id for e in loaded.entries.values()) == ["count-lines", "write-hello"]
    hello = loaded.entry("write-hello")
    assert (
        hello.task.description == "Create the file /app/out.txt containing the single word hello."
    )
    assert hello.task.time_limit_sec == 120.0
    assert hello.task.tags == ["hello", "fixture"]
    assert hello.task.metadata["verifier_timeout_sec"] == 60.0
    (env,) = hello.benchmark.environments
    settings = env.backend_settings
    assert env.backend == "docker"
    assert settings["build_context"] == str((SUITE / "write-hello" / "environment").resolve())
    assert settings["base_image"] == "crabray/debian:latest"
    assert (settings["cpus"], settings["memory_mb"], settings["network"]) == (1.0, 512, "none")
    count = loaded.entry("count-lines")
    assert count.task.time_limit_sec == 300.0
    assert count.benchmark.environments[0].backend_settings["memory_mb"] == 768
    # The oracle: the solution folder in chunks, then solve.sh; the scorer is the verifier.
    assert [a.name for a in count.task.solution][-1] == "run_command"
    assert "COUNT_FILE=/app/count.txt" in str(count.task.solution[-1].bound)
    assert count.task.scorer is not None and count.task.scorer.name == "harbor_verifier"


def test_defaults_give_network_and_no_solution_is_allowed(suite: Path) -> None:
    task = suite / "write-hello"
    (task / "task.toml").write_text('version = "1.0"\n')
    shutil.rmtree(task / "solution")
    entry = load_suite(resolve_suite(task)).entry("write-hello")
    settings = entry.benchmark.environments[0].backend_settings
    assert (settings["cpus"], settings["memory_mb"], settings["network"]) == (
        1.0,
        2048,
        "crabray-net",
    )
    assert "base_image" not in settings
    assert entry.task.time_limit_sec is None
    assert entry.task.solution == []


def test_every_problem_names_file_and_field(suite: Path) -> None:
    hello, count = suite / "write-hello", suite / "count-lines"
    (hello / "task.toml").write_text(
        '[agent]\ntimeout_sec = "soon"\n[environment]\ngpus = 1\nmemory = "lots"\n'
    )
    (hello / "tests" / "test.sh").unlink()
    (count / "instruction.md").write_text("  \n")
    (count / "environment" / "Dockerfile").write_text("# no base\nRUN true\n")
    with pytest.raises(SuiteErrors) as raised:
        load_suite(resolve_suite(suite))
    found = {
        (Path(e.file or "").relative_to(suite).as_posix(), e.field) for e in raised.value.errors
    }
    assert found == {
        ("write-hello/task.toml", "agent.timeout_sec"),
        ("write-hello/task.toml", "environment.gpus"),
        ("write-hello/task.toml", "environment.memory"),
        ("write-hello/tests/test.sh", None),
        ("count-lines/instruction.md", None),
        ("count-lines/environment/Dockerfile", "FROM"),
    }
    reasons = " ".join(e.reason for e in raised.value.errors)
    assert "GPU" in reasons


def test_tasks_valid_for_harbor_that_crabray_cannot_run_are_listed_unsupported(
    suite: Path,
) -> None:
    """A multi-step task and a docker compose environment are valid Harbor tasks: the
    suite validates, lists them with the reason, and a run skips them."""
    hello, count = suite / "write-hello", suite / "count-lines"
    shutil.rmtree(hello / "tests")
    (hello / "instruction.md").unlink()
    (hello / "steps" / "1_step_one" / "tests").mkdir(parents=True)
    (count / "environment" / "docker-compose.yaml").write_text("services: {}\n")
    loaded = load_suite(resolve_suite(suite))
    assert loaded.task_ids == []
    assert "multi-step" in loaded.unsupported["write-hello"]
    assert "docker compose" in loaded.unsupported["count-lines"]
    done = crabray("tasks", "validate", str(suite))
    assert done.returncode == 0, done.stdout + done.stderr
    shown = done.stdout + done.stderr
    assert "write-hello" in shown and "count-lines" in shown and "docker compose" in shown


def test_validate_reports_problems_and_exits_2(suite: Path) -> None:
    (suite / "count-lines" / "task.toml").write_text("[verifier\ntimeout_sec = 1\n")
    (suite / "write-hello" / "task.toml").write_text('[agent]\nuser = "agent"\n')
    done = crabray("tasks", "validate", str(suite))
    assert done.returncode == 2, done.stdout + done.stderr
    shown = done.stdout + done.stderr
    assert "count-lines/task.toml" in shown and "is not valid TOML" in shown
    assert "write-hello/task.toml" in shown and "agent.user 'agent' is not supported" in shown


def test_validate_and_list_a_valid_suite() -> None:
    done = crabray("tasks", "validate", str(SUITE))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "2 tasks" in done.stdout
    listed = crabray("tasks", "list", str(SUITE))
    assert listed.returncode == 0, listed.stdout + listed.stderr
    assert "count-lines" in listed.stdout and "write-hello" in listed.stdout


def test_only_the_docker_backend(suite: Path) -> None:
    with pytest.raises(ConfigError, match="harbor suites run only on the docker backend"):
        resolve_suite(suite, backend="local")


def test_a_folder_without_tasks_is_refused(tmp_path: Path) -> None:
    (tmp_path / "empty" / "notes").mkdir(parents=True)
    (tmp_path / "empty" / "notes" / "instruction.md").write_text("hi\n")
    with pytest.raises(SuiteErrors) as raised:
        load_suite(resolve_suite(tmp_path / "empty", format="harbor"))
    assert {Path(e.file or "").name for e in raised.value.errors} == {
        "task.toml",
        "Dockerfile",
        "test.sh",
    }


def test_sizes_and_templates(monkeypatch: pytest.MonkeyPatch) -> None:
    assert (size_mb("2G"), size_mb("512M"), size_mb("1.5g")) == (2048, 512, 1536)
    with pytest.raises(ValueError, match="must be a size"):
        size_mb("lots")
    monkeypatch.setenv("HARBOR_TEST_KEY", "sk-1")
    monkeypatch.delenv("HARBOR_TEST_UNSET", raising=False)
    assert resolve_env(
        {"A": "${HARBOR_TEST_KEY}", "B": "x${HARBOR_TEST_UNSET:-dflt}y", "C": "plain"}, "v"
    ) == {"A": "sk-1", "B": "xdflty", "C": "plain"}
    with pytest.raises(ConfigError, match="HARBOR_TEST_UNSET"):
        resolve_env({"A": "${HARBOR_TEST_UNSET}"}, "verifier.env")
