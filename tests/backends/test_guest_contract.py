"""Plain-Python actions and commands through each sandbox's guest process, on every backend.

CRAB's rule: a function that takes no ``env`` and is not ``local=True`` runs
where its environment is. These tests run the seed's ``check_file_exist`` and a
raising function inside real sandboxes (the ``backend`` fixture of
``conftest.py``: local, local-bwrap, ssh, docker, vm) and check the guest's
lifecycle: restarted when killed, gone after reset, output cut at the cap.
"""

from __future__ import annotations

import resource

import pytest

from crabray.backends import Backend
from crabray.backends.base import MAX_OUTPUT_BYTES, OUTPUT_CUT_MARKER
from crabray.backends.episode_env import EpisodeEnv
from crabray.backends.guest import GuestCallError
from crabray.core.env import AgentSignals
from tests.backends.conftest import kind_params, require_kind
from tests.backends.guest_fixtures.seed_actions import (
    check_file_exist,
    count_calls,
    divide,
    guest_pid,
    python_version,
)

GUEST_KINDS = ("local", "local-bwrap", "ssh", "docker-python", "vm-python")
"""The kinds (and variants) whose sandboxes have python3 for a guest."""


@pytest.fixture(params=kind_params(GUEST_KINDS))
def contract_kind(request: pytest.FixtureRequest) -> str:
    """Every guest kind with python3 in its sandbox (busybox's ``docker`` has none).

    (``test_guest_setup.py`` checks what happens in a sandbox without python3.)
    """
    kind: str = request.param
    return require_kind(kind)


def _env(backend: Backend) -> EpisodeEnv:
    return EpisodeEnv(backend.config.name, backend, AgentSignals())


PROBE = r"""
p=$1
( : >> /proc/$p/fd/1 ) 2>/dev/null && echo "stdout opened"
( : < /proc/$p/fd/0 ) 2>/dev/null && echo "stdin opened"
head -c1 /proc/$p/environ >/dev/null 2>&1 && echo "environ read"
head -c1 /proc/$p/mem >/dev/null 2>&1 && echo "mem opened"
[ -d /proc/$p ] && echo "guest seen"
sed -n 's/^CapEff:[[:space:]]*//p' /proc/self/status
"""
"""Run by the agent with the guest's pid: each way into the guest that opened, then the
agent's effective capabilities (hex)."""

CAP_SYS_PTRACE = 19


def test_an_agent_command_cannot_open_the_guest(backend: Backend) -> None:
    pid = guest_pid.run(_env(backend))
    *opened, caps = backend.exec(["sh", "-c", PROBE, "probe", str(pid)]).stdout.split("\n")[:-1]
    if int(caps, 16) >> CAP_SYS_PTRACE & 1:  # root on the host (local unconfined, ssh)
        assert "stdout opened" in opened, "the agent's CAP_SYS_PTRACE ought to reach the guest"
    else:  # the guest sealed itself: same uid, yet nothing of it opens
        assert opened == ["guest seen"]


def test_seed_check_file_exist_sees_the_sandbox(backend: Backend) -> None:
    env = _env(backend)
    assert backend.exec("touch made.txt").ok
    assert check_file_exist(file_path="made.txt").evaluate(env) is True
    assert check_file_exist(file_path="never-made.txt").evaluate(env) is False


def test_an_exception_inside_comes_back_with_the_guest_traceback(backend: Backend) -> None:
    env = _env(backend)
    assert divide.run(env, a=6, b=3) == 2.0
    with pytest.raises(GuestCallError) as caught:
        divide.run(env, a=1, b=0)
    message = str(caught.value)
    assert "ZeroDivisionError" in message
    assert "return a / b" in message  # the guest's traceback shows the line that raised
    assert "seed_actions.py" in message
    assert caught.value.error_type == "ZeroDivisionError"


def test_imports_inside_the_function_resolve_in_the_guest(backend: Backend) -> None:
    version = python_version.run(_env(backend))
    assert version.startswith("3.")
    assert backend.check_python() == version


def test_a_killed_guest_is_restarted_transparently(backend: Backend) -> None:
    env = _env(backend)
    first = guest_pid.run(env)
    assert count_calls.run(env) == 1
    backend.exec(["kill", "-9", str(first)], timeout_sec=30)
    assert backend.exec("echo still here", timeout_sec=30).stdout == "still here\n"
    assert count_calls.run(env) == 1  # a new guest process, started without an error
    second = guest_pid.run(env)
    assert second != first or backend.kind == "docker"
    if backend.kind != "local":  # a guest started after commands ran never runs them
        assert backend.exec("echo $PPID").stdout != f"{second}\n"


def test_reset_kills_the_guest(backend: Backend) -> None:
    env = _env(backend)
    assert count_calls.run(env) == 1
    assert count_calls.run(env) == 2
    backend.reset()
    assert count_calls.run(env) == 1


def test_output_past_the_cap_is_cut_with_the_marker(backend: Backend) -> None:
    env = _env(backend)
    big = MAX_OUTPUT_BYTES + 3 * 1024 * 1024
    command = f"head -c {big} /dev/zero | tr '\\0' a; echo done >&2"
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    results = [backend.exec(command, timeout_sec=120)]  # before any call: the plain exec path
    guest_pid.run(env)
    results.append(backend.exec(command, timeout_sec=120))  # the guest is up now
    grown_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before
    for result in results:
        assert result.exit_code == 0
        assert result.stdout.endswith(OUTPUT_CUT_MARKER)
        assert len(result.stdout) == MAX_OUTPUT_BYTES + len(OUTPUT_CUT_MARKER)
        assert result.stderr == "done\n"
    assert grown_kib < 200 * 1024, f"this process grew by {grown_kib} KiB"
