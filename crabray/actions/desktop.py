"""Desktop actions: mouse, keyboard and screenshots on the sandbox's X screen.

Written only against the backend interface: input goes through
``env.exec`` running ``xdotool`` inside the sandbox (which must have a screen
and ``DISPLAY`` set, e.g. the local backend with ``display: true``), and
pictures come from ``env.screenshot()``. Coordinates are fractions of the
screen, ``x`` from the left and ``y`` from the top edge, each in ``[0, 1]``, so
a task and an agent do not depend on the screen's size (or on the size of a
downscaled screenshot); a value outside that range is an action error naming
the parameter.

Use ``DESKTOP_ACTIONS`` as an action space and ``screenshot`` as an
observation (it returns PNG bytes, which the episode keeps as a file):

    EnvironmentConfig(name="desktop", backend_settings={"display": True},
                      action_space=[*DESKTOP_ACTIONS], observation_space=[screenshot])
"""

from __future__ import annotations

import contextlib
import logging
import shlex
import weakref
from typing import Annotated, Any, Literal

from pydantic import Field

from crabray.actions.limits import TimeoutSec
from crabray.core import action, evaluator
from crabray.core.env import Env
from crabray.core.errors import ActionError
from crabray.core.images import downscale_png

logger = logging.getLogger(__name__)

Fraction = Annotated[float, Field(ge=0.0, le=1.0)]
"""A position along one side of the screen: 0 is the left/top edge, 1 the right/bottom."""

