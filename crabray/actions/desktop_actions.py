"""CRAB's desktop actions under their CRAB names (``crab.actions.desktop_actions``).

Plain Python functions over ``pyautogui`` (and ``mss`` for the screenshot),
imported inside each function so that they resolve where the action runs:
inside the environment's sandbox (docs/guides/authoring.md, Actions).
``click``, ``right_click`` and ``double_click`` take a numeric label of a screen
element (set by a visual prompt in ``env.element_position_map``) and run the
matching ``*_position`` action in the environment, as in CRAB. crabray's own
desktop library (``crabray.actions.desktop``) drives the screen through the
backend interface instead.
"""

from __future__ import annotations

import string
import time
from enum import Enum
from typing import Any

from crabray.actions.crab_actions import VisualEnv, get_element_position
from crabray.core import action
from crabray.core.env import Env

DURATION = 0.8
"""Seconds a pointer movement takes."""
DELAY = 1.0
"""Seconds to let the desktop react after an input."""

_NAMED_KEYS = (
    ["alt", "shift", "ctrl", "win", "backspace", "enter", "esc", "tab", "space"]
    + [f"f{n}" for n in range(1, 13)]
    + ["left", "up", "right", "down", "home", "end", "pageup", "pagedown", "delete"]
)
_CHARACTERS = [c for c in string.printable if c not in string.ascii_uppercase + "\x0b\x0c"]


def _member_name(key: str) -> str:
    if key.isalnum():
        return f"KEY_{key.upper()}"
    return f"KEY_{ord(key):02X}"


KeyEnum = Enum(  # type: ignore[misc]
    "KeyEnum",
    {_member_name(k): k for k in [*_CHARACTERS, *_NAMED_KEYS]},
    type=str,
)
"""The keys ``key_press`` and ``press_hotkey`` accept: characters and named keys."""


def _value(key: Any) -> str:
    return str(key.value) if isinstance(key, Enum) else str(key)


def _take(env: Env, act: Any, arguments: dict[str, Any]) -> None:
    env.take_action(act, arguments)


@action
def click_position(x: int, y: int) -> None:
    """Click a point of the desktop screen.

    Args:
        x: The X coordinate, in pixels.
        y: The Y coordinate, in pixels.
    """
    import pyautogui

    pyautogui.click(x, y, duration=DURATION)
    time.sleep(DELAY)


@action(local=True)
def click(element: int, env: VisualEnv) -> None:
    """Click a UI element shown on the screen; e.g. element 5 is the one labelled 5.

    Args:
        element: The numeric label of a UI element on the screenshot.
        env: The environment, injected at run time.
    """
    x, y = get_element_position(element, env)
    _take(env, click_position, {"x": x, "y": y})


@action
def right_click_position(x: int, y: int) -> None:
    """Right-click a point of the desktop screen.

    Args:
        x: The X coordinate, in pixels.
        y: The Y coordinate, in pixels.
    """
    import pyautogui

    pyautogui.click(x, y, duration=DURATION, button="right")


@action(local=True)
def right_click(element: int, env: VisualEnv) -> None:
    """Right-click a UI element shown on the screen, usually to open its menu.

    Args:
        element: The numeric label of a UI element on the screenshot.
        env: The environment, injected at run time.
    """
    x, y = get_element_position(element, env)
    _take(env, right_click_position, {"x": x, "y": y})
    time.sleep(DELAY)


@action
def double_click_position(x: int, y: int) -> None:
    """Double-click a point of the desktop screen.

    Args:
        x: The X coordinate, in pixels.
        y: The Y coordinate, in pixels.
    """
    import pyautogui

    pyautogui.click(x, y, duration=DURATION, clicks=2, interval=0.2)


@action(local=True)
def double_click(element: int, env: VisualEnv) -> None:
    """Double-click a UI element shown on the screen, usually to open a folder or a file.

    Args:
        element: The numeric label of a UI element on the screenshot.
        env: The environment, injected at run time.
    """
    x, y = get_element_position(element, env)
    _take(env, double_click_position, {"x": x, "y": y})
    time.sleep(DELAY)


@action
def mouse_scroll(click: int = 1) -> None:
    """Turn the mouse wheel.

    Args:
        click: How far to scroll; negative scrolls down.
    """
    import pyautogui

    pyautogui.scroll(click)
    time.sleep(DELAY)


@action
def key_press(key: KeyEnum) -> None:
    """Press a keyboard key and release it.

    Args:
        key: The key to press.
    """
    import pyautogui

    pyautogui.press(_value(key))
    time.sleep(DELAY)


@action
def press_hotkey(keys: list[KeyEnum]) -> None:
    """Press several keys together; e.g. keys ["ctrl", "c"] copy the selection.

    Args:
        keys: The keys, in the order they go down.
    """
    import pyautogui

    pyautogui.hotkey(*[_value(k) for k in keys])
    time.sleep(DELAY)


@action
def write_text(text: str) -> None:
    """Type the text. It does not move the pointer: focus the input field first.

    Args:
        text: The text to type.
    """
    import pyautogui

    pyautogui.write(text, interval=0.03)
    time.sleep(DELAY)


@action
def search_application(name: str) -> None:
    """Search for an application by name (e.g. "slack") in the desktop's launcher.

    Args:
        name: The application's name.
    """
    import pyautogui

    pyautogui.press("esc")
    time.sleep(DELAY)
    pyautogui.hotkey("win", "a")
    time.sleep(DELAY)
    pyautogui.write(name)
    time.sleep(DELAY)


@action
def screenshot() -> bytes:
    """Get the current screenshot.

    Returns PNG bytes, which an episode shows the agent as an image observation
    (CRAB returned the same PNG base64-encoded, as text).
    """
    from mss import mss, tools

    with mss() as grabber:
        shot = grabber.grab(grabber.monitors[1])
        png: bytes = tools.to_png(shot.rgb, shot.size)
    return png


__all__ = [
    "DELAY",
    "DURATION",
    "KeyEnum",
    "click",
    "click_position",
    "double_click",
    "double_click_position",
    "key_press",
    "mouse_scroll",
    "press_hotkey",
    "right_click",
    "right_click_position",
    "screenshot",
    "search_application",
    "write_text",
]
