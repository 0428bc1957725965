"""The local backend confined by bubblewrap: what a command can and cannot reach.

The contract suite runs the confined mode too (``local-bwrap``); these are the
rules of confinement alone. Skipped with the install hint when bubblewrap does
not work here, except under ``CI=true``.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import re
import socket
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

import crabray.backends.local._isolation as local_bwrap
from crabray.backends import LocalBackend
from crabray.backends.local import _bwrap as bwrap
from crabray.backends.local import _etc as etc
from crabray.backends.local import _network as network
from crabray.core.environment import EnvironmentConfig
from crabray.core.errors import SandboxError, SandboxFileError
from tests.backends.conftest import host_pid_alive, wait_until


def _require_bwrap() -> None:
    usable, why = bwrap.probe()
    if not usable:
        message = f"bubblewrap does not work here ({why}): {bwrap.INSTALL_HINT}"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(message)
        pytest.skip(message)


def make_config(tmp_path: Path, **settings: object) -> EnvironmentConfig:
    return EnvironmentConfig(
        name="jail",
        backend="local",
        backend_settings={
            "root_dir": str(tmp_path / "sandboxes"),
            "isolation": "bwrap",
            **settings,
        },
    )


@pytest.fixture
def jail(tmp_path: Path) -> Iterator[LocalBackend]:
    _require_bwrap()
    backend = LocalBackend(make_config(tmp_path))
    backend.start()
    yield backend
    backend.close()


def test_layout_inside(jail: LocalBackend) -> None:
    result = jail.exec('printf "%s|%s|%s" "$HOME" "$TMPDIR" "$PWD"')
    assert result.stdout == "/home/user|/tmp|/home/user/work"
    described = jail.describe()
    assert described["isolation"] == "bwrap"
    assert described["network"] is False
    assert described["sandbox_workdir"] == "/home/user/work"


@pytest.mark.parametrize(
    "command",
    ["touch /usr/x", "touch /root/x", "mkdir /root", "touch /etc/x", "touch /x", "touch /bin/x"],
)
def test_writes_outside_the_sandbox_fail(jail: LocalBackend, command: str) -> None:
    result = jail.exec(command)
    assert result.exit_code != 0, result
    assert not os.path.exists("/usr/x")
    assert not os.path.exists("/x")


def test_host_files_outside_the_system_directories_are_invisible(
    jail: LocalBackend, tmp_path: Path
) -> None:
    (tmp_path / "secret.txt").write_text("secret")
    assert jail.exec(["cat", str(tmp_path / "secret.txt")]).exit_code != 0
    assert jail.exec(["test", "-e", str(jail.root)]).exit_code != 0
    assert jail.exec("ls /home").stdout == "user\n"


def test_etc_is_made_for_the_sandbox_with_the_host_entries_it_needs(jail: LocalBackend) -> None:
    listing = jail.exec("ls -A /etc").stdout.split()
    assert {"passwd", "group", "hostname", "hosts", "ld.so.cache"} <= set(listing)
    assert not {"shadow", "gshadow", "ssh", "sudoers", "machine-id"} & set(listing)
    assert jail.exec("whoami; cat /etc/hostname").stdout == "user\ncrabray\n"
    host = hashlib.sha256(Path("/etc/ld.so.cache").read_bytes()).hexdigest()
    assert jail.exec("sha256sum /etc/ld.so.cache").stdout.split()[0] == host
    assert jail.exec("echo x >> /etc/passwd").exit_code != 0


def test_etc_view_is_shared_and_one_others_can_write_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    monkeypatch.setattr(etc, "_views", {})
    view = etc.etc_view(1000, 1000, host_hosts=False)
    assert view.parent == tmp_path
    assert (view / "passwd").read_text().startswith("root:x:0:0:")
    monkeypatch.setattr(etc, "_views", {})  # another process of this user finds it
    assert etc.etc_view(1000, 1000, host_hosts=False) == view
    view.chmod(0o777)
    monkeypatch.setattr(etc, "_views", {})
    with pytest.raises(SandboxError, match=re.escape(str(view))):
        etc.etc_view(1000, 1000, host_hosts=False)


def test_etc_view_leaves_out_special_files(tmp_path: Path) -> None:
    # A FIFO in a host /etc directory would block the copy; a plain file is copied.
    os.mkfifo(tmp_path / "fifo")
    (tmp_path / "plain").write_text("x")
    assert etc._unreadable(str(tmp_path), ["fifo", "plain"]) == {"fifo"}


def test_the_stage_directory_is_made_once_and_one_others_can_write_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    if os.geteuid() != 0:
        pytest.skip("only a root driver stages the sandbox directories")
    monkeypatch.setattr(bwrap, "_STAGE_PARENTS", (str(tmp_path),))
    stage = bwrap.stage_dir()
    assert stage == tmp_path / "crabray-stage" and bwrap.stage_dir() == stage
    assert (stage.stat().st_mode & 0o777, stage.stat().st_uid) == (0o711, 0)
    stage.chmod(0o777)
    with pytest.raises(SandboxError, match=re.escape(str(stage))):
        bwrap.stage_dir()
    stage.chmod(0o711)
    os.chown(stage, bwrap.HOST_UID, bwrap.HOST_UID)
    with pytest.raises(SandboxError, match="only root can write"):
        bwrap.stage_dir()


def test_no_file_of_the_driver_is_open_in_the_sandbox(jail: LocalBackend) -> None:
    # What the holder's start handed to bwrap (its stage's fstab, /etc) stays outside.
    listing = jail.exec("ls -l /proc/[0-9]*/fd/").stdout
    assert "->" in listing
    assert "memfd" not in listing
    assert "crabray" not in listing


# Every process of the sandbox: its status fields that say what it may do and who it is
# (the marker is quoted apart so that the dumping shell's own command line does not hold it).
DUMP_STATUSES = (
    "for f in /proc/[0-9]*/status; do echo \"=#\"\"= $f $(tr '\\0' ' ' < ${f%status}cmdline)\"; "
    "grep -E '^(Cap|NoNewPrivs|Uid|Gid|Groups)' $f; done"
)


STATUS_FIELD = re.compile(r"(Cap[A-Za-z]+|NoNewPrivs|Uid|Gid|Groups):")


def unprivileged_processes(dump: str, uid: int, gid: int) -> list[str]:
    """Check each process of a DUMP_STATUSES output; returns the names of those seen."""
    seen = []
    for block in dump.split("=#= ")[1:]:
        head, *lines = block.strip().splitlines()
        wanted = [line.split(":", 1) for line in lines if STATUS_FIELD.match(line)]
        fields = {name: value.split() for name, value in wanted}
        caps = {name: int(fields[name][0], 16) for name in fields if name.startswith("Cap")}
        assert caps == dict.fromkeys(("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"), 0), head
        assert fields["NoNewPrivs"] == ["1"], head
        assert fields["Groups"] == [], head
        assert fields["Uid"] == [str(uid)] * 4 and fields["Gid"] == [str(gid)] * 4, head
        seen.append(head)
    return seen


def test_capabilities_are_dropped(jail: LocalBackend) -> None:
    me = bwrap.identity()
    for command in (["cat", "/proc/self/status"], "cat /proc/self/status"):
        unprivileged_processes("=#= self\n" + jail.exec(command).stdout, me.uid, me.gid)
    # A process the agent leaves running, the holder's, and the guest's: all of them.
    assert jail.exec("sleep 300 >/dev/null 2>&1 &").exit_code == 0
    jail.check_python()
    seen = " | ".join(unprivileged_processes(jail.exec(DUMP_STATUSES).stdout, me.uid, me.gid))
    assert "sleep 300" in seen and "python3" in seen and "/proc/1/status" in seen, seen
    assert jail.exec("mount -o remount,bind,rw /usr").exit_code != 0


def host_processes_holding(secret: bytes, kind: str) -> list[str]:
    """Host pids whose ``/proc/PID/<kind>`` (cmdline, environ) holds ``secret``."""
    found = []
    for entry in Path("/proc").iterdir():
        with contextlib.suppress(OSError):
            if entry.name.isdigit() and secret in (entry / kind).read_bytes():
                found.append(entry.name)
    return found


def test_a_commands_environment_reaches_the_command_only(jail: LocalBackend) -> None:
    # The entry program runs as the driver's user: what a caller sets must not steer it.
    result = jail.exec("echo $PERL5OPT", env={"PERL5OPT": "-Mcrabray_no_such_module"})
    assert (result.exit_code, result.stdout) == (0, "-Mcrabray_no_such_module\n"), result
    with pytest.raises(ValueError, match="holds '='"):
        jail.exec("true", env={"A=B": "c"})
    # Nor is it on a host command line, which every host user can read.
    secret = "crabray-secret-" + os.urandom(4).hex()
    with ThreadPoolExecutor(1) as pool:
        running = pool.submit(jail.exec, "sleep 5", env={"API_KEY": secret})
        assert wait_until(lambda: bool(host_processes_holding(secret.encode(), "environ")), 10)
        assert host_processes_holding(secret.encode(), "cmdline") == []
        jail.exec("pkill -x sleep")
        assert running.result().exit_code != 0


NON_ROOT_DRIVER = """
import json, sys, tempfile
from crabray.backends.local import LocalBackend
from crabray.core.environment import EnvironmentConfig
settings = {"isolation": "bwrap", "root_dir": tempfile.mkdtemp(prefix="crabray-nonroot-")}
sandbox = LocalBackend(EnvironmentConfig(name="jail", backend="local", backend_settings=settings))
sandbox.start()
try:
    sandbox.exec("sleep 300 >/dev/null 2>&1 &")
    print(json.dumps([sandbox.exec(["cat", "/proc/self/status"]).stdout,
                      sandbox.exec(sys.argv[1]).stdout]))
