"""The dataset's environment: CRAB's Ubuntu desktop as crabray/crab-desktop on docker.

The action space is CRAB's Ubuntu one (``crabray.actions.desktop_actions``,
unchanged) plus the waits a scripted solution needs to keep in step with
programs that start slowly on a loaded host.
"""

from crabray import BenchmarkConfig, EnvironmentConfig
from crabray.actions.desktop_actions import (
    key_press,
    press_hotkey,
    screenshot,
    search_application,
    write_text,
)

from .ubuntu_actions import wait_for_exit, wait_for_file, wait_for_window

UBUNTU_ENV = EnvironmentConfig(
    name="ubuntu",
    backend="docker",
    backend_settings={
        "build": "crab-desktop",
        "memory_mb": 2048,
        "env": {"CRABRAY_SCREEN": "1024x768x24"},
    },
    action_space=[
        key_press,
        write_text,
        press_hotkey,
        search_application,
        wait_for_window,
        wait_for_file,
        wait_for_exit,
    ],
    observation_space=[screenshot],
    description="A Debian desktop standing in for CRAB's Ubuntu 22.04: Super+A searches "
    "applications (xterm, vim, lowriter, localc, gimp).",
)

benchmark = BenchmarkConfig(
    name="crab_ubuntu",
    tasks=[],
    environments=[UBUNTU_ENV],
    step_limit=20,
    time_limit_sec=900,
)
