"""The desktop actions, unchanged, on a real container of ``crabray/desktop``.

The image (``envs/desktop``) starts Xvfb on :0 in every container and sets
``DISPLAY``; the docker backend waits for the server (the image's ready
command) and takes screenshots with ``xwd`` inside the container. Needs the
image, built from ``crabray/debian`` (debootstrap) on first use.
"""

from __future__ import annotations

import io
from collections.abc import Iterator
from typing import Any

import pytest
from PIL import Image

from crabray.actions.desktop import (
    click,
    key_press,
    launch_app,
    mouse_move,
    screenshot,
    type_text,
    window_exists,
)
from crabray.backends import Backend, create_backend
from crabray.backends.episode_env import EpisodeEnv
from crabray.core.environment import EnvironmentConfig
from crabray.core.errors import SandboxError
from crabray.core.images import png_size
from tests.backends.docker.dockerd import (
    BUSYBOX_IMAGE,
    desktop_backend,
    require_env_image,
    started,
)

WIDTH, HEIGHT = 640, 480


def _backend(**settings: Any) -> Backend:
    return desktop_backend("dockdesk", "desktop", f"{WIDTH}x{HEIGHT}x24", **settings)


@pytest.fixture
def desk() -> Iterator[EpisodeEnv]:
    require_env_image("desktop")
    with started(_backend()) as env:
        yield env


def _pointer(env: EpisodeEnv) -> tuple[int, int]:
    out = env.exec(["xdotool", "getmouselocation", "--shell"]).stdout
    where = dict(line.split("=", 1) for line in out.splitlines() if "=" in line)
    return int(where["X"]), int(where["Y"])


def _colours(png: bytes) -> int:
    with Image.open(io.BytesIO(png)) as image:
        return len(image.convert("RGB").getcolors(maxcolors=1 << 20) or [])


def test_screenshot_of_a_window_is_a_png_of_the_screen(desk: EpisodeEnv) -> None:
    blank = screenshot.run(desk)
    assert blank.startswith(b"\x89PNG\r\n\x1a\n")
    assert png_size(blank) == (WIDTH, HEIGHT)
    launch_app.run(desk, command="xmessage -center -title shot hello-docker", window_title="shot")
    png = screenshot.run(desk)
    assert png_size(png) == (WIDTH, HEIGHT)
    assert _colours(png) > 1, "the screenshot of a window is one flat colour"
    assert png != blank
    assert png_size(screenshot.run(desk, max_width=160)) == (160, 120)


@pytest.mark.parametrize("act", [mouse_move, click])
def test_pointer_lands_on_fraction_times_size(desk: EpisodeEnv, act: Any) -> None:
    act.run(desk, x=0.25, y=0.75)
    assert _pointer(desk) == (int(0.25 * WIDTH), int(0.75 * HEIGHT))


def test_keyboard_reaches_the_window(desk: EpisodeEnv) -> None:
    """Return activates an xmessage's default button: the window goes away."""
    launch_app.run(
        desk, command="xmessage -center -title kb-test -default okay hello", window_title="kb-test"
    )
    assert window_exists.run(desk, title="kb-test") is True
    mouse_move.run(desk, x=0.5, y=0.5)
    type_text.run(desk, text="abc")
    key_press.run(desk, key="Return")
    assert window_exists.run(desk, title="kb-test") is False


@pytest.mark.parametrize("mode", ["recreate", "snapshot"])
def test_reset_gives_a_fresh_screen(mode: str) -> None:
    """After a reset the screen answers at once and the old window is gone (a snapshot
    carries the old server's lock file, which the image's entrypoint clears)."""
    require_env_image("desktop")
    backend = _backend(reset=mode, warm_spare=True)
    with started(backend) as env:
        launch_app.run(env, command="xmessage -title before-reset x", window_title="before-reset")
        backend.reset()
        assert window_exists.run(env, title="before-reset") is False
        assert png_size(backend.screenshot()) == (WIDTH, HEIGHT)


def test_default_screen_is_1280x800() -> None:
    require_env_image("desktop")
    with started(_backend(env={})) as env:
        assert env.exec(["xdotool", "getdisplaygeometry"]).stdout.split() == ["1280", "800"]
        assert env.exec("echo $DISPLAY").stdout == ":0\n"


def test_image_without_a_screen_says_which_has_one() -> None:
    config = EnvironmentConfig(
        name="noscreen", backend="docker", backend_settings={"image": BUSYBOX_IMAGE}
    )
    backend = create_backend(config)
    backend.start()
    try:
        with pytest.raises(SandboxError, match=r"no usable screen.*xwd.*crabray/desktop"):
            backend.screenshot()
    finally:
        backend.close()
