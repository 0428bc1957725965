"""The lifecycle lives in ``Backend``: a backend writing only the hooks gets its states and errors.

``Relay`` implements ``_start``, ``_reset`` and ``_close`` (and the three
operations) by driving a real local sandbox, as the vm backend drives an
ssh one; every refusal below comes from the base class, with the base's
message naming the relay's own kind.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from crabray.backends import Backend, ExecResult, LocalBackend
from crabray.core.environment import EnvironmentConfig
from crabray.core.errors import SandboxError


class Relay(Backend):
    """A backend of the hooks only: its sandbox is a local one it starts, resets and closes."""

    kind = "relay"

    def __init__(self, config: EnvironmentConfig, *, fail_starts: int = 0) -> None:
        super().__init__(config)
        self.inner: LocalBackend | None = None
        self.fail_starts = fail_starts
        self.closes = 0

    def _start(self) -> None:
        if self.fail_starts > 0:
            self.fail_starts -= 1
            raise SandboxError("the relay's host said no")
        inner = LocalBackend(self.config.model_copy(update={"backend": "local"}))
        inner.start()
        self.inner = inner

    def _reset(self) -> None:
        self._started("reset", self.inner).reset()

    def _close(self) -> None:
        self.closes += 1
        if self.inner is not None:
            self.inner.close()

    def exec(
        self,
        command: str | list[str],
        *,
        timeout_sec: float | None = None,
        cwd: str | None = None,
        env: dict[str, str] | None = None,
    ) -> ExecResult:
        inner = self._started("exec", self.inner)
        return inner.exec(command, timeout_sec=timeout_sec, cwd=cwd, env=env)

    def put_file(self, path: str, data: bytes) -> None:
        self._started(f"write '{path}'", self.inner).put_file(path, data)

    def get_file(self, path: str, *, max_bytes: int | None = None) -> bytes:
        return self._started(f"read '{path}'", self.inner).get_file(path, max_bytes=max_bytes)


def _config(tmp_path: Path) -> EnvironmentConfig:
    return EnvironmentConfig(
        name="e",
        backend="relay",
        backend_settings={"root_dir": str(tmp_path / "sandboxes"), "isolation": "none"},
    )


@pytest.fixture
def relay(tmp_path: Path) -> Relay:
    return Relay(_config(tmp_path))


def test_use_before_start_is_refused_by_the_base(relay: Relay) -> None:
    for operation in (relay.reset, lambda: relay.exec("true"), lambda: relay.get_file("f")):
        with pytest.raises(
            SandboxError, match=r"the relay sandbox of 'e' is not started; call start\(\) first"
        ):
            operation()
    assert not relay.started


def test_a_started_relay_runs_in_its_local_sandbox_and_resets(relay: Relay) -> None:
    relay.start()
    assert relay.started
    relay.put_file("a.txt", b"x")
    assert relay.exec("cat a.txt").stdout == "x"
    relay.reset()
    assert relay.exec("ls -A").stdout == ""


def test_a_second_start_is_refused(relay: Relay) -> None:
    relay.start()
    inner = relay.inner
    with pytest.raises(SandboxError, match="relay sandbox of 'e' is already started"):
        relay.start()
    assert relay.inner is inner, "the refused start made nothing"


def test_after_close_every_use_and_a_new_start_are_refused(relay: Relay) -> None:
    relay.start()
    inner = relay.inner
    assert inner is not None
    root = inner.root
    relay.close()
    relay.close()
    assert relay.closes == 1, "a second close does nothing"
    assert relay.closed and not relay.started
    assert not root.exists(), "closing the relay closed its local sandbox"
    with pytest.raises(SandboxError, match="cannot exec: the relay sandbox of 'e' is closed"):
        relay.exec("true")
    with pytest.raises(SandboxError, match="cannot reset: the relay sandbox of 'e' is closed"):
        relay.reset()
    with pytest.raises(
        SandboxError, match="relay sandbox of 'e' is closed; make a new backend to start again"
    ):
        relay.start()


def test_a_failed_start_leaves_it_unstarted_and_startable(tmp_path: Path) -> None:
    relay = Relay(_config(tmp_path), fail_starts=1)
    with pytest.raises(SandboxError, match="host said no"):
        relay.start()
    assert not relay.started
    with pytest.raises(SandboxError, match="not started"):
        relay.exec("true")
    relay.start()
    try:
        assert relay.exec("echo ok").stdout == "ok\n"
    finally:
        relay.close()


def test_close_before_start_runs_the_hook_once_and_forbids_a_start(relay: Relay) -> None:
    relay.close()
    assert relay.closes == 1
    with pytest.raises(SandboxError, match="closed"):
        relay.start()
