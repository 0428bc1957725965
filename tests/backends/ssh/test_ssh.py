"""Rules of the SSH backend alone: host keys, credentials, reconnection, secrets, orphans.

Run against a real OpenSSH server on loopback (``tests/backends/ssh/sshd.py``);
skipped with the install command when ``sshd`` is missing, failed under ``CI=true``.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import pwd
import shutil
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from crabray.backends import available_backends, create_backend
from crabray.backends.ssh import SshBackend, SshSettings
from crabray.backends.ssh._remote import EXEC_VAR, kill_exec_script
from crabray.core.environment import EnvironmentConfig
from crabray.core.errors import ConfigError, SandboxError, SandboxFileError
from crabray.core.retry import RetryPolicy
from tests.backends.conftest import host_pid_alive, wait_until
from tests.backends.ssh.sshd import Sshd, running_sshd, shared_sshd, sshd_missing

pytestmark = pytest.mark.component  # a real sshd

REPO = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module", autouse=True)
def _needs_sshd() -> None:
    hint = sshd_missing()
    if hint is not None:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"the SSH backend tests need sshd under CI=true: {hint}")
        pytest.skip(hint)


@pytest.fixture
def sshd() -> Sshd:
    """The session's shared sshd (tests that break connections use ``own_sshd``)."""
    return shared_sshd()


@pytest.fixture
def own_sshd(tmp_path: Path) -> Iterator[Sshd]:
    """An sshd for this test alone, so dropping its connections disturbs no one."""
    with running_sshd(tmp_path / "sshd") as server:
        yield server


@pytest.fixture
def make(tmp_path: Path) -> Iterator[Any]:
    """Build (not start) SSH backends under this test's directory; all closed afterwards."""
    made: list[SshBackend] = []

    def build(server: Sshd, name: str = "ssh_test", **overrides: Any) -> SshBackend:
        settings = server.settings(remote_root=str(tmp_path / "remote"), **overrides)
        backend = SshBackend(EnvironmentConfig(name=name, backend="ssh", backend_settings=settings))
        made.append(backend)
        return backend

    yield build
    for backend in made:
        backend.close()


def test_registry_builds_the_ssh_backend(sshd: Sshd, tmp_path: Path) -> None:
    assert "ssh" in available_backends()
    config = EnvironmentConfig(name="e", backend="ssh", backend_settings=sshd.settings())
    assert isinstance(create_backend(config), SshBackend)


def test_a_misspelt_setting_is_named_with_a_suggestion(sshd: Sshd) -> None:
    config = EnvironmentConfig(name="e", backend="ssh", backend_settings=sshd.settings(prot=22))
    with pytest.raises(ConfigError, match=r"'prot'.*did you mean 'port'"):
        create_backend(config)


def test_unknown_host_key_is_refused_by_default(sshd: Sshd, make: Any, tmp_path: Path) -> None:
    empty = tmp_path / "empty_known_hosts"
    empty.write_text("")
    backend = make(sshd, known_hosts=str(empty))
    with pytest.raises(
        ConfigError, match=r"host key .* is not in .*accept_unknown_host_keys"
    ) as err:
        backend.start()
    assert "SHA256:" in str(err.value)


