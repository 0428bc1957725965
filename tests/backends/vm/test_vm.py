"""Rules of the VM backend beyond the shared contract, against a real QEMU guest.

One module-scoped VM serves the tests that only need a running guest; the
boot cache (see ``vmimage.py``) makes every further VM a restore of about a
second, so the few tests that need their own VM stay cheap too.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from crabray.backends import create_backend
from crabray.backends.ssh._remote import kill_exec_script
from crabray.backends.vm import VmBackend, parse_vm_settings
from crabray.core.environment import EnvironmentConfig
from crabray.core.errors import ConfigError, SandboxError, SandboxFileError
from tests.backends.vm.vmimage import qemu_running, vm_leftovers, vm_missing, vm_settings

pytestmark = pytest.mark.component  # QEMU virtual machines


def _require_vm() -> None:
    hint = vm_missing()
    if hint is None:
        return
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"the VM backend is required under CI=true: {hint}")
    pytest.skip(f"VM backend not usable here: {hint}")


def _make(tmp_path: Path, **overrides: Any) -> VmBackend:
    config = EnvironmentConfig(
        name="vmtest", backend="vm", backend_settings=vm_settings(tmp_path, **overrides)
    )
    backend = create_backend(config)
    assert isinstance(backend, VmBackend)
    return backend


@pytest.fixture(scope="module")
def vm(tmp_path_factory: pytest.TempPathFactory) -> Iterator[VmBackend]:
    """One started VM for the tests that only need a running guest."""
    _require_vm()
    backend = _make(tmp_path_factory.mktemp("vm"))
    backend.start()
    yield backend
    backend.close()


# -- settings (no VM needed) --------------------------------------------------------


def test_unknown_setting_is_a_config_error_with_a_hint() -> None:
    with pytest.raises(ConfigError, match=r"memory_mbs.*did you mean 'memory_mb'"):
        parse_vm_settings({"image_dir": "/x", "memory_mbs": 128})


def test_a_machine_to_boot_is_required() -> None:
    with pytest.raises(ConfigError, match="give disk, kernel\\+initrd, or image_dir"):
        parse_vm_settings({"memory_mb": 128})
    with pytest.raises(ConfigError, match="not both"):
        parse_vm_settings({"disk": "/a.qcow2", "kernel": "/vmlinuz", "initrd": "/i"})


def test_image_dir_supplies_kernel_initrd_and_keys() -> None:
    settings = parse_vm_settings({"image_dir": "/img"})
    assert settings.kernel_file == Path("/img/vmlinuz")
    assert settings.initrd_file == Path("/img/initramfs.cpio.gz")
    assert settings.key_file == Path("/img/id_ed25519")
    assert settings.host_key_file == Path("/img/host_key.pub")


def test_missing_image_file_is_a_sandbox_error_naming_it(tmp_path: Path) -> None:
    backend = _make(tmp_path, image_dir=str(tmp_path / "nothing"))
    with pytest.raises(SandboxError, match=r"kernel .*nothing/vmlinuz is not a file.*build.sh"):
        backend.start()
    backend.close()


def test_cleanup_orphans_kills_the_qemu_of_a_dead_owner_only(tmp_path: Path) -> None:
    if not sys.platform.startswith("linux"):
        pytest.skip("owner records use /proc")
    dead = subprocess.Popen(["true"])
    dead.wait()
    folders = {}
    procs = {}
    for name, owner_pid in (("vm-dead-1", dead.pid), ("vm-live-1", os.getpid())):
        folder = tmp_path / name
        folder.mkdir()
        stat = Path(f"/proc/{owner_pid}/stat")
        start = int(stat.read_text().rsplit(")", 1)[1].split()[19]) if stat.exists() else 1
        record = {"host": socket.gethostname(), "pid": owner_pid, "start_time": start}
        (folder / "owner.json").write_text(json.dumps(record))
        # a stand-in for QEMU: a process whose command line names the folder
        procs[name] = subprocess.Popen(
            [sys.executable, "-c", "import time; time.sleep(300)", str(folder)]
        )
        (folder / "qemu.pid").write_text(str(procs[name].pid))
        folders[name] = folder
    try:
        removed = VmBackend.cleanup_orphans({"image_dir": "/img", "runtime_dir": str(tmp_path)})
        assert removed == [f"VM {folders['vm-dead-1']}"]
        assert procs["vm-dead-1"].wait(timeout=10) != 0
        assert not folders["vm-dead-1"].exists()
        assert procs["vm-live-1"].poll() is None
        assert folders["vm-live-1"].exists()
    finally:
        for proc in procs.values():
            proc.kill()
            proc.wait()


# -- a real guest -----------------------------------------------------------------


def test_vm_boots_and_runs_commands_in_the_guest(vm: VmBackend) -> None:
    result = vm.exec("uname -s; cat /etc/hostname; ip -4 addr show | grep -c 10.0.2.15")
    assert result.stdout.split() == ["Linux", "crabray-vm", "1"], result.stderr
    described = vm.describe()
    assert described["start_how"] in ("boot", "restore")
    assert described["boot_sec"] > 0
    assert described["snapshot_sec"] > 0
    assert described["accel"] in ("-accel tcg", "-enable-kvm -cpu host")
    assert qemu_running(described["qemu_pid"])


def test_reset_reverts_the_whole_machine(vm: VmBackend) -> None:
    vm.put_file("inside.txt", b"sandbox file")
    vm.exec("echo outside > /root/outside.txt; mkdir -p /opt/junk; echo x > /opt/junk/f")
    vm.exec("sleep 600 >/dev/null 2>&1 & echo $! > /root/sleeper.pid")
    sleeper = vm.exec("cat /root/sleeper.pid").stdout.strip()
    assert vm.exec(f"test -d /proc/{sleeper}").exit_code == 0
    resets_before = vm.describe()["resets"]

    vm.reset()

    with pytest.raises(SandboxFileError):
        vm.get_file("inside.txt")
    gone = vm.exec(
        "test ! -e /root/outside.txt && test ! -e /opt/junk && test ! -e /root/sleeper.pid"
    )
    assert gone.exit_code == 0
    assert "sleep 600" not in vm.exec("ps").stdout
    described = vm.describe()
    assert described["resets"] == resets_before + 1
    assert described["last_reset_sec"] > 0
    assert vm.exec("echo usable").stdout == "usable\n"


def test_files_move_both_ways(vm: VmBackend) -> None:
    data = os.urandom(300_000)
    vm.put_file("blob.bin", data)
    assert vm.exec(["wc", "-c", "blob.bin"]).stdout.split()[0] == str(len(data))
    assert vm.get_file("blob.bin") == data


@pytest.mark.slow
def test_kill_by_marker_works_with_the_guests_busybox_grep(vm: VmBackend) -> None:
    """The remote kill script run with busybox's grep, as on a guest without GNU grep."""
    marker = "feedbeef0123"
    vm.exec("mkdir -p bb && ln -sf /bin/busybox bb/grep")
    spawn = "setsid env ZZ_AFTER=1 CRABRAY_EXEC={} sleep 600 >/dev/null 2>&1 & echo $!"
    target = vm.exec(spawn.format(marker)).stdout.strip()
    decoy = vm.exec(spawn.format(marker + "0")).stdout.strip()
    killed = vm.exec(
        ["env", f"PATH={vm.describe()['workdir']}/bb:/bin:/sbin:/usr/bin", "sh", "-c",
         kill_exec_script(None, marker)]
    )  # fmt: skip
    assert killed.exit_code == 0, killed.stderr
    alive = "for p in {} {}; do kill -0 $p 2>/dev/null && echo $p; done; true"
    assert vm.exec(alive.format(target, decoy)).stdout.split() == [decoy]
    vm.exec(f"kill -9 {decoy}")


