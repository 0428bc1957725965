"""CRAB's Ubuntu actions, unchanged, on a container of ``crabray/crab-desktop``.

The actions are plain functions (pyautogui, mss, psutil, xdotool imported
inside them), so each runs in the container through its guest: the pointer,
keys, windows and files they touch are the container's. Needs the image
(``envs/crab-desktop``), built on first use (about 2 minutes).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from crabray.actions import desktop_actions
from crabray.backends.envs import build_env
from crabray.backends.episode_env import EpisodeEnv
from crabray.core.images import png_size
from tests.backends.docker.dockerd import desktop_backend, started
from tests.desktop.crab_ubuntu import ubuntu_actions as crab

WIDTH, HEIGHT = 1024, 768


@pytest.fixture
def ubuntu(crab_desktop_image: str) -> Iterator[EpisodeEnv]:
    """A fresh crab-desktop container, as CRAB's Ubuntu environment receives actions."""
    screen = f"{WIDTH}x{HEIGHT}x24"
    with started(desktop_backend("ubuntu", "crab-desktop", screen, memory_mb=2048)) as env:
        yield env


def _unique(name: str) -> str:
    return f"/root/{name}-{uuid.uuid4().hex[:8]}"


def test_the_image_has_what_crab_ubuntu_actions_and_subtasks_use(ubuntu: EpisodeEnv) -> None:
    programs = "xdotool xclip xsel xterm gnome-terminal vim gimp soffice lowriter localc openbox"
    done = ubuntu.exec(
        f"for p in {programs}; do command -v $p >/dev/null || echo missing $p; done; "
        "[ -d /home/crab ] || echo missing CRAB's home /home/crab"
    )
    assert done.stdout == "", done.stdout
    modules = "pyautogui, mss, pyperclip, psutil, odf, numpy, PIL, Xlib"
    done = ubuntu.exec(["python3", "-c", f"import {modules}; print(pyautogui.size())"])
    assert done.exit_code == 0, done.stderr
    assert done.stdout.strip() == f"Size(width={WIDTH}, height={HEIGHT})"
    # The clipboard CRAB's subtasks read with pyperclip, through xclip, on the container's screen.
    done = ubuntu.exec(
        "printf copied | xclip -selection clipboard && "
        "python3 -c 'import pyperclip; print(pyperclip.paste())'"
    )
    assert done.stdout.strip() == "copied", done.stderr


def test_the_seeds_click_and_check_file_exist_act_on_the_container(ubuntu: EpisodeEnv) -> None:
    """The seed's ``click`` (pyautogui) lands on the container's screen; its
    ``check_file_exist`` looks at the container's files, not the worker's."""
    path = _unique("clicked")
    crab.open_click_pad.run(ubuntu, path=path)
    assert crab.check_file_exist.run(ubuntu, file_path=path) is False
    crab.click.run(ubuntu, x=321.0, y=234.0)
    crab.wait_for_file.run(ubuntu, file_path=path, timeout=60)
    assert crab.check_file_exist.run(ubuntu, file_path=path) is True
    assert ubuntu.get_file(path) == b"321 234"
    assert not Path(path).exists(), "the click pad wrote inside the container only"


def test_crabs_desktop_actions_drive_a_terminal(ubuntu: EpisodeEnv) -> None:
    """CRAB's search_application (Super+A, the launcher), key_press, write_text and
    press_hotkey, unchanged, open xterm, run a command in it and close it."""
    path = _unique("typed")
    desktop_actions.search_application.run(ubuntu, name="xterm")
    desktop_actions.key_press.run(ubuntu, key="enter")
    crab.wait_for_window.run(ubuntu, name="xterm", timeout=120)
    assert crab.check_current_window_process.run(ubuntu, name="xterm") is True
    desktop_actions.write_text.run(ubuntu, text=f"echo typed by pyautogui > {path}\n")
    crab.wait_for_file.run(ubuntu, file_path=path, timeout=60)
    assert crab.check_file_content.run(ubuntu, file_path=path, content="typed by pyautogui")
    png = desktop_actions.screenshot.run(ubuntu)
    assert png_size(png) == (WIDTH, HEIGHT), "CRAB's mss screenshot of the container's screen"
    desktop_actions.press_hotkey.run(ubuntu, keys=["ctrl", "d"])  # end of input: the shell exits
    crab.wait_for_exit.run(ubuntu, process_name="xterm", timeout=60)
    assert crab.is_process_open.run(ubuntu, process_name="xterm") is False


def test_crabs_terminal_check_sees_gnome_terminal(ubuntu: EpisodeEnv) -> None:
    """crab-benchmark-v0's terminal subtasks check that the focused window belongs to
    ``gnome-terminal-server``: GNOME Terminal starts from the search on the session bus."""
    assert crab.check_current_window_process.run(ubuntu, name="gnome-terminal-server") is False
    desktop_actions.search_application.run(ubuntu, name="gnome-terminal")
    desktop_actions.key_press.run(ubuntu, key="enter")
    crab.wait_for_window.run(ubuntu, name="Terminal|root@", timeout=120)
    assert crab.check_current_window_process.run(ubuntu, name="gnome-terminal-server") is True


def test_a_build_with_unchanged_inputs_does_nothing(crab_desktop_image: str) -> None:
    """The image is keyed by its inputs: once built on a machine, a build is a no-op."""
    import docker

    client = docker.from_env()
    try:
        before = client.images.get(crab_desktop_image).id
        lines: list[str] = []
        build_env("crab-desktop", on_line=lines.append)
        assert any("is up to date" in line for line in lines), lines
        assert client.images.get(crab_desktop_image).id == before
    finally:
        client.close()