def test_unknown_host_key_is_accepted_when_asked_and_not_saved(
    sshd: Sshd, make: Any, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    empty = tmp_path / "empty_known_hosts"
    empty.write_text("")
    backend = make(sshd, known_hosts=str(empty), accept_unknown_host_keys=True)
    with caplog.at_level(logging.INFO, logger="crabray"):
        backend.start()
    assert backend.exec("echo hi").stdout == "hi\n"
    assert "accepting unknown" in caplog.text
    assert empty.read_text() == ""


def test_a_changed_host_key_is_refused_even_when_accepting_unknown_ones(
    sshd: Sshd, make: Any, tmp_path: Path
) -> None:
    algorithm, blob = (sshd.directory / "wrong_key.pub").read_text().split()[:2]
    lying = tmp_path / "lying_known_hosts"
    lying.write_text(f"[127.0.0.1]:{sshd.port} {algorithm} {blob}\n")
    backend = make(sshd, known_hosts=str(lying), accept_unknown_host_keys=True)
    with pytest.raises(ConfigError, match="does not match"):
        backend.start()


def test_a_wrong_key_fails_at_once_without_retries(
    sshd: Sshd, make: Any, caplog: pytest.LogCaptureFixture
) -> None:
    backend = make(sshd, key_path=str(sshd.wrong_key), retry={"max_attempts": 5})
    started = time.monotonic()
    with caplog.at_level(logging.DEBUG), pytest.raises(ConfigError, match="refused the login"):
        backend.start()
    assert time.monotonic() - started < 5
    assert "retrying" not in caplog.text


def test_an_unreachable_host_retries_a_bounded_number_of_times(
    make: Any, sshd: Sshd, caplog: pytest.LogCaptureFixture
) -> None:
    closed_port = sshd.port  # a port nobody listens on: a fresh server's, after it stops
    with running_sshd(sshd.directory.parent / f"gone-{os.getpid()}") as gone:
        closed_port = gone.port
    retry = {"max_attempts": 3, "backoff_initial_sec": 0.05, "backoff_max_sec": 0.1}
    backend = make(sshd, port=closed_port, retry=retry)
    with caplog.at_level(logging.WARNING), pytest.raises(SandboxError, match="after 3 attempts"):
        backend.start()
    assert caplog.text.count("retrying in") == 2


def test_the_retry_policy_backs_off_up_to_its_cap() -> None:
    policy = RetryPolicy(backoff_initial_sec=0.5, backoff_multiplier=2, backoff_max_sec=3)
    assert [policy.backoff_sec(n) for n in (1, 2, 3, 4)] == [0.5, 1.0, 2.0, 3.0]


def test_a_dropped_connection_reconnects(
    own_sshd: Sshd, make: Any, caplog: pytest.LogCaptureFixture
) -> None:
    backend = make(own_sshd)
    backend.start()
    backend.put_file("kept.txt", b"survives")
    assert backend.exec("echo before").stdout == "before\n"

    assert own_sshd.drop_connections() >= 1
    with caplog.at_level(logging.WARNING):
        assert backend.exec("echo after").stdout == "after\n"
    assert "reconnecting" in caplog.text

    own_sshd.drop_connections()
    assert backend.get_file("kept.txt") == b"survives"
    own_sshd.drop_connections()
    backend.put_file("new.txt", b"also")
    assert backend.exec(["cat", "new.txt"]).stdout == "also"


def test_secrets_never_reach_logs_reprs_errors_or_results(
    own_sshd: Sshd, make: Any, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    passphrase, password = "pass-phrase-5ecr3t", "pass-word-5ecr3t"
    key = tmp_path / "locked_key"
    subprocess.run(
        ["ssh-keygen", "-q", "-t", "ed25519", "-N", passphrase, "-f", str(key)], check=True
    )
    authorized = own_sshd.directory / "authorized_keys"
    authorized.write_text(authorized.read_text() + (tmp_path / "locked_key.pub").read_text())
    key_text = key.read_text()
    key_body = key_text.splitlines()[1]

    seen: list[str] = []
    with caplog.at_level(logging.DEBUG):
        backend = make(own_sshd, key_path=str(key), key_passphrase=passphrase, password=password)
        backend.start()
        result = backend.exec("echo ok")
        seen += [repr(backend.settings), str(backend.settings), repr(backend.describe())]
        seen += [result.model_dump_json()]
        for bad in (
            {"key_path": str(own_sshd.wrong_key), "password": password},
            {"key_path": str(key), "key_passphrase": "not-it"},
            {"key_path": str(key), "key_passphrase": None, "password": password},
            {"key_path": None, "password": password},
        ):
            with pytest.raises(ConfigError) as err:
                make(own_sshd, **bad).start()
            seen.append(f"{err.value!r} {err.value} {err.value.__cause__!r}")
        with pytest.raises(ConfigError) as err:
            SshBackend(
                EnvironmentConfig(
                    name="e", backend="ssh", backend_settings={"password": password, "port": "x"}
                )
            )
        seen.append(f"{err.value!r} {err.value.__cause__!r}")
    seen.append(caplog.text)
    assert result.stdout == "ok\n"
    everything = "\n".join(seen)
    for secret in (passphrase, password, key_body):
        assert secret not in everything


def test_a_passphrase_for_a_key_that_has_none_is_named_as_such(sshd: Sshd, make: Any) -> None:
    with pytest.raises(ConfigError, match="the key is not encrypted; leave key_passphrase out"):
        make(sshd, key_passphrase="pass-phrase-for-nothing").start()


def test_paths_are_confined_to_the_sandbox(sshd: Sshd, make: Any, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("host secret")
    backend = make(sshd)
    backend.start()
    for path in ("../../outside/secret.txt", str(outside / "secret.txt"), "/etc/hostname"):
        with pytest.raises(SandboxFileError, match="outside the sandbox"):
            backend.get_file(path)
        with pytest.raises(SandboxFileError, match="outside the sandbox"):
            backend.put_file(path, b"x")
    backend.exec(["ln", "-s", str(outside), "link"])
    with pytest.raises(SandboxFileError, match="symlink"):
        backend.get_file("link/secret.txt")
    with pytest.raises(SandboxFileError, match="symlink"):
        backend.put_file("link/new.txt", b"x")
    assert not (outside / "new.txt").exists()
    root = backend.root
    backend.put_file(f"{root}/home/abs.txt", b"inside")
    assert backend.exec('cat "$HOME/abs.txt"').stdout == "inside"


def _fifo_openers() -> set[int]:
    """Host processes blocked opening a FIFO (the test sshd and its SFTP servers run here)."""
    found = set()
    for entry in Path("/proc").iterdir():
        with contextlib.suppress(OSError):
            if entry.name.isdigit() and (entry / "wchan").read_text() == "wait_for_partner":
                found.add(int(entry.name))
    return found


def _require_visible_fifo_openers(tmp_path: Path) -> None:
    """Skip unless this host shows a process blocked opening a FIFO (``wchan``)."""
    fifo = tmp_path / "probe-fifo"
    os.mkfifo(fifo)
    reader = subprocess.Popen(["cat", str(fifo)], stdout=subprocess.DEVNULL)
    try:
        if not wait_until(lambda: reader.pid in _fifo_openers(), within_sec=10):
            pytest.skip("/proc/PID/wchan does not show FIFO waits here (run as root on Linux)")
    finally:
        reader.kill()
        reader.wait()


def test_a_fifo_swapped_in_after_the_type_check_fails_the_read_and_leaves_no_server(
    sshd: Sshd, make: Any, tmp_path: Path
) -> None:
    """The stat before the open can be raced: the bounded read behind it must still give up,
    and the SFTP server stuck opening the FIFO must not stay behind."""
    _require_visible_fifo_openers(tmp_path)
    backend = make(sshd, file_stall_sec=2)
    backend.start()
    assert backend.exec("mkfifo pipe && echo kept > file.txt").exit_code == 0
    target = f"{backend.workdir}/pipe"
    before = _fifo_openers()
    started = time.monotonic()
    with pytest.raises(SandboxFileError, match="no reply for 2 s"):
        backend._sftp_call(
            lambda sftp: backend._read_bounded(sftp, target, "pipe", 0), "read", "pipe"
        )
    assert time.monotonic() - started < 60
    assert backend.get_file("file.txt") == b"kept\n"
    assert wait_until(lambda: not _fifo_openers() - before, within_sec=10), (
        "an SFTP server still waits to open the FIFO"
    )


def test_only_regular_files_are_read(sshd: Sshd, make: Any) -> None:
    backend = make(sshd)
    backend.start()
    assert backend.exec("mkfifo pipe && mkdir dir && ln -s pipe link").exit_code == 0
    for path, reason in (("pipe", "not a regular file"), ("link", "not a regular file")):
        with pytest.raises(SandboxFileError, match=reason):
            backend.get_file(path)
    with pytest.raises(SandboxFileError, match="is a directory"):
        backend.get_file("dir")


def test_timeout_and_reset_kill_processes_that_left_the_process_group(
    sshd: Sshd, make: Any
) -> None:
    backend = make(sshd)
    backend.start()
    result = backend.exec("setsid sleep 300 & echo $! > escaped.pid; sleep 30", timeout_sec=1)
    assert result.timed_out
    escaped = int(backend.get_file("escaped.pid"))
    assert wait_until(lambda: not host_pid_alive(escaped))

    daemon = backend.exec("setsid sleep 300 >/dev/null 2>&1 & echo $!").stdout
    backend.reset()
    assert wait_until(lambda: not host_pid_alive(int(daemon)))


def test_environment_names_a_shell_treats_specially_still_reach_the_command(
    sshd: Sshd, make: Any
) -> None:
    backend = make(sshd)
    backend.start()
    env = {"IFS": ":", "ODD-NAME": "x", "PLAIN": "two words"}
    listed = backend.exec(["env"], env=env).stdout.splitlines()
    assert {"IFS=:", "ODD-NAME=x", "PLAIN=two words"} <= set(listed)
    plain = backend.exec('printf "%s|%s" "$PLAIN" "$HOME"', env={"PLAIN": "two words"})
    assert plain.stdout == f"two words|{backend.root}/home"


def test_string_commands_in_the_login_shell_keep_exit_codes_output_and_timeouts(
    sshd: Sshd, make: Any
) -> None:
    """With ``shell`` the login shell, a string runs in the wrapper itself (no extra process)."""
    login_shell = pwd.getpwnam(sshd.user).pw_shell
    backend = make(sshd, shell=login_shell)
    backend.start()
    result = backend.exec("echo out; echo err >&2; exit 3", env={"GREETING": "hi"})
    assert (result.exit_code, result.stdout, result.stderr) == (3, "out\n", "err\n")
    assert backend.exec('echo "$GREETING $0"', env={"GREETING": "hi"}).stdout.startswith("hi ")
    started = time.monotonic()
    result = backend.exec("setsid sleep 300 & echo $! > escaped.pid; sleep 30", timeout_sec=1)
    assert result.timed_out and result.exit_code == -1
    assert time.monotonic() - started < 10
    escaped = int(backend.get_file("escaped.pid"))
    assert wait_until(lambda: not host_pid_alive(escaped))
    assert backend.exec("echo still usable").stdout == "still usable\n"


def test_kill_by_marker_works_with_busybox_grep(tmp_path: Path) -> None:
    """The remote kill script on a busybox machine: its grep must read NUL-separated environs."""
    busybox = shutil.which("busybox")
    if busybox is None:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail("this test needs busybox under CI=true: apt-get install busybox-static")
        pytest.skip("no busybox: apt-get install busybox-static")
    tools = tmp_path / "bin"
    tools.mkdir()
    (tools / "grep").symlink_to(busybox)
    marker = "0123456789abcdef"
    base = {"PATH": os.environ["PATH"], "ZZ_AFTER": "y"}
    target = subprocess.Popen(["sleep", "300"], env={**base, EXEC_VAR: marker})
    decoy = subprocess.Popen(["sleep", "300"], env={**base, EXEC_VAR: marker + "0"})
    try:
        subprocess.run(
            ["/bin/sh", "-c", kill_exec_script(None, marker)],
            env={"PATH": f"{tools}:{os.environ['PATH']}"},
            check=True,
            timeout=30,
        )
        assert target.wait(timeout=5) == -9
        assert decoy.poll() is None, "a longer marker that starts with this one was killed"
    finally:
        for proc in (target, decoy):
            proc.kill()
            proc.wait()


def test_reset_runs_the_reset_command_and_fails_when_it_fails(sshd: Sshd, make: Any) -> None:
    backend = make(sshd, reset_command="echo prepared > ready.txt")
    backend.start()
    backend.reset()
    assert backend.get_file("ready.txt") == b"prepared\n"
    failing = make(sshd, name="failing", reset_command="echo broken >&2; exit 3")
    failing.start()
    with pytest.raises(SandboxError, match=r"reset_command.*exit 3.*broken"):
        failing.reset()


def test_composing_with_a_settings_model(sshd: Sshd, tmp_path: Path) -> None:
    settings = SshSettings(**sshd.settings(remote_root=str(tmp_path / "composed")))
    backend = SshBackend(EnvironmentConfig(name="vm", backend="vm"), settings=settings)
    backend.start()
    try:
        assert backend.exec("pwd").stdout.strip() == backend.workdir
        backend.reconnect()
        assert backend.exec("echo again").stdout == "again\n"
    finally:
        backend.close()


_ORPHAN_MAKER = textwrap.dedent(
    """
    import json, os, sys
    from crabray.backends.ssh import SshBackend
    from crabray.core.environment import EnvironmentConfig
    settings = json.loads(sys.argv[1])
    backend = SshBackend(EnvironmentConfig(name="orphan", backend="ssh", backend_settings=settings))
    backend.start()
    pid = backend.exec("sleep 300 >/dev/null 2>&1 & echo $!").stdout.strip()
    print(json.dumps({"root": backend.root, "pid": int(pid)}), flush=True)
    os._exit(0)  # die without close(), as a killed actor would
    """
)


def test_cleanup_orphans_removes_only_sandboxes_of_dead_owners(
    sshd: Sshd, make: Any, tmp_path: Path
) -> None:
    import json

    settings = sshd.settings(remote_root=str(tmp_path / "remote"))
    made = subprocess.run(
        [sys.executable, "-c", _ORPHAN_MAKER, json.dumps(settings)],
        capture_output=True,
        text=True,
        cwd=REPO,
        check=True,
        timeout=120,
    )
    orphan = json.loads(made.stdout)
    live = make(sshd)
    live.start()
    assert Path(orphan["root"]).is_dir() and host_pid_alive(orphan["pid"])

    (removed,) = SshBackend.cleanup_orphans(settings)
    assert removed.startswith("ssh sandbox ") and removed.endswith(f":{orphan['root']}")

    assert not Path(orphan["root"]).exists()
    assert wait_until(lambda: not host_pid_alive(orphan["pid"]))
    assert Path(live.root).is_dir()
    assert live.exec("echo still").stdout == "still\n"
    assert SshBackend.cleanup_orphans(settings) == []


@pytest.mark.ray
@pytest.mark.slow
def test_a_secret_backend_setting_stays_out_of_the_manifest_and_a_resume_asks_for_it(
    sshd: Sshd, tmp_path: Path
) -> None:
    """The demo on the SSH backend with a password given on the command line."""
    from tests.conftest import ROOT, crabray

    secret = "pass-word-never-written-9f3"
    settings = {**sshd.settings(), "password": secret}
    flags = [arg for k, v in settings.items() for arg in ("--backend-setting", f"{k}={v}")]
    out = tmp_path / "out"
    done = crabray(
        "run", str(ROOT / "tasks" / "demo"), "-a", "oracle", "--task", "hello-file",
        "--backend", "ssh", *flags, "--out", str(out), timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    (manifest,) = (out / "runs").glob("*.json")
    recorded = json.loads(manifest.read_text())["options"]["backend_settings"]
    assert recorded["password"] == "[redacted]" and recorded["host"] == sshd.host
    assert secret not in manifest.read_text()

    asked = crabray("run", "--resume", "latest", "--out", str(out))
    assert asked.returncode == 2, asked.stdout + asked.stderr
    assert "secret backend setting(s) password" in asked.stderr
    assert "--backend-setting password=VALUE" in asked.stderr
    assert f"--backend-setting host={sshd.host}" in asked.stderr
    assert "Traceback" not in asked.stderr

    resumed = crabray("run", "--resume", "latest", *flags, "--out", str(out), timeout=600)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert "1 episode was already finished" in resumed.stdout
    assert secret not in manifest.read_text()
