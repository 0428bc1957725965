"""CRAB's own environments, for a dataset that brings no ``BenchmarkConfig``.

crab-benchmark-v0 defines its environments in its ``main.py`` and
``ubuntu_env.py`` / ``android_env.py``, outside the ``dataset/`` folder users
point crabray at. So an environment name its subtasks give resolves here:
``ubuntu`` is CRAB's Ubuntu desktop, on the crab-desktop image (docker
backend), with CRAB's Ubuntu action space; ``android`` needs an ADB device,
which crabray has no backend for, so the tasks using it are unsupported. Any
other name is a local sandbox with the shell and file actions.
"""

from __future__ import annotations

from crabray.actions import FILE_ACTIONS, SHELL_ACTIONS
from crabray.actions.crab_actions import complete, wait
from crabray.actions.desktop_actions import (
    click,
    double_click,
    key_press,
    press_hotkey,
    right_click,
    screenshot,
    search_application,
    write_text,
)
from crabray.core import Action, EnvironmentConfig

ANDROID_REASON = (
    "uses CRAB's 'android' environment (an Android device over ADB, "
    "crab.actions.android_actions), which crabray has no backend for"
)
UNSUPPORTED_ENVIRONMENTS = {"android": ANDROID_REASON}
"""Environment names of CRAB's that crabray cannot provide, with the reason."""

ROOT_ACTIONS: list[Action] = [complete, wait]
"""CRAB's root action space in crab-benchmark-v0's ``main.py``."""


def crab_ubuntu() -> EnvironmentConfig:
    """CRAB's ``UBUNTU_ENV`` (its action and observation spaces) on crabray's crab-desktop."""
    return EnvironmentConfig(
        name="ubuntu",
        backend="docker",
        backend_settings={"build": "crab-desktop", "memory_mb": 2048},
        action_space=[
            click,
            key_press,
            write_text,
            press_hotkey,
            search_application,
            right_click,
            double_click,
        ],
        observation_space=[screenshot],
        description="A Linux desktop (crabray's crab-desktop image, standing in for CRAB's "
        "Ubuntu 22.04). Interact with mouse and keyboard; open applications by searching "
        "for them (Super+A).",
    )


def local(name: str) -> EnvironmentConfig:
    return EnvironmentConfig(
        name=name,
        backend="local",
        description="A Linux machine (crabray's local sandbox).",
        action_space=[*SHELL_ACTIONS, *FILE_ACTIONS],
    )


def environment(name: str) -> EnvironmentConfig:
    """The environment a dataset without a ``BenchmarkConfig`` gets for ``name``."""
    return crab_ubuntu() if name == "ubuntu" else local(name)
