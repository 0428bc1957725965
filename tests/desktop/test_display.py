"""The local backend's ``display`` setting against a real Xvfb server."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from PIL import Image

from crabray.backends.display import parse_screen
from crabray.backends.local import LocalBackend
from crabray.core.environment import EnvironmentConfig
from crabray.core.errors import ConfigError, SandboxError
from crabray.core.images import downscale_png, png_size
from tests.backends.conftest import host_pid_alive
from tests.desktop.conftest import HEIGHT, WIDTH, make_desktop


def test_screen_settings_parse() -> None:
    assert parse_screen(False) is None
    assert str(parse_screen(True)) == "1280x800x24"
    assert str(parse_screen("800x600")) == "800x600x24"
    for bad in ("big", "10x10x24", "800x600x16", "800x"):
        with pytest.raises(ValueError):
            parse_screen(bad)


def test_a_bad_display_setting_names_the_field() -> None:
    config = EnvironmentConfig(name="desk", backend_settings={"display": "huge"})
    with pytest.raises(ConfigError, match=r"backend_settings\.display") as caught:
        LocalBackend(config)
    assert "WxH" in str(caught.value) or "screen size" in str(caught.value)


def test_without_a_display_there_is_no_screen(tmp_path: Path) -> None:
    config = EnvironmentConfig(name="plain", backend_settings={"root_dir": str(tmp_path)})
    backend = LocalBackend(config)
    backend.start()
    try:
        variables = backend.exec("env").stdout.splitlines()
        assert not any(line.startswith("DISPLAY=") for line in variables)
        with pytest.raises(SandboxError, match="no screen"):
            backend.screenshot()
    finally:
        backend.close()


def test_commands_see_the_private_display(desktop: LocalBackend) -> None:
    done = desktop.exec(["xdotool", "getdisplaygeometry"])
    assert done.ok, done.stderr
    assert done.stdout.split() == [str(WIDTH), str(HEIGHT)]
    assert desktop.exec("echo $DISPLAY").stdout.strip().startswith(":")


def test_screenshot_is_a_png_of_the_configured_size(desktop: LocalBackend) -> None:
    png = desktop.screenshot()
    assert png.startswith(b"\x89PNG\r\n\x1a\n")
    assert png_size(png) == (WIDTH, HEIGHT)
    with Image.open(io.BytesIO(png)) as image:
        image.load()
        assert image.size == (WIDTH, HEIGHT)


def test_screenshot_shows_the_right_colours(desktop: LocalBackend) -> None:
    """A window of a known colour lands in the PNG with that colour (byte order is right)."""
    shown = desktop.exec(
        "xmessage -geometry 200x100+0+0 -bg '#ff8000' -fg '#ff8000' -title swatch x "
        "</dev/null >/dev/null 2>&1 & xdotool search --sync --name swatch",
        timeout_sec=20,
    )
    if shown.exit_code == 127 or "not found" in shown.stderr:
        pytest.skip("xmessage missing; install with: apt-get install x11-utils")
    assert shown.ok, shown.stderr
    with Image.open(io.BytesIO(desktop.screenshot())) as image:
        assert image.convert("RGB").getpixel((50, 50)) == (255, 128, 0)


def test_downscaled_copy_keeps_the_aspect(desktop: LocalBackend) -> None:
    small = downscale_png(desktop.screenshot(), 320)
    assert png_size(small) == (320, 240)
    full = desktop.screenshot()
    assert downscale_png(full, 4000) is full


def test_reset_gives_a_fresh_screen(desktop: LocalBackend) -> None:
    desktop.exec("xmessage -title leftover hi </dev/null >/dev/null 2>&1 & sleep 1", timeout_sec=10)
    first = desktop._display.display
    assert first is not None
    old_pid = first.pid
    desktop.reset()
    assert old_pid is not None and not host_pid_alive(old_pid)
    assert desktop.exec(["xdotool", "search", "--name", "leftover"]).exit_code == 1
    assert png_size(desktop.screenshot()) == (WIDTH, HEIGHT)


def test_close_kills_xvfb(tmp_path: Path) -> None:
    backend = make_desktop(tmp_path)
    backend.start()
    display = backend._display.display
    assert display is not None and display.pid is not None
    pid, socket = display.pid, Path(display.socket_path)
    assert host_pid_alive(pid) and socket.exists()
    backend.close()
    backend.close()
    assert not host_pid_alive(pid)
    assert not socket.exists()
    with pytest.raises(SandboxError):
        backend.screenshot()


def test_two_sandboxes_get_two_screens(tmp_path: Path) -> None:
    one, two = make_desktop(tmp_path / "1"), make_desktop(tmp_path / "2", display="320x200")
    one.start()
    try:
        two.start()
        try:
            assert one.exec("echo $DISPLAY").stdout != two.exec("echo $DISPLAY").stdout
            assert png_size(two.screenshot()) == (320, 200)
        finally:
            two.close()
    finally:
        one.close()
