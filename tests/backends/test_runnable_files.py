"""Which files a grader's command may run unnamed, and the listings a directory sandbox compares.

The listings walk real folders (``tmp_path``): what matters is that a change the
agent makes to a startup file or a program folder shows, and that a walk which
could not see everything says so instead of reporting no change.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from crabray.backends import runnable_files
from crabray.backends.runnable_files import UNLISTED, changed, list_runnable, runs_unnamed


@pytest.mark.parametrize(
    "path",
    [
        "/home/user/.profile",
        "/root/.bashrc",
        "/home/user/.local/bin/grep",
        "/home/user/Desktop/.action-env/bin/jupyter",
        "/home/user/Desktop/.action-env/pyvenv.cfg",
        "/home/user/app/node_modules/.bin/jest",
        "/home/user/.local/lib/python3.11/site-packages/zz.pth",
        "/home/user/.local/lib/python3.11/site-packages/usercustomize.py",
    ],
)
def test_startup_files_and_program_folders_run_unnamed(path: str) -> None:
    assert runs_unnamed(path)


@pytest.mark.parametrize(
    "path", ["/home/user/answer.txt", "/home/user/bin", "/home/user/binary/x", "/tmp/profile"]
)
def test_the_agents_work_does_not(path: str) -> None:
    assert not runs_unnamed(path)


def sandbox(tmp_path: Path) -> dict[Path, str]:
    home = tmp_path / "home"
    (home / "Desktop" / ".env" / "bin").mkdir(parents=True)
    (home / "Desktop" / ".env" / "bin" / "jupyter").write_text("#!/bin/sh\n")
    (home / ".profile").write_text("PATH=$HOME/bin:$PATH\n")
    (home / "notes.txt").write_text("setup\n")
    return {home: "/home/user"}


def test_a_sourced_profile_or_a_program_the_agent_changed_shows(tmp_path: Path) -> None:
    folders = sandbox(tmp_path)
    before = list_runnable(folders)
    assert set(before) == {"/home/user/.profile", "/home/user/Desktop/.env/bin/jupyter"}
    home = tmp_path / "home"
    (home / "answer.txt").write_text("42\n")  # the agent's work
    (home / "notes.txt").write_text("edited\n")
    assert changed(before, list_runnable(folders)) == []
    with (home / ".profile").open("a") as profile:  # same size or not, same inode
        profile.write("jupyter() { echo kernels; }\n")
    (home / "Desktop" / ".env" / "bin" / "jupyter").unlink()
    (home / ".local" / "bin").mkdir(parents=True)
    (home / ".local" / "bin" / "grep").write_text("#!/bin/sh\nexit 0\n")
    assert changed(before, list_runnable(folders)) == [
        "/home/user/.local/bin/grep",
        "/home/user/.profile",
        "/home/user/Desktop/.env/bin/jupyter",
    ]


def test_a_rewrite_that_keeps_size_and_modification_time_shows(tmp_path: Path) -> None:
    """The owner of a file can set its modification time back; not its change time."""
    folders = sandbox(tmp_path)
    profile = tmp_path / "home" / ".profile"
    before = list_runnable(folders)
    kept = profile.stat()
    time.sleep(0.01)
    profile.write_text("PATH=$HOME/xyz:$PATH\n")
    os.utime(profile, ns=(kept.st_atime_ns, kept.st_mtime_ns))
    assert profile.stat().st_size == kept.st_size
    assert changed(before, list_runnable(folders)) == ["/home/user/.profile"]


def test_a_symlink_is_listed_not_followed(tmp_path: Path) -> None:
    folders = sandbox(tmp_path)
    home = tmp_path / "home"
    outside = tmp_path / "outside" / "bin"
    outside.mkdir(parents=True)
    (home / "link").symlink_to(outside.parent)
    before = list_runnable(folders)
    (outside / "grep").write_text("#!/bin/sh\n")  # not the sandbox's
    assert changed(before, list_runnable(folders)) == []
    (home / ".bashrc").symlink_to(tmp_path / "outside")
    assert changed(before, list_runnable(folders)) == ["/home/user/.bashrc"]


def test_a_tree_too_deep_to_list_is_a_change(tmp_path: Path) -> None:
    """What the walk did not see may hold a changed program: it never reads as unchanged."""
    folders = sandbox(tmp_path)
    before = list_runnable(folders)
    (tmp_path / "home" / "answer.txt").joinpath(*["d"] * runnable_files.MAX_DEPTH).mkdir(
        parents=True
    )
    assert changed(before, list_runnable(folders)) == [UNLISTED]


def test_a_sandbox_of_more_entries_than_listed_is_a_change(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The walk stops at ``MAX_ENTRIES`` (lowered here to what a test can make): a folder of
    millions costs no more than that, and counts as changed."""
    folders = sandbox(tmp_path)
    before = list_runnable(folders)
    monkeypatch.setattr(runnable_files, "MAX_ENTRIES", 10)
    for index in range(20):
        (tmp_path / "home" / f"file{index}").write_text("x")
    assert UNLISTED in changed(before, list_runnable(folders))
