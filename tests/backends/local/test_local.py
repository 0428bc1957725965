"""Rules of the local backend alone: path confinement, settings, lifecycle, the registry.

These run the unconfined mode (``isolation: none``), whose host-side layout they
check (``HOME`` is ``ROOT/home`` on the host, host symlinks, host paths inside
the root); the confined mode has its own module, ``test_local_bwrap.py``.
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

import crabray.backends as backends
from crabray.backends import (
    Backend,
    LocalBackend,
    available_backends,
    backend_class,
    create_backend,
    register_backend,
)
from crabray.backends.local._backend import _remove
from crabray.core.environment import EnvironmentConfig
from crabray.core.errors import ConfigError, SandboxError, SandboxFileError
from tests.backends.conftest import host_pid_alive, wait_until


def make_config(tmp_path: Path, name: str = "loc", **settings: object) -> EnvironmentConfig:
    return EnvironmentConfig(
        name=name,
        backend="local",
        backend_settings={"root_dir": str(tmp_path / "sandboxes"), "isolation": "none", **settings},
    )


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """A host directory next to the sandboxes, holding a secret no sandbox may touch."""
    directory = tmp_path / "outside"
    directory.mkdir()
    (directory / "secret.txt").write_bytes(b"secret")
    return directory


@pytest.fixture
def local(tmp_path: Path) -> LocalBackend:
    backend = LocalBackend(make_config(tmp_path))
    backend.start()
    yield backend
    backend.close()


def test_sandbox_is_a_fresh_directory_named_after_the_environment(tmp_path: Path) -> None:
    first = LocalBackend(make_config(tmp_path, name="webshop"))
    second = LocalBackend(make_config(tmp_path, name="webshop"))
    first.start()
    second.start()
    try:
        root = (tmp_path / "sandboxes").resolve()
        assert first.root.parent == root
        assert "webshop" in first.root.name
        assert first.root != second.root
        assert sorted(p.name for p in first.root.iterdir()) == ["home", "owner.json", "tmp", "work"]
        assert first.workdir == first.root / "work"
        assert list(first.workdir.iterdir()) == [], "agents see an empty working directory"
    finally:
        first.close()
        second.close()


def test_home_and_tmpdir_point_inside_the_sandbox(local: LocalBackend) -> None:
    result = local.exec('printf "%s\\n%s\\n%s" "$HOME" "$TMPDIR" "$PWD"')
    home, tmpdir, pwd = result.stdout.split("\n")
    assert home == str(local.root / "home")
    assert tmpdir == str(local.root / "tmp")
    assert pwd == str(local.workdir)
    assert Path(home).is_dir()
    assert Path(tmpdir).is_dir()


def test_host_environment_does_not_leak_but_path_does(
    local: LocalBackend, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CRABRAY_HOST_ONLY", "leak")
    result = local.exec('printf "%s" "${CRABRAY_HOST_ONLY-absent}"; command -v sh >/dev/null')
    assert result.stdout == "absent"
    assert result.exit_code == 0


def test_describe_adds_host_and_workdir(local: LocalBackend) -> None:
    described = local.describe()
    assert described["kind"] == "local"
    assert described["env"] == "loc"
    assert described["workdir"] == str(local.workdir)
    assert described["root"] == str(local.root)
    assert isinstance(described["host"], str)
    assert described["host"]


@pytest.mark.parametrize(
    "path", ["../../escape.txt", "sub/../../../escape.txt", "./../../escape.txt"]
)
def test_dotdot_escape_is_refused(local: LocalBackend, path: str) -> None:
    with pytest.raises(SandboxFileError) as raised:
        local.put_file(path, b"x")
    message = str(raised.value)
    assert path in message
    assert str(local.root) in message
    assert "'..'" in message
    assert not (local.root.parent / "escape.txt").exists()
    with pytest.raises(SandboxFileError, match="outside the sandbox"):
        local.get_file(path)


def test_absolute_path_outside_is_refused(local: LocalBackend) -> None:
    with pytest.raises(SandboxFileError, match="absolute path outside") as raised:
        local.get_file("/etc/passwd")
    assert "/etc/passwd" in str(raised.value)
    with pytest.raises(SandboxFileError, match="absolute path outside"):
        local.put_file("/var/crabray-never/new.txt", b"x")
    with pytest.raises(SandboxFileError, match="absolute path outside"):
        local.put_file("/home/someone-else/new.txt", b"x")
    assert not Path("/var/crabray-never").exists()


def test_host_tmp_paths_are_sandbox_tmp_paths(local: LocalBackend, outside: Path) -> None:
    """``/tmp/...`` is the sandbox's ``/tmp`` (as when confined); the host's stays out of reach.

    Before confinement existed these were refused as "outside"; they now map
    into ``ROOT/tmp`` so a task behaves the same in both isolation modes.
    """
    secret = outside / "secret.txt"
    if not secret.is_relative_to("/tmp"):
        pytest.skip("the test's temporary directory is not under /tmp")
    with pytest.raises(SandboxFileError, match="no such file"):
        local.get_file(str(secret))
    local.put_file(str(secret), b"overwritten")
    assert secret.read_bytes() == b"secret"
    assert (local.root / "tmp" / secret.relative_to("/tmp")).read_bytes() == b"overwritten"


def test_sandbox_paths_map_into_the_root_as_confined_ones_do(local: LocalBackend) -> None:
    local.put_file("/home/user/Desktop/x.txt", b"desk")
    assert (local.root / "home" / "Desktop" / "x.txt").read_bytes() == b"desk"
    assert local.exec("cat ~/Desktop/x.txt").stdout == "desk"
    local.exec('echo t > "$TMPDIR/t"; echo w > in-work')
    assert local.get_file("/tmp/t") == b"t\n"
    assert local.get_file("/home/user/work/in-work") == b"w\n"
    assert local.exec("pwd", cwd="/home/user").stdout == f"{local.root / 'home'}\n"
    assert local.describe()["isolation"] == "none"


def test_absolute_path_inside_is_allowed(local: LocalBackend) -> None:
    local.put_file(str(local.workdir / "abs" / "in.txt"), b"inside")
    assert local.get_file("abs/in.txt") == b"inside"
    assert local.get_file(str(local.workdir / "abs/in.txt")) == b"inside"


def test_symlinked_directory_pointing_outside_is_refused(
    local: LocalBackend, outside: Path
) -> None:
    (local.workdir / "link").symlink_to(outside)
    with pytest.raises(SandboxFileError, match="symlink") as raised:
        local.get_file("link/secret.txt")
    assert str(local.root) in str(raised.value)
    with pytest.raises(SandboxFileError, match="symlink"):
        local.put_file("link/planted.txt", b"x")
    assert sorted(p.name for p in outside.iterdir()) == ["secret.txt"]


def test_symlinked_file_pointing_outside_is_refused(local: LocalBackend, outside: Path) -> None:
    local.exec(["ln", "-s", str(outside / "secret.txt"), "alias.txt"])
    local.exec(["ln", "-s", str(outside / "not-yet.txt"), "dangling.txt"])
    with pytest.raises(SandboxFileError, match="symlink"):
        local.get_file("alias.txt")
    with pytest.raises(SandboxFileError, match="symlink"):
        local.put_file("alias.txt", b"overwritten")
    with pytest.raises(SandboxFileError, match="symlink"):
        local.put_file("dangling.txt", b"planted")
    assert (outside / "secret.txt").read_bytes() == b"secret"
    assert not (outside / "not-yet.txt").exists()


def test_symlink_inside_the_sandbox_is_followed(local: LocalBackend) -> None:
    local.put_file("real/data.txt", b"real")
    (local.workdir / "alias").symlink_to(local.workdir / "real")
    assert local.get_file("alias/data.txt") == b"real"
    local.put_file("alias/data.txt", b"changed")
    assert local.get_file("real/data.txt") == b"changed"
    assert (local.workdir / "alias").is_symlink()


def test_put_into_a_directory_or_under_a_file_is_refused(local: LocalBackend) -> None:
    local.exec("mkdir adir; echo x > afile")
    with pytest.raises(SandboxFileError, match="is a directory"):
        local.put_file("adir", b"x")
    with pytest.raises(SandboxFileError, match="afile/child"):
        local.put_file("afile/child", b"x")
    assert local.get_file("afile") == b"x\n"


def test_put_keeps_the_mode_of_an_existing_file(local: LocalBackend) -> None:
    local.put_file("run.sh", b"#!/bin/sh\necho one\n")
    assert stat.S_IMODE((local.workdir / "run.sh").stat().st_mode) == 0o644
    local.exec("chmod 755 run.sh")
    local.put_file("run.sh", b"#!/bin/sh\necho two\n")
    assert local.exec("./run.sh").stdout == "two\n"
    assert [p.name for p in local.workdir.iterdir() if p.name.startswith(".run.sh")] == []


def test_unknown_setting_is_a_config_error_naming_the_field(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as raised:
        LocalBackend(make_config(tmp_path, rot_dir="/tmp"))
    assert raised.value.field == "backend_settings.rot_dir"
    assert "did you mean 'root_dir'" in str(raised.value)


def test_mistyped_setting_is_a_config_error_naming_the_field(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as raised:
        create_backend(make_config(tmp_path, shell=["/bin/sh"]))
    assert raised.value.field == "backend_settings.shell"


def test_shell_setting_is_used_for_string_commands(tmp_path: Path) -> None:
    bash = shutil.which("bash")
    if bash is None:
        pytest.skip("bash is not installed")
    backend = LocalBackend(make_config(tmp_path, shell="bash"))
    backend.start()
    try:
        assert backend.exec('printf "%s" "$BASH_VERSION" | wc -c').stdout.strip() != "0"
    finally:
        backend.close()


def test_missing_shell_fails_at_start(tmp_path: Path) -> None:
    backend = LocalBackend(make_config(tmp_path, shell="/no/such/shell"))
    with pytest.raises(SandboxError, match="/no/such/shell"):
        backend.start()


def test_unknown_kind_is_a_config_error_listing_known_kinds() -> None:
    config = EnvironmentConfig(name="e", backend="dockr")
    with pytest.raises(ConfigError) as raised:
        create_backend(config)
    assert raised.value.field == "backend"
    assert "dockr" in str(raised.value)
    assert "known backends: docker, local" in str(raised.value)


def test_missing_optional_dependency_gives_an_install_hint(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(backends, "_BACKENDS", backends._BACKENDS.copy())
    backends._BACKENDS.add_lazy(
        "fancy",
        "crabray_test_missing_dependency:FancyBackend",
        install_hint="pip install 'crabray[fancy]'",
    )
    assert "fancy" in available_backends()
    with pytest.raises(ConfigError) as raised:
        create_backend(EnvironmentConfig(name="e", backend="fancy"))
    assert raised.value.field == "backend"
    assert "pip install 'crabray[fancy]'" in str(raised.value)
    assert "crabray_test_missing_dependency" in str(raised.value)


def test_register_backend_makes_a_new_kind_creatable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(backends, "_BACKENDS", backends._BACKENDS.copy())

    @register_backend("scratch")
    class ScratchBackend(LocalBackend):
        pass

    assert ScratchBackend.kind == "scratch"
    assert "scratch" in available_backends()
    config = EnvironmentConfig(
        name="e", backend="scratch", backend_settings={"root_dir": str(tmp_path)}
    )
    backend = create_backend(config)
    assert type(backend) is ScratchBackend
    with pytest.raises(TypeError):
        register_backend("nonsense")(dict)  # type: ignore[type-var]


def test_a_backend_declares_its_kind_once_and_is_filed_under_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(backends, "_BACKENDS", backends._BACKENDS.copy())

    @register_backend
    class DeclaredBackend(LocalBackend):
        kind = "declared"

    assert backend_class("declared") is DeclaredBackend
    config = EnvironmentConfig(
        name="e", backend="declared", backend_settings={"root_dir": str(tmp_path)}
    )
    backend = create_backend(config)
    with pytest.raises(SandboxError, match="cannot exec: the declared sandbox of 'e' is not"):
        backend.exec("true")
    with pytest.raises(TypeError, match="declares kind 'declared' but is registered as"):
        register_backend("other")(DeclaredBackend)
    assert "other" not in available_backends()
    with pytest.raises(TypeError, match="declares its kind"):

        @register_backend
        class Undeclared(LocalBackend):
            pass


def test_create_backend_returns_an_unstarted_local_backend(tmp_path: Path) -> None:
    backend = create_backend(make_config(tmp_path))
    assert type(backend) is LocalBackend
    assert backend.kind == "local"
    assert not (tmp_path / "sandboxes").exists()
    backend.close()


def test_public_api() -> None:
    assert sorted(backends.__all__) == sorted(
        [
            "Backend",
            "ExecResult",
            "LocalBackend",
            "available_backends",
            "backend_class",
            "create_backend",
            "known_backend",
            "register_backend",
        ]
    )
    assert "local" in available_backends()
    assert issubclass(LocalBackend, Backend)


@pytest.mark.parametrize(
    "operation",
    [
        lambda b: b.exec("true"),
        lambda b: b.put_file("f", b"x"),
        lambda b: b.get_file("f"),
        lambda b: b.reset(),
        lambda b: b.workdir,
    ],
    ids=["exec", "put_file", "get_file", "reset", "workdir"],
)
def test_use_before_start_is_a_sandbox_error(tmp_path: Path, operation) -> None:
    backend = LocalBackend(make_config(tmp_path))
    with pytest.raises(SandboxError, match=r"not started; call start\(\) first"):
        operation(backend)


def test_start_twice_and_start_after_close_are_refused(tmp_path: Path) -> None:
    backend = LocalBackend(make_config(tmp_path))
    backend.start()
    with pytest.raises(SandboxError, match="already started"):
        backend.start()
    backend.close()
    with pytest.raises(SandboxError, match="closed"):
        backend.start()


def test_close_before_start_is_harmless(tmp_path: Path) -> None:
    backend = LocalBackend(make_config(tmp_path))
    backend.close()
    backend.close()
    assert backend.describe()["workdir"] is None


def test_missing_program_and_missing_cwd_are_results(local: LocalBackend) -> None:
    missing = local.exec(["crabray-no-such-program", "--flag"])
    assert missing.exit_code == 127
    assert "crabray-no-such-program" in missing.stderr
    nowhere = local.exec("pwd", cwd="no/such/dir")
    assert nowhere.exit_code == 126
    assert "no/such/dir" in nowhere.stderr
    assert nowhere.stdout == ""


@pytest.mark.parametrize("command", [[], ["echo", 3]], ids=["empty", "not-a-string"])
def test_malformed_argv_is_a_value_error(local: LocalBackend, command: list[object]) -> None:
    with pytest.raises(ValueError, match="non-empty list of strings"):
        local.exec(command)  # type: ignore[arg-type]


def test_timeout_keeps_the_output_so_far(local: LocalBackend) -> None:
    result = local.exec("echo started; echo warn >&2; sleep 30", timeout_sec=1)
    assert result.timed_out is True
    assert result.stdout == "started\n"
    assert result.stderr == "warn\n"
    assert 0.9 <= result.duration_sec < 10


def test_background_child_holding_stdout_does_not_block_exec(local: LocalBackend) -> None:
    started = time.monotonic()
    result = local.exec("sleep 30 & echo quick")
    assert time.monotonic() - started < 5
    assert result.stdout == "quick\n"
    assert result.exit_code == 0
    assert result.timed_out is False


def test_undecodable_output_is_replaced_not_fatal(local: LocalBackend) -> None:
    result = local.exec(r"printf 'ok \377\376 end'")
    assert result.stdout == "ok \ufffd\ufffd end"


def test_reset_recreates_a_sandbox_the_commands_deleted(local: LocalBackend) -> None:
    workdir = local.workdir
    result = local.exec(f"cd / && rm -rf '{local.root}'")
    assert result.exit_code == 0
    assert not local.root.exists()
    local.reset()
    assert sorted(p.name for p in local.root.iterdir()) == ["home", "owner.json", "tmp", "work"]
    assert local.exec("pwd").stdout == f"{workdir}\n"


def test_close_removes_even_read_only_trees(tmp_path: Path) -> None:
    backend = LocalBackend(make_config(tmp_path))
    backend.start()
    workdir = backend.workdir
    backend.exec("mkdir -p ro/deep && echo x > ro/deep/f && chmod -R a-w ro && chmod 000 ro")
    backend.close()
    assert not os.path.lexists(workdir)


def test_cleanup_removes_sandboxes_of_dead_owners_only(tmp_path: Path) -> None:
    """A sandbox whose owner process died (a killed actor) is removed with its processes."""
    root = tmp_path / "sandboxes"
    script = (
        "import sys, time\n"
        "from crabray.backends import create_backend\n"
        "from crabray.core.environment import EnvironmentConfig\n"
        "cfg = EnvironmentConfig(name='orphan', backend_settings="
        f"{{'root_dir': {str(root)!r}, 'isolation': 'none'}})\n"
        "b = create_backend(cfg); b.start()\n"
        "b.exec('sleep 300 > /dev/null 2>&1 &')\n"
        "print(b.root, flush=True)\n"
        "time.sleep(300)\n"
    )
    owner = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    assert owner.stdout is not None
    abandoned = Path(owner.stdout.readline().strip())
    sleeper = [p for p in Path("/proc").iterdir() if p.name.isdigit() and _cwd_in(p, abandoned)]
    assert sleeper, "the background command should run inside the sandbox"

    live = LocalBackend(make_config(tmp_path))
    live.start()
    try:
        assert LocalBackend.cleanup_orphans({"root_dir": str(root)}) == [], "owner still alive"
        owner.kill()
        owner.wait()
        removed = LocalBackend.cleanup_orphans({"root_dir": str(root)})
        assert removed == [f"sandbox folder {abandoned}"]
        assert not abandoned.exists()
        wait_until(lambda: not any(host_pid_alive(int(p.name)) for p in sleeper))
        assert live.root.exists(), "a sandbox whose owner lives is left alone"
    finally:
        live.close()
        owner.kill()


def _cwd_in(proc: Path, directory: Path) -> bool:
    try:
        cwd = Path(os.readlink(proc / "cwd"))
    except OSError:
        return False
    return cwd == directory or directory in cwd.parents


def test_removing_one_tree_from_several_places_at_once(tmp_path: Path) -> None:
    """Cleanups of several Ray nodes on one machine may remove the same sandbox at once."""
    tree = tmp_path / "crabray-abandoned"
    for trial in range(3):
        for d in range(100):
            (tree / f"d{d}" / "sub").mkdir(parents=True, exist_ok=True)
            for f in range(5):
                (tree / f"d{d}" / "sub" / f"f{f}").write_text("x")
        errors: list[BaseException] = []
        threads = [threading.Thread(target=_remove_into, args=(tree, errors)) for _ in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert errors == [], f"trial {trial}"
        assert not tree.exists()


def _remove_into(tree: Path, errors: list[BaseException]) -> None:
    try:
        _remove(tree)
    except BaseException as exc:
        errors.append(exc)


def test_memory_mb_bounds_unconfined_commands_too(local: LocalBackend, tmp_path: Path) -> None:
    allocate = 'python3 -c "b = bytearray(200 * 2**20)"'
    assert local.exec(allocate).exit_code == 0, "unbounded, 200 MB must fit"
    bounded = LocalBackend(make_config(tmp_path, name="bounded", memory_mb=64))
    bounded.start()
    try:
        refused = bounded.exec(allocate)
        assert refused.exit_code != 0 and "MemoryError" in refused.stderr, refused
        assert bounded.exec("echo still here").stdout == "still here\n"
    finally:
        bounded.close()