finally:
    sandbox.close()
"""


def run_as_non_root_driver(home: Path, script: str, *args: str) -> Any:
    """Run Python ``script`` as the host user ``nobody``; what it printed last, as JSON."""
    driver = ["setpriv", f"--reuid={bwrap.HOST_UID}", f"--regid={bwrap.HOST_UID}", "--clear-groups"]
    repo = Path(__file__).resolve().parents[3]
    done = subprocess.run(
        [*driver, sys.executable, "-c", script, *args],
        capture_output=True,
        text=True,
        env={"PATH": os.defpath, "PYTHONPATH": str(repo), "HOME": str(home)},
        cwd="/",
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_a_non_root_drivers_sandbox_holds_no_privilege_either(tmp_path: Path) -> None:
    _require_bwrap()
    if os.geteuid() != 0:
        pytest.skip("the driver is not root: the other tests of this file run as a non-root driver")
    own, dump = run_as_non_root_driver(tmp_path, NON_ROOT_DRIVER, DUMP_STATUSES)
    unprivileged_processes("=#= self\n" + own, bwrap.HOST_UID, bwrap.HOST_UID)
    seen = " | ".join(unprivileged_processes(dump, bwrap.HOST_UID, bwrap.HOST_UID))
    assert "sleep 300" in seen and "/proc/1/status" in seen, seen


def test_no_network_unless_asked(tmp_path: Path) -> None:
    _require_bwrap()
    if network.pasta_path() is None:
        pytest.skip(f"network: true needs pasta: {network.INSTALL_HINT}")
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        port = server.getsockname()[1]
        probe = f"import socket; socket.create_connection(('127.0.0.1', {port}), timeout=5)"
        confined = LocalBackend(make_config(tmp_path))
        networked = LocalBackend(make_config(tmp_path, network=True))
        confined.start()
        networked.start()
        try:
            refused = confined.exec(["python3", "-c", probe], timeout_sec=30)
            assert refused.exit_code != 0
            assert "refused" in refused.stderr.lower() or "unreachable" in refused.stderr.lower()
            # network: true is the outside, never the host's loopback (tests/integrity).
            also_refused = networked.exec(["python3", "-c", probe], timeout_sec=30)
            assert "refused" in also_refused.stderr.lower(), also_refused.stderr
            routes = networked.exec("cat /proc/net/route").stdout.splitlines()[1:]
            assert any(line.split()[1] == "00000000" for line in routes), routes
            assert not any(line.split()[1] == "00000000" for line in confined_routes(confined))
            assert networked.describe()["network"] is True
        finally:
            confined.close()
            networked.close()


def confined_routes(backend: LocalBackend) -> list[str]:
    return backend.exec("cat /proc/net/route").stdout.splitlines()[1:]


def test_loopback_is_shared_between_commands_of_one_sandbox(jail: LocalBackend) -> None:
    server = (
        "import socket; s = socket.socket(); s.bind(('127.0.0.1', 47001)); s.listen(); "
        "c, _ = s.accept(); c.sendall(b'hello')"
    )
    jail.exec(f'python3 -c "{server}" >/dev/null 2>&1 &')
    client = (
        "import socket, time\n"
        "for _ in range(100):\n"
        "    try:\n"
        "        print(socket.create_connection(('127.0.0.1', 47001)).recv(5).decode()); break\n"
        "    except OSError: time.sleep(0.05)\n"
    )
    assert jail.exec(["python3", "-c", client], timeout_sec=30).stdout == "hello\n"


def test_home_file_written_by_a_command_is_a_file_under_root_home(jail: LocalBackend) -> None:
    jail.exec("mkdir -p /home/user/Desktop && echo hi > /home/user/Desktop/x.txt")
    assert jail.get_file("/home/user/Desktop/x.txt") == b"hi\n"
    assert (jail.root / "home" / "Desktop" / "x.txt").read_bytes() == b"hi\n"
    jail.exec("echo t > /tmp/t; echo w > w.txt")
    assert jail.get_file("/tmp/t") == b"t\n"
    assert (jail.root / "tmp" / "t").read_bytes() == b"t\n"
    assert jail.get_file("/home/user/work/w.txt") == jail.get_file("w.txt") == b"w\n"
    jail.put_file("/home/user/in.txt", b"put")
    assert jail.exec("cat ~/in.txt").stdout == "put"


def test_paths_outside_the_mapping_are_refused(jail: LocalBackend) -> None:
    for path in ("/etc/passwd", "/root/x", "/usr/bin/env", "../../x"):
        with pytest.raises(SandboxFileError, match="outside the sandbox"):
            jail.get_file(path)
    with pytest.raises(SandboxFileError, match="outside the sandbox"):
        jail.put_file("/etc/crabray-never", b"x")
    assert not os.path.exists("/etc/crabray-never")


def test_symlinks_resolve_as_inside_the_sandbox(jail: LocalBackend) -> None:
    jail.exec(
        "echo real > /home/user/real.txt; ln -s /home/user/real.txt link; ln -s ../real.txt rel"
    )
    assert jail.get_file("link") == b"real\n"
    assert jail.get_file("rel") == b"real\n"
    jail.exec("ln -s /etc/passwd passwd; ln -s / rootlink")
    with pytest.raises(SandboxFileError, match="symlink"):
        jail.get_file("passwd")
    with pytest.raises(SandboxFileError, match="symlink"):
        jail.put_file("rootlink/etc/x", b"x")
    jail.exec("ln -s loop1 loop2; ln -s loop2 loop1")
    with pytest.raises(SandboxFileError):
        jail.get_file("loop1")


def test_close_kills_every_process_even_ones_that_left_the_group(jail: LocalBackend) -> None:
    jail.exec("setsid sleep 300 >/dev/null 2>&1 & sleep 300 >/dev/null 2>&1 &")
    namespace = f"pid:[{jail.describe()['pid_namespace']}]"
    members = _members(namespace)
    assert len(members) >= 3, "the holder's pid 1 and two sleeps"
    jail.close()
    assert wait_until(lambda: not [p for p in members if host_pid_alive(p)]), members
    assert _members(namespace) == []


def test_reset_kills_every_process_even_ones_that_left_the_group(jail: LocalBackend) -> None:
    jail.exec("setsid sleep 300 >/dev/null 2>&1 &")
    members = _members(f"pid:[{jail.describe()['pid_namespace']}]")
    sleeps = [pid for pid in members if b"sleep" in Path(f"/proc/{pid}/cmdline").read_bytes()]
    assert sleeps, members
    jail.reset()
    assert wait_until(lambda: not [p for p in sleeps if host_pid_alive(p)])
    assert "sleep" not in jail.exec("ps -eo comm").stdout


_LEAVE_TRACES = (
    "touch work.left $HOME/home.left /tmp/tmp.left /dev/shm/shm.left 2>/dev/null; "
    "ipcmk -M 4096 >/dev/null; setsid sleep 300 >/dev/null 2>&1 &"
)
_SEE_TRACES = (
    "ls -A . $HOME /tmp /dev/shm 2>/dev/null | grep -c left; "
    "ipcs -m | grep -c '^0x'; ps -eo comm | grep -c sleep"
)


def test_every_reset_gives_a_sandbox_without_the_last_episodes_traces(
    jail: LocalBackend,
) -> None:
    """In place under a root driver (``test_local_reset`` has the hostile version), else a
    new holder or one built ahead: as clean (files, processes, System V IPC objects)."""
    for episode in range(4):
        seen = jail.exec(_SEE_TRACES).stdout.split()
        assert seen == ["0", "0", "0"], f"episode {episode} saw traces of the one before"
        assert jail.exec(_LEAVE_TRACES).exit_code == 0
        assert jail.exec(_SEE_TRACES).stdout.split() != ["0", "0", "0"], "traces were left"
        jail.reset()


SPARES_DRIVER = """
import json, os, sys, tempfile
from crabray.backends.local import LocalBackend
from crabray.core.environment import EnvironmentConfig
root = tempfile.mkdtemp(prefix="crabray-spares-")
settings = {"isolation": "bwrap", "root_dir": root}
jail = LocalBackend(EnvironmentConfig(name="jail", backend="local", backend_settings=settings))
jail.start()
seen, namespaces = [], set()
for episode in range(4):
    seen.append(jail.exec(sys.argv[2]).stdout.split())
    jail.exec(sys.argv[1])
    namespaces.add(jail.describe()["pid_namespace"])
    jail.reset()
