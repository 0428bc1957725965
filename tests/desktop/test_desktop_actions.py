"""Desktop actions against a real Xvfb screen: where the pointer goes, what keys do."""

from __future__ import annotations

import pytest

from crabray.actions import DESKTOP_ACTIONS, launch_app, pointer_within, window_exists
from crabray.actions.desktop import (
    click,
    double_click,
    drag,
    hotkey,
    key_press,
    mouse_move,
    right_click,
    screenshot,
    scroll,
    type_text,
)
from crabray.backends.episode_env import EpisodeEnv
from crabray.core.errors import ActionError, ActionParameterError
from crabray.core.images import png_size
from tests.desktop.conftest import HEIGHT, WIDTH


def _pointer(env: EpisodeEnv) -> tuple[int, int]:
    out = env.exec(["xdotool", "getmouselocation", "--shell"]).stdout
    where = dict(line.split("=", 1) for line in out.splitlines() if "=" in line)
    return int(where["X"]), int(where["Y"])


@pytest.mark.parametrize("act", [click, double_click, right_click, mouse_move])
def test_pointer_lands_on_fraction_times_size(desk_env: EpisodeEnv, act) -> None:
    act.run(desk_env, x=0.25, y=0.75)
    assert _pointer(desk_env) == (int(0.25 * WIDTH), int(0.75 * HEIGHT))


def test_edges_stay_on_screen(desk_env: EpisodeEnv) -> None:
    mouse_move.run(desk_env, x=1.0, y=1.0)
    assert _pointer(desk_env) == (WIDTH - 1, HEIGHT - 1)
    mouse_move.run(desk_env, x=0.0, y=0.0)
    assert _pointer(desk_env) == (0, 0)


def test_drag_and_scroll_end_where_asked(desk_env: EpisodeEnv) -> None:
    assert "to (480, 360)" in drag.run(desk_env, from_x=0.1, from_y=0.1, to_x=0.75, to_y=0.75)
    assert _pointer(desk_env) == (480, 360)
    scroll.run(desk_env, x=0.5, y=0.5, direction="up", amount=2)
    assert _pointer(desk_env) == (320, 240)


@pytest.mark.parametrize(
    ("act", "arguments", "param"),
    [
        (click, {"x": 1.5, "y": 0.5}, "x"),
        (mouse_move, {"x": 0.5, "y": -0.1}, "y"),
        (drag, {"from_x": 0, "from_y": 0, "to_x": 2, "to_y": 0}, "to_x"),
        (scroll, {"x": 0.5, "y": 0.5, "amount": 0}, "amount"),
        (key_press, {"key": "ctrl; rm -rf"}, "key"),
        (hotkey, {"keys": []}, "keys"),
    ],
)
def test_bad_arguments_are_action_errors_naming_the_parameter(
    desk_env: EpisodeEnv, act, arguments, param
) -> None:
    with pytest.raises(ActionParameterError, match=f"parameter '{param}'"):
        act.run(desk_env, **arguments)


def test_schema_tells_agents_the_range() -> None:
    schema = click.to_openai_tool()["function"]["parameters"]
    assert schema["properties"]["x"]["minimum"] == 0
    assert schema["properties"]["x"]["maximum"] == 1
    assert "env" not in schema["properties"]
    assert screenshot not in DESKTOP_ACTIONS


def test_unknown_key_is_an_action_error(desk_env: EpisodeEnv) -> None:
    with pytest.raises(ActionError, match="NoSuchKey"):
        key_press.run(desk_env, key="NoSuchKey")


def test_keyboard_reaches_the_focused_window(desk_env: EpisodeEnv) -> None:
    """Return activates an xmessage's default button: the window goes away."""
    launch_app.run(
        desk_env,
        command="xmessage -center -title kb-test -default okay hello",
        window_title="kb-test",
    )
    assert window_exists.run(desk_env, title="kb-test") is True
    mouse_move.run(desk_env, x=0.5, y=0.5)
    type_text.run(desk_env, text="abc")
    hotkey.run(desk_env, keys=["shift", "a"])
    key_press.run(desk_env, key="Return")
    assert window_exists.run(desk_env, title="kb-test") is False


def test_launch_app_that_shows_no_window_is_an_action_error(desk_env: EpisodeEnv) -> None:
    with pytest.raises(ActionError, match="did not appear"):
        launch_app.run(desk_env, command="true", window_title="never", timeout_sec=1)


def test_pointer_within(desk_env: EpisodeEnv) -> None:
    mouse_move.run(desk_env, x=0.95, y=0.95)
    assert pointer_within.run(desk_env, left=0.9, top=0.9, right=1, bottom=1) is True
    assert pointer_within.run(desk_env, left=0, top=0, right=0.5, bottom=0.5) is False


def test_screenshot_action_returns_png_bytes(desk_env: EpisodeEnv) -> None:
    png = screenshot.run(desk_env)
    assert isinstance(png, bytes) and png_size(png) == (WIDTH, HEIGHT)
    assert png_size(screenshot.run(desk_env, max_width=160)) == (160, 120)


def test_no_screen_is_a_clear_action_error(tmp_path) -> None:
    from crabray.backends.local import LocalBackend
    from crabray.core.env import AgentSignals
    from crabray.core.environment import EnvironmentConfig

    backend = LocalBackend(
        EnvironmentConfig(name="plain", backend_settings={"root_dir": str(tmp_path)})
    )
    backend.start()
    try:
        env = EpisodeEnv("plain", backend, AgentSignals())
        with pytest.raises(ActionError, match="no usable screen"):
            click.run(env, x=0.5, y=0.5)
    finally:
        backend.close()