KeyName = Annotated[str, Field(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9_]+$")]
"""An X key name: ``Return``, ``Escape``, ``Tab``, ``a``, ``F5``, ``ctrl``, ``shift``, ..."""

XDOTOOL_TIMEOUT_SEC = 30.0
"""Longest any one xdotool command may run (typing long text included)."""

_TYPE_DELAY_MS = 12
_SCROLL_BUTTONS = {"up": "4", "down": "5", "left": "6", "right": "7"}
_BUTTONS = {"left": "1", "middle": "2", "right": "3"}

_screens: weakref.WeakKeyDictionary[Any, tuple[int, int]] = weakref.WeakKeyDictionary()
"""Screen size per environment object, read once with ``xdotool getdisplaygeometry``."""


def _xdotool(env: Env, *args: str) -> str:
    result = env.exec(["xdotool", *args], timeout_sec=XDOTOOL_TIMEOUT_SEC)
    if not result.ok:
        why = "timed out" if result.timed_out else f"exit code {result.exit_code}"
        detail = (result.stderr or result.stdout).strip()
        if result.exit_code == 127:
            detail = "xdotool is not installed in the sandbox (apt-get install xdotool)"
        raise ActionError(f"xdotool {args[0]} failed ({why}): {detail}")
    unknown = [line for line in result.stderr.splitlines() if "No such key name" in line]
    if unknown:  # xdotool skips an unknown key and still exits 0
        raise ActionError(f"unknown key name: {unknown[0].strip()}")
    stdout: str = result.stdout
    return stdout


def screen_size(env: Env) -> tuple[int, int]:
    """The sandbox screen's width and height in pixels (asked once per environment).

    Raises:
        ActionError: The sandbox has no screen (no ``DISPLAY``) or no xdotool.
    """
    try:
        return _screens[env]
    except (KeyError, TypeError):
        pass
    try:
        out = _xdotool(env, "getdisplaygeometry")
    except ActionError as exc:
        raise ActionError(
            f"this environment has no usable screen (for the local backend set "
            f"backend_settings.display: true): {exc}"
        ) from exc
    try:
        width, height = (int(part) for part in out.split())
    except ValueError as exc:
        raise ActionError(f"xdotool getdisplaygeometry gave {out!r}, not 'WIDTH HEIGHT'") from exc
    with contextlib.suppress(TypeError):  # not weakly referable: ask again next time
        _screens[env] = (width, height)
    return width, height


def to_pixels(env: Env, x: float, y: float) -> tuple[int, int]:
    """The pixel at fractions ``(x, y)`` of the screen: ``fraction * size``, kept on screen."""
    width, height = screen_size(env)
    return min(int(x * width), width - 1), min(int(y * height), height - 1)


def _point(env: Env, x: float, y: float) -> tuple[str, str, str]:
    px, py = to_pixels(env, x, y)
    return str(px), str(py), f"({px}, {py})"


def _click_at(env: Env, x: float, y: float, button: str, repeat: int = 1) -> str:
    """Move to fractions ``(x, y)``, click X ``button`` ``repeat`` times; the pixel clicked."""
    px, py, at = _point(env, x, y)
    times = ("--repeat", str(repeat)) if repeat > 1 else ()
    _xdotool(env, "mousemove", "--sync", px, py, "click", *times, button)
    return at


@action
def mouse_move(x: Fraction, y: Fraction, env: Env) -> str:
    """Move the mouse pointer without clicking.

    Args:
        x: Horizontal position as a fraction of the screen width (0 = left edge, 1 = right).
        y: Vertical position as a fraction of the screen height (0 = top edge, 1 = bottom).
        env: The sandbox the action runs in, injected at run time (not part of the schema).
    """
    px, py, at = _point(env, x, y)
    _xdotool(env, "mousemove", "--sync", px, py)
    return f"moved the pointer to {at}"


@action
def click(x: Fraction, y: Fraction, env: Env) -> str:
    """Left-click at a point of the screen.

    Args:
        x: Horizontal position as a fraction of the screen width (0 = left edge, 1 = right).
        y: Vertical position as a fraction of the screen height (0 = top edge, 1 = bottom).
        env: The sandbox the action runs in, injected at run time (not part of the schema).
    """
    return f"clicked at {_click_at(env, x, y, _BUTTONS['left'])}"


@action
def double_click(x: Fraction, y: Fraction, env: Env) -> str:
    """Double-click with the left button at a point of the screen.

    Args:
        x: Horizontal position as a fraction of the screen width (0 = left edge, 1 = right).
        y: Vertical position as a fraction of the screen height (0 = top edge, 1 = bottom).
        env: The sandbox the action runs in, injected at run time (not part of the schema).
    """
    return f"double-clicked at {_click_at(env, x, y, _BUTTONS['left'], repeat=2)}"


@action
def right_click(x: Fraction, y: Fraction, env: Env) -> str:
    """Right-click at a point of the screen (usually opens a context menu).

    Args:
        x: Horizontal position as a fraction of the screen width (0 = left edge, 1 = right).
        y: Vertical position as a fraction of the screen height (0 = top edge, 1 = bottom).
        env: The sandbox the action runs in, injected at run time (not part of the schema).
    """
    return f"right-clicked at {_click_at(env, x, y, _BUTTONS['right'])}"


@action
def drag(from_x: Fraction, from_y: Fraction, to_x: Fraction, to_y: Fraction, env: Env) -> str:
    """Press the left button at one point, move to another with it held, release there.

    Args:
        from_x: Start, as a fraction of the screen width.
        from_y: Start, as a fraction of the screen height.
        to_x: End, as a fraction of the screen width.
        to_y: End, as a fraction of the screen height.
        env: The sandbox the action runs in, injected at run time (not part of the schema).
    """
    x1, y1, start = _point(env, from_x, from_y)
    x2, y2, end = _point(env, to_x, to_y)
    _xdotool(
        env,
        *("mousemove", "--sync", x1, y1, "mousedown", _BUTTONS["left"], "sleep", "0.1"),
        *("mousemove", "--sync", x2, y2, "sleep", "0.1", "mouseup", _BUTTONS["left"]),
    )
    return f"dragged from {start} to {end}"


@action
def scroll(
    x: Fraction,
    y: Fraction,
    env: Env,
    direction: Literal["up", "down", "left", "right"] = "down",
    amount: Annotated[int, Field(ge=1, le=50)] = 3,
) -> str:
    """Scroll the mouse wheel over a point of the screen.

    Args:
        x: Horizontal position as a fraction of the screen width.
        y: Vertical position as a fraction of the screen height.
        direction: Which way to scroll.
        amount: How many wheel steps (1 to 50).
        env: The sandbox the action runs in, injected at run time (not part of the schema).
    """
    at = _click_at(env, x, y, _SCROLL_BUTTONS[direction], repeat=amount)
    return f"scrolled {direction} {amount} steps at {at}"


@action
def type_text(text: Annotated[str, Field(min_length=1, max_length=10_000)], env: Env) -> str:
    """Type text with the keyboard into the focused window, as a person would.

    Args:
        text: The characters to type; a newline presses Return.
        env: The sandbox the action runs in, injected at run time (not part of the schema).
    """
    _xdotool(env, "type", "--delay", str(_TYPE_DELAY_MS), "--", text)
    return f"typed {len(text)} characters"


@action
def key_press(key: KeyName, env: Env) -> str:
    """Press and release one key.

    Args:
        key: An X key name, e.g. Return, Escape, Tab, BackSpace, Delete, Up, Down, Left,
            Right, Home, End, Page_Up, Page_Down, F1..F12, space, a, Z, 5.
        env: The sandbox the action runs in, injected at run time (not part of the schema).
    """
    _xdotool(env, "key", "--", key)
    return f"pressed {key}"


@action
def hotkey(keys: Annotated[list[KeyName], Field(min_length=1, max_length=6)], env: Env) -> str:
    """Press keys together, e.g. ["ctrl", "c"] to copy or ["alt", "F4"] to close a window.

    Args:
        keys: Key names held down in order and released together: modifiers (ctrl, alt,
            shift, super) first, then the key.
        env: The sandbox the action runs in, injected at run time (not part of the schema).
    """
    combo = "+".join(keys)
    _xdotool(env, "key", "--", combo)
    return f"pressed {combo}"


@action
def screenshot(env: Env, max_width: Annotated[int, Field(ge=16)] | None = None) -> bytes:
    """A PNG picture of the whole screen.

    Use it as an observation: the episode keeps each picture as a file and
    shows it to agents that read images. Bind ``max_width`` (e.g.
    ``screenshot(max_width=1024)``) to hand agents a smaller copy.

    Args:
        max_width: Downscale the picture to at most this many pixels wide (aspect kept).
        env: The sandbox the action runs in, injected at run time (not part of the schema).
    """
    png: bytes = env.screenshot()
    if max_width is not None:
        png = downscale_png(png, max_width)
    return png


@action
def launch_app(
    command: str,
    env: Env,
    window_title: str | None = None,
    timeout_sec: TimeoutSec = 20.0,
) -> str:
    """Start a graphical program in the background, and wait for its window when named.

    Args:
        command: The command line, run by `sh -c` in the sandbox's working directory.
        window_title: A regular expression matching the title of the window to wait for.
        timeout_sec: Seconds to wait for the window before giving up; at most 300.
        env: The sandbox the action runs in, injected at run time (not part of the schema).
    """
    started = f"({command}) </dev/null >/dev/null 2>&1 &"
    if window_title is None:
        result = env.exec(started, timeout_sec=timeout_sec)
    else:
        title = shlex.quote(window_title)
        result = env.exec(
            f"{started} xdotool search --sync --name {title} >/dev/null", timeout_sec=timeout_sec
        )
    if not result.ok:
        what = f"window '{window_title}'" if window_title else "program"
        why = f"no window after {timeout_sec:g} s" if result.timed_out else result.stderr.strip()
        raise ActionError(f"launching {command!r}: the {what} did not appear: {why}")
    return f"started {command!r}" + (f"; window '{window_title}' is open" if window_title else "")


@evaluator
def pointer_within(
    left: Fraction, top: Fraction, right: Fraction, bottom: Fraction, env: Env
) -> bool:
    """The mouse pointer is inside a rectangle of the screen (edges included).

    Args:
        left: Left edge, as a fraction of the screen width.
        top: Top edge, as a fraction of the screen height.
        right: Right edge, as a fraction of the screen width.
        bottom: Bottom edge, as a fraction of the screen height.
        env: The sandbox the action runs in, injected at run time (not part of the schema).
    """
    out = _xdotool(env, "getmouselocation", "--shell")
    where = dict(line.split("=", 1) for line in out.splitlines() if "=" in line)
    x0, y0 = to_pixels(env, left, top)
    x1, y1 = to_pixels(env, right, bottom)
    return x0 <= int(where["X"]) <= x1 and y0 <= int(where["Y"]) <= y1


@evaluator
def window_exists(title: str, env: Env) -> bool:
    """A window whose title matches the regular expression is open on the screen.

    Args:
        title: A regular expression matched against window titles.
        env: The sandbox the action runs in, injected at run time (not part of the schema).
    """
    result = env.exec(["xdotool", "search", "--name", title], timeout_sec=XDOTOOL_TIMEOUT_SEC)
    if result.exit_code not in (0, 1) or result.timed_out:
        raise ActionError(f"xdotool search failed: {(result.stderr or result.stdout).strip()}")
    return bool(result.stdout.strip())


DESKTOP_ACTIONS = (
    click,
    double_click,
    right_click,
    mouse_move,
    drag,
    scroll,
    type_text,
    key_press,
    hotkey,
)
"""What an agent does on a desktop; ``screenshot`` is left out: it is an observation."""

DESKTOP_OBSERVATIONS = (screenshot,)
"""What an agent sees of a desktop after every step."""
