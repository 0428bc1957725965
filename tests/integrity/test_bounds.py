"""What an agent causes is the agent's, and what it leaves in its sandbox is bounded (issue 24).

Each attack is a task whose oracle solution is the attack, run by the real
``crabray run`` on local sandboxes confined by bubblewrap: the agent scores 0,
its episode counts (a final row, attempt 0, never ``env_error``), and the row
says what happened. The bounds themselves (cgroup, disk, file and reply caps,
hostile trees) are also checked at the backend, against a real sandbox.
"""

from __future__ import annotations

import json
import os
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from crabray.actions import file_contains, file_equals, read_file
from crabray.actions.limits import MAX_READ_BYTES
from crabray.backends.base import PythonCall
from crabray.backends.episode_env import EpisodeEnv
from crabray.backends.guest import GuestCallError, python_call
from crabray.backends.local import LocalBackend
from crabray.backends.local import _limits as limits
from crabray.core import action
from crabray.core.env import AgentSignals
from crabray.core.environment import EnvironmentConfig
from crabray.core.errors import FileTooLargeError, SandboxBrokenError, SandboxFileError
from tests.backends.conftest import require_kind
from tests.conftest import crabray, raw_episode_rows

ATTACK_SUITE = textwrap.dedent(
    """
    from crabray import BenchmarkConfig, EnvironmentConfig, Task, action
    from crabray.actions import (
        FILE_ACTIONS, SHELL_ACTIONS, file_equals, read_file, run_command, write_file,
    )

    @action
    def big_value() -> str:
        \"\"\"Return 150 MB from inside the sandbox (plain Python: it runs in the guest).\"\"\"
        return "x" * (150 * 2**20)

    @action
    def warm_guest() -> str:
        \"\"\"Any plain-Python call: from here on, commands go through the guest.\"\"\"
        return "ready"

    DEEP = (
        "import os\\n"
        "for _ in range(3000):\\n"
        "    os.mkdir('d')\\n"
        "    os.chdir('d')\\n"
    )

    ENV = EnvironmentConfig(
        name="box",
        action_space=[*SHELL_ACTIONS, *FILE_ACTIONS, big_value, warm_guest],
        backend_settings=SETTINGS,
    )
    ANSWER = file_equals(path="answer.txt", content="42")

    def task(id, solution):
        return Task(id=id, description="write 42 to answer.txt", evaluator=ANSWER,
                    solution=solution)

    bench = BenchmarkConfig(
        name="bounds",
        environments=[ENV],
        tasks=[
            task("honest", [write_file(path="answer.txt", content="42")]),
            task("symlink-escape", [
                run_command(command="ln -s / escape"),
                write_file(path="escape/x/y", content="42"),
            ]),
            task("kill-guest", [warm_guest(), run_command(command="kill -9 -1")]),
            task("sparse-answer", [
                run_command(command="truncate -s 1536M answer.txt"),
            ]),
            task("big-value", [big_value()]),
            task("dotdot-read", [
                run_command(command="mkdir -p a && truncate -s 1536M big"),
                read_file(path="a/../big"),
            ]),
            task("deep-tree", [run_command(command="python3 -c " + repr(DEEP))]),
        ],
    )
    """
)


def write_attack_suite(path: Path, settings: dict[str, object]) -> Path:
    path.write_text(ATTACK_SUITE.replace("SETTINGS", repr(settings)))
    return path


@pytest.fixture
def bwrap() -> str:
    return require_kind("local-bwrap")


