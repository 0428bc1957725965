"""CRAB's action libraries under crabray: names, agent-facing signatures, behaviour off-screen.

The desktop actions need a screen and pyautogui where they run (a desktop sandbox);
here they are checked as far as that is possible without one: their schemas, the
keys they accept, and the element-to-position step of ``click``. The system
actions run on this host.
"""

from __future__ import annotations

from typing import Any

import pytest

from crabray.actions.crab_actions import get_element_position
from crabray.actions.desktop_actions import (
    KeyEnum,
    click,
    click_position,
    double_click,
    double_click_position,
    key_press,
    mouse_scroll,
    press_hotkey,
    right_click,
    right_click_position,
    screenshot,
    search_application,
    write_text,
)
from crabray.actions.system_actions import delay, run_bash_command
from crabray.core import Action, Environment


@pytest.mark.parametrize(
    ("act", "parameters", "required"),
    [
        (click, {"element"}, ["element"]),
        (right_click, {"element"}, ["element"]),
        (double_click, {"element"}, ["element"]),
        (click_position, {"x", "y"}, ["x", "y"]),
        (right_click_position, {"x", "y"}, ["x", "y"]),
        (double_click_position, {"x", "y"}, ["x", "y"]),
        (mouse_scroll, {"click"}, []),
        (key_press, {"key"}, ["key"]),
        (press_hotkey, {"keys"}, ["keys"]),
        (write_text, {"text"}, ["text"]),
        (search_application, {"name"}, ["name"]),
        (screenshot, set(), []),
        (delay, {"time"}, ["time"]),
        (run_bash_command, {"command"}, ["command"]),
    ],
)
def test_crab_names_and_agent_facing_parameters(
    act: Action, parameters: set[str], required: list[str]
) -> None:
    schema = act.to_openai_json_schema()
    assert set(schema["parameters"]["properties"]) == parameters
    assert schema["parameters"].get("required", []) == required
    assert schema["description"]


def test_element_actions_run_in_the_episode_with_env() -> None:
    for act in (click, right_click, double_click):
        assert act.local
        assert act.kept_params == ("env",)
    for act in (click_position, key_press, write_text, screenshot):
        assert not act.local
        assert act.kept_params == ()


def test_screenshot_returns_png_bytes_an_episode_shows_as_an_image() -> None:
    assert screenshot.returns.model_fields["returns"].annotation is bytes


def test_keys_validate_as_the_agent_sends_them() -> None:
    parsed = press_hotkey.validate_arguments({"keys": ["ctrl", "c"]})
    assert [k.value for k in parsed["keys"]] == ["ctrl", "c"]
    assert key_press.validate_arguments({"key": "enter"})["key"] is KeyEnum("enter")
    assert KeyEnum("\t").value == "\t"
    with pytest.raises(Exception, match="key"):
        key_press.validate_arguments({"key": "no-such-key"})


class _Screen(Environment):
    """An in-process environment that keeps the position actions it is asked to run."""

    def __init__(self) -> None:
        super().__init__(name="desk", action_space=[], observation_space=[])
        self.element_position_map = {5: (10, 20, 30, 41)}
        self.taken: list[tuple[str, dict[str, Any]]] = []

    def take_action(self, action: Action, parameters: dict[str, Any] | None = None) -> Any:
        self.taken.append((action.name, dict(parameters or {})))


def test_click_turns_an_element_label_into_the_position_action() -> None:
    screen = _Screen()
    assert get_element_position(5, screen) == (20, 30)
    click.run(screen, element=5)
    assert screen.taken == [("click_position", {"x": 20, "y": 30})]
    with pytest.raises(KeyError):
        click.run(screen, element=6)


def test_run_bash_command_reports_stdout_and_stderr() -> None:
    out = run_bash_command.run(None, command="echo out; echo err >&2")
    assert out == 'stdout: "out\n"\nstderr: "err\n"'


def test_delay_accepts_seconds() -> None:
    assert delay.run(None, time=0) is None
