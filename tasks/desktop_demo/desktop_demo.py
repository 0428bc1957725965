"""The desktop demo suite: mouse and keyboard tasks on a private X screen.

Each task runs in a local sandbox with its own Xvfb server
(``backend_settings={"display": True}``); the agent acts with the desktop
actions (coordinates are fractions of the screen) and sees a screenshot after
every step. Evaluators read the X server's state with ``xdotool``. Every task
carries a reference solution, so ``crabray run tasks/desktop_demo --agent
oracle`` succeeds on all of them, and none is passed by doing nothing
(``--agent noop`` fails every one).

Needs on the host: ``apt-get install xvfb xdotool x11-apps x11-utils`` (xev,
which records the clicks, is in x11-utils).
"""

from __future__ import annotations

from crabray import BenchmarkConfig, EnvironmentConfig, Task
from crabray.actions import (
    DESKTOP_ACTIONS,
    click,
    file_contains,
    key_press,
    launch_app,
    mouse_move,
    pointer_within,
    screenshot,
    window_exists,
)

DESKTOP = EnvironmentConfig(
    name="desktop",
    description="A 1024x768 X screen with no window manager; windows take keyboard focus "
    "from the mouse pointer.",
    backend="local",
    backend_settings={"display": "1024x768x24"},
    action_space=[*DESKTOP_ACTIONS],
    observation_space=[screenshot],
)

NOTICE = "crabray-notice"
CLICK_RECORDER = "crabray-click-recorder"
CLICKS_FILE = "clicks.txt"

TASKS = [
    Task(
        id="pointer-to-corner",
        description="Move the mouse pointer into the bottom-right corner of the screen "
        "(the last tenth of its width and of its height).",
        evaluator=pointer_within(left=0.9, top=0.9, right=1.0, bottom=1.0),
        solution=[mouse_move(x=0.95, y=0.95)],
        tags=["desktop", "mouse", "easy"],
    ),
    Task(
        id="click-centre",
        description="Click once in the middle of the screen.",
        # The pointer starts in the middle, so where it is proves nothing: a full-screen
        # window of xev records the button presses, and the task needs one.
        setup=[
            launch_app(
                command=f"xev -name {CLICK_RECORDER} -geometry 1024x768+0+0 -event button "
                f"> {CLICKS_FILE}",
                window_title=CLICK_RECORDER,
            )
        ],
        evaluator=pointer_within(left=0.45, top=0.45, right=0.55, bottom=0.55)
        & file_contains(path=CLICKS_FILE, text="ButtonPress"),
        solution=[click(x=0.5, y=0.5)],
        tags=["desktop", "mouse", "easy"],
    ),
    Task(
        id="dismiss-message",
        description="A message window is open in the middle of the screen. Dismiss it: its "
        "'okay' button is the default, activated by the Return key while the window has "
        "the keyboard focus.",
        setup=[
            launch_app(
                command=f"xmessage -center -title {NOTICE} -default okay 'Please dismiss me'",
                window_title=NOTICE,
            )
        ],
        evaluator=~window_exists(title=NOTICE),
        solution=[mouse_move(x=0.5, y=0.5), key_press(key="Return")],
        tags=["desktop", "keyboard", "window"],
    ),
]

desktop_demo = BenchmarkConfig(
    name="desktop_demo",
    tasks=TASKS,
    environments=[DESKTOP],
    default_env="desktop",
    step_limit=10,
)