@pytest.mark.ray
@pytest.mark.slow
def test_attacks_score_zero_and_count_and_a_later_run_is_unharmed(
    tmp_path: Path, bwrap: str
) -> None:
    root = tmp_path / "sandboxes"
    settings = {"isolation": "bwrap", "root_dir": str(root)}
    suite = write_attack_suite(tmp_path / "attacks.py", settings)
    out = tmp_path / "out"
    done = crabray("run", str(suite), "--agent", "oracle", "--out", str(out), timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    columns = ["task_id", "attempt", "termination_reason", "score", "error"]
    rows = {r["task_id"]: r for r in raw_episode_rows(out, columns)}
    assert len(raw_episode_rows(out, columns)) == 7, "one row each: nothing was retried"
    assert {t: r["score"] for t, r in rows.items()} == {
        "honest": 1.0,
        "symlink-escape": 0.0,
        "kill-guest": 0.0,
        "sparse-answer": 0.0,
        "big-value": 0.0,
        "dotdot-read": 0.0,
        "deep-tree": 0.0,
    }
    assert all(r["attempt"] == 0 for r in rows.values())
    assert not [t for t, r in rows.items() if r["termination_reason"] == "env_error"], rows
    killed = rows["kill-guest"]
    # The confined sandbox lives on without its guest, which froze the agent's processes
    # while it was graded: the guest that freezes them now is the agent's to reach, so the
    # grade is no pass, as the agent's own sandbox_error.
    assert killed["termination_reason"] == "sandbox_error", killed
    assert "grader" in killed["error"] and "replaced" in killed["error"], killed
    board = crabray("leaderboard", str(out), "--format", "json", check=True)
    (entry,) = json.loads(board.stdout)
    assert entry["episodes"] == 7 and entry["success_rate"] == pytest.approx(1 / 7), entry
    first = set(root.glob("crabray-*"))

    # What the first run left (a sandbox whose actor Ray killed at the end) never fails the
    # next one: its cleanup removes it, mounted disk and deep trees included.
    again = tmp_path / "again"
    later = crabray("run", str(suite), "--agent", "noop", "--out", str(again), timeout=600)
    assert later.returncode == 0, later.stderr[-3000:]
    assert not first & set(root.glob("crabray-*")), "the later run removed the leftovers"


def test_the_rule_of_who_caused_a_sandbox_failure() -> None:
    from crabray.core.errors import SandboxConfigError, SandboxError
    from crabray.core.result import TerminationReason, sandbox_failure_reason

    assert sandbox_failure_reason(SandboxBrokenError("guest killed")) is (
        TerminationReason.SANDBOX_ERROR
    )
    assert sandbox_failure_reason(SandboxConfigError("no image")) is TerminationReason.SETUP_ERROR
    assert sandbox_failure_reason(SandboxError("engine gone")) is TerminationReason.ENV_ERROR
    assert not TerminationReason.SANDBOX_ERROR.is_infra


@pytest.fixture
def jail(tmp_path: Path, bwrap: str) -> Iterator[LocalBackend]:
    backend = LocalBackend(
        EnvironmentConfig(
            name="jail",
            backend="local",
            backend_settings={
                "root_dir": str(tmp_path / "sandboxes"),
                "isolation": "bwrap",
                "sandbox_memory_mb": 256,
                "pids_limit": 64,
                "disk_mb": 64,
            },
        )
    )
    backend.start()
    try:
        yield backend
    finally:
        backend.close()


def as_root_with_cgroups() -> None:
    if os.geteuid() != 0 or limits.controllers() is None:
        pytest.skip("cgroup and disk limits need a root driver on a host with cgroups")


def test_a_symlink_to_a_read_only_place_is_the_agents_bad_write(jail: LocalBackend) -> None:
    assert jail.exec("ln -s / escape").ok
    with pytest.raises(SandboxFileError, match="Read-only file system"):
        jail.put_file("escape/x/y", b"42")
    assert jail.exec("echo fine").stdout == "fine\n"


def test_a_killed_guest_is_the_agents_doing(jail: LocalBackend) -> None:
    """A confined sandbox's commands outlive the guest the agent killed: they start through
    the entry program again (nothing the agent touched), and only a Python call, which
    needs a new guest, makes the grading path the agent's broken one."""
    jail.check_python()  # commands now go through the guest
    assert jail.exec("kill -9 -1; echo after").stdout == "after\n"
    assert jail.grader_distrust(ran_commands=True) is None and not jail.grader_replaced()
    assert jail.call_python(GUEST_PID) > 1
    assert jail.grader_distrust(ran_commands=True) is not None and jail.grader_replaced()
    jail.reset()
    assert jail.exec("echo back").stdout == "back\n"
    assert jail.grader_distrust(ran_commands=True) is None


def test_sandbox_memory_processes_and_disk_are_bounded(jail: LocalBackend) -> None:
    as_root_with_cgroups()
    eaten = jail.exec('python3 -c "b = bytearray(600 * 2**20); print(len(b))"')
    assert eaten.exit_code != 0 and eaten.stdout == "", eaten
    forked = jail.exec("for i in $(seq 200); do sleep 30 & done; wait", timeout_sec=10)
    assert "fork" in forked.stderr.lower() or "resource" in forked.stderr.lower(), forked
    jail.reset()
    filled = jail.exec("head -c 100M /dev/zero > /tmp/fill")
    assert filled.exit_code != 0 and "No space left" in filled.stderr, filled
    with pytest.raises(SandboxFileError, match="the sandbox's own disk"):
        jail.put_file("more.bin", b"x" * (8 * 2**20))
    jail.reset()
    assert jail.exec("df -m /tmp | tail -1").ok


def test_big_files_are_refused_before_a_byte_is_read(jail: LocalBackend) -> None:
    env = EpisodeEnv("jail", jail, AgentSignals())
    assert jail.exec("truncate -s 1536M answer.txt && mkdir a && ln -s /tmp b").ok
    with pytest.raises(FileTooLargeError) as caught:
        jail.get_file("answer.txt", max_bytes=1024)
    assert caught.value.size == 1536 * 2**20
    assert file_equals(path="answer.txt", content="42").evaluate(env, None) is False
    assert file_contains(path="answer.txt", text="42").evaluate(env, None) is False
    # The cap is the opened file's: `a/..` cannot make a small file stand for the big one.
    text = read_file.run(env, path="a/../answer.txt")
    assert text.endswith(f"at {MAX_READ_BYTES} bytes of {1536 * 2**20}]"), text[-200:]


GUEST_PID = PythonCall(
    action="pid",
    function="pid",
    units=[("pid.py", 1, "import os\ndef pid():\n    return os.getpid()\n")],
    arguments_json="{}",
)


@action
def returns_a_lot() -> str:
    """Return 40 MB from inside the sandbox: more than a call may return, less than its memory."""
    return "x" * (40 * 2**20)


def test_a_huge_plain_python_value_is_refused_inside_the_sandbox(jail: LocalBackend) -> None:
    with pytest.raises(GuestCallError, match=r"more than the \d+ a plain-Python action may return"):
        jail.call_python(python_call(returns_a_lot, {}))
    assert jail.exec("echo usable").stdout == "usable\n"


def test_reset_and_close_survive_a_tree_deeper_than_any_recursion_limit(
    jail: LocalBackend,
) -> None:
    deep = (
        "import os\n"
        "for _ in range(3000):\n"
        "    os.mkdir('d')\n"
        "    os.chdir('d')\n"
        "os.chmod('.', 0o500)\n"
    )
    assert jail.exec(["python3", "-c", deep]).ok
    jail.reset()
    assert jail.exec("ls -A").stdout == ""
    assert jail.exec(["python3", "-c", deep]).ok
    root = jail.root
    jail.close()
    assert not root.exists()


def test_a_killed_guest_is_the_agents_doing_in_a_container_too(tmp_path: Path) -> None:
    require_kind("docker-python")
    import docker

    from crabray.backends import create_backend

    config = EnvironmentConfig(
        name="boxed", backend="docker", backend_settings={"image": "crabray/debian:latest"}
    )
    backend = create_backend(config)
    backend.start()
    try:
        backend.check_python()
        assert backend.exec("truncate -s 1536M big").ok
        with pytest.raises(FileTooLargeError):
            backend.get_file("big", max_bytes=1024)
        # As root, `kill -9 -1` ends the container's main process: the container stops; the
        # engine still answers, so it is the agent's. (A command sent before the container has
        # stopped may still run in it: the test waits for the stop, as a busy machine may not.)
        with pytest.raises(SandboxBrokenError, match="something inside the sandbox killed it"):
            backend.exec("kill -9 -1")
            docker.APIClient().wait(backend.describe()["container"], timeout=30)
            backend.exec("true")
    finally:
        backend.close()