spares = [future.result()[1] for future in jail._spare._next]
kind = jail.describe()["reset"]
jail.close()
left = os.listdir(root)
os.rmdir(root)
print(json.dumps([seen, len(namespaces), len(spares), kind, left]))
"""


def test_a_non_root_drivers_resets_swap_in_sandboxes_built_ahead(tmp_path: Path) -> None:
    """A driver that is not root cannot wipe the sandbox user's files with every permission,
    so its resets take a new holder, built ahead during the episode from the second on."""
    _require_bwrap()
    if os.geteuid() != 0:
        pytest.skip("the driver is not root: run as root to drive a non-root driver")
    found = run_as_non_root_driver(tmp_path, SPARES_DRIVER, _LEAVE_TRACES, _SEE_TRACES)
    seen, namespaces, spares, kind, left = found
    assert seen == [["0", "0", "0"]] * 4, "an episode saw traces of the one before"
    assert namespaces == 4, "each episode had its own namespaces"
    assert spares > 0 and kind == "spare", "later resets swap in sandboxes built ahead"
    assert left == [], "close left sandboxes built ahead"


def test_a_dead_holder_is_a_sandbox_error_and_reset_recovers(jail: LocalBackend) -> None:
    for pid in _members(f"pid:[{jail.describe()['pid_namespace']}]"):
        with contextlib.suppress(ProcessLookupError):  # pid 1's death takes the others along
            os.kill(pid, 9)

    def gone() -> bool:
        try:
            jail.exec("true")
        except SandboxError as exc:
            return "bwrap" in str(exc)
        return False

    assert wait_until(gone)
    jail.reset()
    assert jail.exec("echo back").stdout == "back\n"


def test_sandbox_dies_with_its_owner(tmp_path: Path) -> None:
    _require_bwrap()
    root = tmp_path / "sandboxes"
    script = (
        "import time\n"
        "from crabray.backends import create_backend\n"
        "from crabray.core.environment import EnvironmentConfig\n"
        "cfg = EnvironmentConfig(name='orphan', backend_settings="
        f"{{'root_dir': {str(root)!r}, 'isolation': 'bwrap'}})\n"
        "b = create_backend(cfg); b.start()\n"
        "b.exec('setsid sleep 300 > /dev/null 2>&1 &')\n"
        "print(b.root, b.describe()['pid_namespace'], flush=True)\n"
        "time.sleep(300)\n"
    )
    owner = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        assert owner.stdout is not None
        sandbox, namespace = owner.stdout.readline().split()
        members = _members(f"pid:[{namespace}]")
        assert members
        owner.kill()
        owner.wait()
        assert wait_until(lambda: not [p for p in members if host_pid_alive(p)]), members
        removed = LocalBackend.cleanup_orphans({"root_dir": str(root)})
        assert removed == [f"sandbox folder {sandbox}"]
        assert not Path(sandbox).exists()
    finally:
        owner.kill()


def test_auto_uses_bwrap_here(tmp_path: Path) -> None:
    _require_bwrap()
    backend = LocalBackend(make_config(tmp_path, isolation="auto"))
    assert backend.describe()["isolation"] == "auto"
    backend.start()
    try:
        assert backend.describe()["isolation"] == "bwrap"
    finally:
        backend.close()


def test_unconfined_mode_warns_once_per_process(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(local_bwrap, "_unconfined_warned", False)
    caplog.set_level(logging.WARNING, logger="crabray.backends.local._isolation")
    for _ in range(2):
        backend = LocalBackend(make_config(tmp_path, isolation="none"))
        backend.start()
        backend.close()
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1
    assert "UNCONFINED" in warnings[0].getMessage()
    assert "apt-get install bubblewrap" in warnings[0].getMessage()


def test_auto_without_bwrap_fails_and_says_how_to_opt_out(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Unconfined is only ever explicit: no silent fallback from 'auto'."""
    monkeypatch.setattr(bwrap, "probe", lambda: (False, "bwrap not found on PATH"))
    backend = LocalBackend(make_config(tmp_path, isolation="auto"))
    with pytest.raises(SandboxError) as raised:
        backend.start()
    message = str(raised.value)
    assert "bwrap not found on PATH" in message
    assert "apt-get install bubblewrap" in message
    assert "isolation to 'none'" in message
    assert "UNCONFINED" in message
    assert not list((tmp_path / "sandboxes").glob("crabray-*"))


