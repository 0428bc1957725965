"""Bad paths and refused configurations: one paragraph, exit code 2, no traceback, no run left.

Every option that takes a path is tried with a file where a directory belongs,
a read-only file system and a loop of symbolic links; a task file nested
too deeply; and an SSH host whose key is unknown, which only a worker finds
out (its error used to arrive wrapped in Ray's stack trace, after the run's
manifest was written).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.backends.ssh.sshd import running_sshd, sshd_missing
from tests.conftest import ROOT, SLEEPY_SUITE, crabray


def assert_one_paragraph(done: subprocess.CompletedProcess[str], *expected: str) -> None:
    """Exit code 2 and an ``error:`` paragraph saying each of ``expected``; no traceback."""
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr, done.stderr
    error = done.stderr[done.stderr.index("error:") :]
    assert error.strip().count("\n") == 0, f"more than one paragraph:\n{error}"
    for text in expected:
        assert text in error, f"{text!r} not in {error!r}"


@pytest.fixture
def a_file(tmp_path: Path) -> Path:
    path = tmp_path / "a-file"
    path.write_text("not a directory\n")
    return path


@pytest.fixture
def link_loop(tmp_path: Path) -> Path:
    (tmp_path / "loop-a").symlink_to(tmp_path / "loop-b")
    (tmp_path / "loop-b").symlink_to(tmp_path / "loop-a")
    return tmp_path / "loop-a"


@pytest.fixture
def read_only(tmp_path: Path) -> Iterator[list[str]]:
    """A command prefix running crabray with ``tmp_path/ro`` on a read-only file system.

    bubblewrap bind-mounts the directory read-only for the one process (root
    ignores file permissions, so chmod would prove nothing).
    """
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        pytest.skip("needs bubblewrap for a read-only mount: apt-get install bubblewrap")
    directory = tmp_path / "ro"
    directory.mkdir()
    yield [bwrap, "--bind", "/", "/", "--ro-bind", str(directory), str(directory),
           "--dev", "/dev", "--proc", "/proc", sys.executable, "-m", "crabray"]  # fmt: skip


def in_read_only(prefix: list[str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*prefix, *args], capture_output=True, text=True, timeout=300, cwd=ROOT,
        env={"COLUMNS": "200", "NO_COLOR": "1", "PATH": "/usr/bin:/bin"},
    )  # fmt: skip


def test_run_out_that_is_a_file(tmp_path: Path, a_file: Path) -> None:
    done = crabray("run", "tasks/demo", "--agent", "oracle", "--out", str(a_file))
    assert_one_paragraph(done, "--out", str(a_file), "is a file")
    done = crabray("run", "tasks/demo", "--agent", "oracle", "--out", str(a_file / "below"))
    assert_one_paragraph(done, "--out", str(a_file / "below"), "Not a directory")


def test_run_out_on_a_read_only_file_system(tmp_path: Path, read_only: list[str]) -> None:
    out = tmp_path / "ro" / "out"
    done = in_read_only(read_only, "run", "tasks/demo", "--agent", "oracle", "--out", str(out))
    assert_one_paragraph(done, "--out", str(out), "Read-only file system")
    assert not out.exists()


def test_leaderboard_html_onto_a_file_or_read_only(
    tmp_path: Path, a_file: Path, read_only: list[str]
) -> None:
    done = crabray("leaderboard", str(tmp_path), "--html", str(a_file))
    assert_one_paragraph(done, "--html", str(a_file), "is a file")
    site = tmp_path / "ro" / "site"
    done = in_read_only(read_only, "leaderboard", str(tmp_path), "--html", str(site))
    assert_one_paragraph(done, "--html", str(site), "Read-only file system")


def test_runs_list_of_a_file(a_file: Path) -> None:
    done = crabray("runs", "list", str(a_file))
    assert_one_paragraph(done, str(a_file), "is a file")


@pytest.mark.parametrize("command", [["tasks", "list"], ["tasks", "validate"], ["run"]])
def test_suite_that_is_a_loop_of_links(link_loop: Path, command: list[str]) -> None:
    extra = ["--agent", "oracle"] if command == ["run"] else []
    done = crabray(*command, str(link_loop), *extra)
    assert_one_paragraph(done, str(link_loop), "loop of symbolic links")


def test_index_that_is_a_loop_of_links(link_loop: Path) -> None:
    done = crabray("tasks", "list", "tasks/task_json_demo", "--index", str(link_loop))
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr


def test_task_json_nested_too_deeply(tmp_path: Path) -> None:
    source = ROOT / "tasks" / "task_json_demo" / "examples" / "shell"
    task_dir = next(p for p in sorted(source.iterdir()) if p.is_dir())
    suite = tmp_path / "deep"
    target = suite / "examples" / "shell" / task_dir.name
    shutil.copytree(task_dir, target)
    task_file = target / f"{task_dir.name}.json"
    document = json.loads(task_file.read_text())
    document["extra"] = 1
    text = json.dumps(document)
    task_file.write_text(text.replace('"extra": 1', '"extra": ' + "[" * 50_000 + "]" * 50_000))
    for command in (["tasks", "validate"], ["run"]):
        extra = ["--agent", "oracle", "--out", str(tmp_path / "out")] if command == ["run"] else []
        done = crabray(*command, str(suite), "--format", "task-json", *extra)
        assert done.returncode == 2, done.stderr  # a suite problem, listed with its file
        assert "Traceback" not in done.stderr
        assert f"{task_file}: is nested too deeply" in done.stderr
    assert not (tmp_path / "out").exists()


@pytest.mark.component  # sshd and local Ray
def test_unknown_ssh_host_key_stops_the_run_before_it_opens(tmp_path: Path) -> None:
    """Only a worker can find out (orphan cleanup connects first): no Ray trace, no manifest."""
    missing = sshd_missing()
    if missing:
        pytest.skip(missing)
    empty_known_hosts = tmp_path / "known_hosts"
    empty_known_hosts.write_text("")
    with running_sshd(tmp_path / "sshd") as sshd:
        settings = sshd.settings(
            remote_root=str(tmp_path / "remote"), known_hosts=str(empty_known_hosts)
        )
        suite = tmp_path / "remote.py"
        suite.write_text(
            SLEEPY_SUITE.replace(
                'EnvironmentConfig(name="box",',
                f'EnvironmentConfig(name="box", backend="ssh", backend_settings={settings!r},',
            )
            .replace("N_TASKS", "1")
            .replace("SLEEP", "0")
            .replace("LIMIT", "None")
        )
        out = tmp_path / "out"
        done = crabray("run", str(suite), "--agent", "oracle", "--out", str(out))
    assert_one_paragraph(done, "host key")
    assert "RayTaskError" not in done.stderr
    assert not list((out / "runs").glob("*.json")), "no empty run is left behind"


@pytest.mark.parametrize(
    "command", [["run", "tasks/demo", "-a", "oracle"], ["tasks", "grade", "tasks/demo", "hello"]]
)
def test_a_misspelt_backend_is_one_message_naming_the_flag(
    tmp_path: Path, command: list[str]
) -> None:
    """``--backend dockr`` (issue 39): it blamed "environment 'workstation'", once per
    environment, and suggested nothing."""
    out = tmp_path / "results"
    done = crabray(*command, "--backend", "dockr", *(["--out", str(out)] * (command[0] == "run")))
    assert done.returncode == 2, done.stdout + done.stderr
    assert "Traceback" not in done.stderr, done.stderr
    assert "--backend" in done.stderr and "did you mean 'docker'" in done.stderr, done.stderr
    assert done.stderr.count("dockr") == 1, done.stderr
    assert "workstation" not in done.stderr, done.stderr
    assert not out.exists(), "a refused run leaves nothing behind"


def test_a_misspelt_backend_in_a_run_file_is_one_message_naming_the_file(tmp_path: Path) -> None:
    run_file = tmp_path / "run.toml"
    demo = ROOT / "tasks" / "demo"
    run_file.write_text(f'suite = "{demo}"\nagents = ["oracle"]\nbackend = "dockr"\n')
    done = crabray("run", "--config", str(run_file), "--out", str(tmp_path / "results"))
    assert_one_paragraph(done, str(run_file), "backend", "'dockr'", "did you mean 'docker'")
    assert done.stderr.count("dockr") == 1, done.stderr
