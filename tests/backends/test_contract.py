"""The contract every backend honours, run against the real thing.

Each test takes started backends from ``backend_factory`` (see ``conftest.py``),
so adding a kind there runs this whole file against it. Only the behaviour the
``Backend`` docstrings promise is checked here; rules of one backend live in
that backend's own test module.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import Any

import pytest

from crabray.backends import Backend
from crabray.core.errors import SandboxError, SandboxFileError

BackendFactory = Callable[..., Backend]

_ALIVE_SCRIPT = r"""
for p in "$@"; do
  if [ -d /proc/self ]; then
    [ -r "/proc/$p/stat" ] || continue
    read -r line < "/proc/$p/stat" || continue
    rest=${line##*") "}
    [ "${rest%% *}" = Z ] && continue
    grep -q sleep "/proc/$p/cmdline" 2>/dev/null || continue
    echo "$p"
  elif kill -0 "$p" 2>/dev/null; then
    echo "$p"
  fi
done
"""
"""Prints which of the given pids still run a ``sleep``, seen from inside the sandbox.

Zombies count as dead (they only wait for a reaper) and a pid now running
something else counts as dead (a fresh sandbox may reuse pid numbers).
"""


def alive_in_sandbox(backend: Backend, pids: list[int]) -> list[int]:
    """The pids among ``pids`` that still run inside the sandbox."""
    result = backend.exec(["sh", "-c", _ALIVE_SCRIPT, "alive", *map(str, pids)], timeout_sec=30)
    assert result.exit_code == 0, result.stderr
    return [int(line) for line in result.stdout.split()]


def all_gone(backend: Backend, pids: list[int], within_sec: float = 5.0) -> bool:
    """Whether every pid has died, allowing a killed process a moment to go."""
    deadline = time.monotonic() + within_sec
    while alive_in_sandbox(backend, pids):
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.05)
    return True


def start_background_sleeps(backend: Backend, count: int = 2) -> list[int]:
    """Leave ``count`` detached ``sleep`` processes behind; a real leftover to clean up."""
    script = (
        "for i in " + " ".join(["x"] * count) + "; do sleep 300 >/dev/null 2>&1 & echo $!; done"
    )
    result = backend.exec(script, timeout_sec=30)
    assert result.exit_code == 0, result.stderr
    pids = [int(line) for line in result.stdout.split()]
    assert len(pids) == count
    assert sorted(alive_in_sandbox(backend, pids)) == sorted(pids)
    return pids


def test_exit_code_zero(backend: Backend) -> None:
    result = backend.exec("true")
    assert (result.exit_code, result.timed_out, result.ok) == (0, False, True)


def test_nonzero_exit_code_is_a_result(backend: Backend) -> None:
    result = backend.exec("exit 42")
    assert result.exit_code == 42
    assert result.ok is False
    assert result.timed_out is False


def test_stdout_and_stderr_are_separate(backend: Backend) -> None:
    result = backend.exec("echo to-out; echo to-err >&2; echo more-out; exit 3")
    assert result.stdout == "to-out\nmore-out\n"
    assert result.stderr == "to-err\n"
    assert result.exit_code == 3


def test_argv_list_is_not_interpreted_by_a_shell(backend: Backend) -> None:
    result = backend.exec(["printf", "%s|", "a b", "$HOME", "; echo injected"])
    assert result.stdout == "a b|$HOME|; echo injected|"
    assert result.exit_code == 0


def test_string_runs_through_the_shell(backend: Backend) -> None:
    result = backend.exec("X=shell; printf '%s-%s' \"$X\" $((40 + 2)) | tr a-z A-Z")
    assert result.stdout == "SHELL-42"


def test_cwd_is_relative_to_the_sandbox(backend: Backend) -> None:
    backend.put_file("sub/dir/marker.txt", b"here\n")
    result = backend.exec(["cat", "marker.txt"], cwd="sub/dir")
    assert result.stdout == "here\n"
    pwd = backend.exec("pwd", cwd="sub/dir").stdout.strip()
    assert pwd.endswith("/sub/dir")
    home_pwd = backend.exec("pwd").stdout.strip()
    assert pwd == f"{home_pwd}/sub/dir"


def test_env_vars_reach_the_command_and_do_not_persist(backend: Backend) -> None:
    result = backend.exec(
        'printf "%s|%s" "$GREETING" "$OTHER"', env={"GREETING": "hi there", "OTHER": "ü"}
    )
    assert result.stdout == "hi there|ü"
    assert backend.exec('printf "%s" "${GREETING-unset}"').stdout == "unset"


def test_home_exists_and_is_writable(backend: Backend) -> None:
    result = backend.exec('test -d "$HOME" && touch "$HOME/probe" && echo ok')
    assert result.stdout == "ok\n", result.stderr


def test_timeout_kills_the_command_and_its_children(backend: Backend) -> None:
    command = (
        "sleep 30 & echo $! > bg.pid; echo $$ > shell.pid; "
        "sh -c 'echo $$ > child.pid; exec sleep 30'"
    )
    started = time.monotonic()
    result = backend.exec(command, timeout_sec=2)
    elapsed = time.monotonic() - started
    assert result.timed_out is True
    assert result.exit_code == -1
    assert result.ok is False
    assert 1.5 <= elapsed < 15
    pids = [int(backend.get_file(name).decode()) for name in ("bg.pid", "shell.pid", "child.pid")]
    assert all_gone(backend, pids), f"still alive: {alive_in_sandbox(backend, pids)}"


def test_command_within_its_timeout_is_not_killed(backend: Backend) -> None:
    result = backend.exec("sleep 0.2; echo done", timeout_sec=20)
    assert (result.stdout, result.exit_code, result.timed_out) == ("done\n", 0, False)


def test_put_get_round_trip_keeps_every_byte_value(backend: Backend) -> None:
    data = bytes(range(256)) * 4
    backend.put_file("nested/deeper/all-bytes.bin", data)
    assert backend.get_file("nested/deeper/all-bytes.bin") == data
    size = backend.exec(["wc", "-c", "nested/deeper/all-bytes.bin"]).stdout.split()[0]
    assert int(size) == 1024


def test_put_get_round_trip_of_a_large_file(backend: Backend) -> None:
    data = os.urandom(5 * 1024 * 1024 + 7)
    backend.put_file("big.bin", data)
    assert backend.get_file("big.bin") == data


def test_put_overwrites_and_get_sees_what_commands_wrote(backend: Backend) -> None:
    backend.put_file("f.txt", b"first version, longer")
    backend.put_file("f.txt", b"second")
    assert backend.exec(["cat", "f.txt"]).stdout == "second"
    backend.exec("printf 'from a command' > made.txt")
    assert backend.get_file("made.txt") == b"from a command"


def test_get_of_a_missing_file_raises(backend: Backend) -> None:
    with pytest.raises(SandboxFileError, match=r"no-such-file\.txt"):
        backend.get_file("no-such-file.txt")


def test_get_of_a_directory_raises(backend: Backend) -> None:
    backend.exec("mkdir -p just-a-dir")
    with pytest.raises(SandboxFileError, match="just-a-dir"):
        backend.get_file("just-a-dir")


def test_reset_restores_the_clean_state(backend: Backend) -> None:
    clean_listing = backend.exec("ls -A").stdout
    backend.put_file("junk/file.txt", b"junk")
    backend.exec("echo more > top.txt; mkdir -p locked/inner; chmod 000 locked")
    backend.exec('echo dotfile > "$HOME/.leftover"')
    pids = start_background_sleeps(backend)

    backend.reset()

    assert backend.exec("ls -A").stdout == clean_listing
    with pytest.raises(SandboxFileError):
        backend.get_file("junk/file.txt")
    assert backend.exec('test -d "$HOME" && test ! -e "$HOME/.leftover"').exit_code == 0
    assert all_gone(backend, pids), f"still alive: {alive_in_sandbox(backend, pids)}"
    assert backend.exec("echo usable").stdout == "usable\n"


def test_reset_twice_in_a_row_is_fine(backend: Backend) -> None:
    clean_listing = backend.exec("ls -A").stdout
    backend.reset()
    backend.reset()
    assert backend.exec("ls -A").stdout == clean_listing


def test_close_leaves_nothing_behind(
    backend_factory: BackendFactory,
    leftovers: Callable[[dict[str, Any], list[int]], list[str]],
) -> None:
    backend = backend_factory()
    backend.put_file("data.txt", b"x")
    pids = start_background_sleeps(backend)
    described = backend.describe()

    backend.close()

    assert leftovers(described, pids) == []


def test_close_twice_is_harmless_and_the_sandbox_is_unusable_after(
    backend_factory: BackendFactory, backend_kind: str
) -> None:
    backend = backend_factory(name="twice")
    with pytest.raises(SandboxError, match=f"{backend_kind} sandbox of 'twice' is already started"):
        backend.start()
    backend.close()
    backend.close()
    with pytest.raises(SandboxError, match="closed"):
        backend.exec("true")
    with pytest.raises(SandboxError, match="closed"):
        backend.get_file("anything")
    with pytest.raises(SandboxError, match=r"cannot reset: .* is closed"):
        backend.reset()
    with pytest.raises(SandboxError, match="is closed; make a new backend to start again"):
        backend.start()


def test_two_sandboxes_do_not_share_files(backend_factory: BackendFactory) -> None:
    first, second = backend_factory(), backend_factory()
    first.put_file("mine.txt", b"first")
    with pytest.raises(SandboxFileError):
        second.get_file("mine.txt")


def test_describe_names_kind_and_environment(backend: Backend, backend_kind: str) -> None:
    described = backend.describe()
    assert described["kind"] == backend_kind
    assert described["env"] == "contract"


def _ticks(backend: Backend) -> int:
    """How many lines the background writer of :func:`test_freeze_stops_what_the_agent_left`
    has written so far."""
    result = backend.exec("wc -l < ticks", timeout_sec=30)
    return int(result.stdout.strip() or 0)


FREEZES = {"local-bwrap", "docker-python"}
"""Kinds that can stop the agent's processes while it is graded (see docs/isolation.md)."""


def test_freeze_stops_what_the_agent_left(backend: Backend, contract_kind: str) -> None:
    backend.agent_begins()
    started = backend.exec(
        "nohup sh -c 'while :; do echo x >> ticks; sleep 0.02; done' >/dev/null 2>&1 &",
        timeout_sec=30,
    )
    assert started.exit_code == 0, started.stderr
    time.sleep(0.3)
    frozen = backend.freeze_agent()
    if contract_kind not in FREEZES:  # it says the grade cannot be verified, and why
        assert frozen.unverified, frozen
        return
    assert frozen.unverified is None and frozen.frozen >= 1, frozen
    before = _ticks(backend)
    time.sleep(0.5)
    assert _ticks(backend) == before, "a frozen process wrote"
    assert backend.exec("echo graded", timeout_sec=30).stdout == "graded\n"  # graders run
    backend.thaw_agent()
    deadline = time.monotonic() + 10
    while _ticks(backend) == before:
        assert time.monotonic() < deadline, "the thawed process never wrote again"
        time.sleep(0.05)
    assert backend.grader_distrust(ran_commands=False) is None


WATCHES = {"local-bwrap", "docker-python"}
"""Kinds that see the agent change a startup file or a program a grading script may run."""

_SETUP = (
    "mkdir -p ~/.local/bin && echo 'export LANG=C.UTF-8' > ~/.profile "
    "&& printf '#!/bin/sh\\nexit 1\\n' > ~/.local/bin/check && chmod +x ~/.local/bin/check "
    "&& echo setup > notes.txt"
)
_REWRITE = (  # same size, modification time put back: only the change time moves
    "cp -p ~/.profile saved && echo 'export LANG=C.UTF-9' > ~/.profile "
    "&& touch -r saved ~/.profile && rm saved"
)


def test_an_agent_rewriting_a_startup_file_leaves_no_verified_command_grade(
    backend: Backend, contract_kind: str
) -> None:
    """A task's grading script may source ``~/.profile`` or run ``~/.local/bin/check``: the
    setup's own are trusted, the agent's work elsewhere is, and a rewrite of one by the
    agent (even keeping its size and modification time) is not."""
    assert backend.exec(_SETUP, timeout_sec=30).exit_code == 0
    backend.agent_begins()
    worked = backend.exec("echo 42 > answer.txt && echo more >> notes.txt", timeout_sec=30)
    assert worked.exit_code == 0, worked.stderr
    backend.freeze_agent()
    backend.agent_ends()
    if contract_kind in WATCHES:
        assert backend.grader_distrust(ran_commands=True) is None
    backend.thaw_agent()
    rewritten = backend.exec(_REWRITE, timeout_sec=30)
    assert rewritten.exit_code == 0, rewritten.stderr
    backend.freeze_agent()
    backend.agent_ends()
    backend.thaw_agent()
    reason = backend.grader_distrust(ran_commands=True)
    assert reason is not None
    if contract_kind in WATCHES:
        assert ".profile" in reason, reason
        assert backend.grader_distrust(ran_commands=False) is None  # files read, nothing run