def test_explicit_bwrap_without_the_tool_fails_at_start(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(bwrap, "tools", lambda: "bwrap not found on PATH (install with: x)")
    backend = LocalBackend(make_config(tmp_path))
    with pytest.raises(SandboxError, match=r"isolation 'bwrap'.*bwrap not found"):
        backend.start()
    assert not list((tmp_path / "sandboxes").glob("crabray-*"))


def _members(namespace: str) -> list[int]:
    """Host pids of the live processes in the pid namespace ``pid:[N]``."""
    found = []
    for proc in Path("/proc").iterdir():
        try:
            if proc.name.isdigit() and os.readlink(proc / "ns" / "pid") == namespace:
                found.append(int(proc.name))
        except OSError:
            continue
    return [pid for pid in found if host_pid_alive(pid)]


def test_files_put_by_the_driver_belong_to_the_sandbox_user(jail: LocalBackend) -> None:
    """The sandbox runs unprivileged, so what setup puts there must be its own to change."""
    jail.put_file("made/by/setup.txt", b"from the driver\n")
    changed = jail.exec(
        "echo more >> made/by/setup.txt && mv made/by/setup.txt moved && rmdir -p made/by"
    )
    assert changed.exit_code == 0, changed
    assert jail.get_file("moved") == b"from the driver\nmore\n"
    assert jail.exec("id -un").stdout == "user\n"


ALLOCATE_200_MB = 'python3 -c "b = bytearray(200 * 2**20)"'


def test_memory_mb_bounds_commands_and_the_guest_and_the_sandbox_stays_usable(
    jail: LocalBackend, tmp_path: Path
) -> None:
    assert jail.exec(ALLOCATE_200_MB).exit_code == 0, "unbounded, 200 MB must fit"
    bounded = LocalBackend(make_config(tmp_path, memory_mb=64))
    bounded.start()
    try:
        refused = bounded.exec(ALLOCATE_200_MB)
        assert refused.exit_code != 0 and "MemoryError" in refused.stderr, refused
        assert bounded.exec("echo still here").stdout == "still here\n"
        pid1_limits = bounded.exec("cat /proc/1/limits").stdout
        assert re.search(r"Max address space\s+67108864\s+67108864", pid1_limits), pid1_limits
        bounded.check_python()  # from here on, commands run through the guest
        refused = bounded.exec(ALLOCATE_200_MB)
        assert refused.exit_code != 0 and "MemoryError" in refused.stderr, refused
        assert bounded.exec("echo still here").stdout == "still here\n"
    finally:
        bounded.close()