def test_restart_reset_mode_also_restores_the_clean_state(tmp_path: Path) -> None:
    _require_vm()
    backend = _make(tmp_path, reset_mode="restart")
    try:
        backend.start()
        old_pid = backend.describe()["qemu_pid"]
        backend.exec("echo dirty > /root/dirty.txt")
        backend.reset()
        assert backend.exec("test ! -e /root/dirty.txt").exit_code == 0
        described = backend.describe()
        assert described["qemu_pid"] != old_pid
        assert not qemu_running(old_pid)
        assert described["last_reset_sec"] > 0
    finally:
        backend.close()


def test_close_stops_qemu_and_removes_the_vm_folder(tmp_path: Path) -> None:
    _require_vm()
    backend = _make(tmp_path)
    backend.start()
    described = backend.describe()
    assert qemu_running(described["qemu_pid"])
    backend.close()
    backend.close()
    deadline = time.monotonic() + 10
    while vm_leftovers(described, []) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert vm_leftovers(described, []) == []


def test_a_boot_that_does_not_reach_ssh_fails_with_the_serial_log(tmp_path: Path) -> None:
    _require_vm()
    backend = _make(tmp_path, boot_cache=False, boot_timeout_sec=2)
    with pytest.raises(SandboxError, match=r"no SSH server .* within 2 s .*serial console") as info:
        backend.start()
    assert "boot_timeout_sec" in str(info.value)
    described = backend.describe()
    assert described["vm_dir"] is not None
    assert vm_leftovers(described, []) == [], "a failed start must clean up after itself"
    backend.close()


_DYING_OWNER = """
import json, os, sys
from crabray.backends import create_backend
from crabray.core.environment import EnvironmentConfig
settings = json.loads(sys.argv[1])
backend = create_backend(EnvironmentConfig(name="dying", backend="vm", backend_settings=settings))
backend.start()
print(json.dumps(backend.describe()), flush=True)
os._exit(3)  # dies without close(), as a killed actor would
"""


def test_qemu_dies_with_its_owner_and_cleanup_removes_the_folder(tmp_path: Path) -> None:
    _require_vm()
    settings = vm_settings(tmp_path)
    child = subprocess.run(
        [sys.executable, "-c", _DYING_OWNER, json.dumps(settings)],
        capture_output=True,
        text=True,
        timeout=900,
        cwd=Path(__file__).resolve().parents[3],
    )
    assert child.returncode == 3, child.stderr[-2000:]
    described = json.loads(child.stdout.strip().splitlines()[-1])
    deadline = time.monotonic() + 15
    while qemu_running(described["qemu_pid"]) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not qemu_running(described["qemu_pid"]), "the watchdog did not stop QEMU"
    assert Path(described["vm_dir"]).exists()
    assert f"VM {described['vm_dir']}" in VmBackend.cleanup_orphans(settings)
    assert not Path(described["vm_dir"]).exists()
