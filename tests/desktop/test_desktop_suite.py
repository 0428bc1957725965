"""The desktop demo suite end to end: CLI, local Ray, the oracle, screenshots on disk."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from crabray.core.images import png_size
from crabray.results import read_episodes, read_steps
from tests.conftest import ROOT, crabray
from tests.desktop.conftest import require_screen_tools

pytestmark = [pytest.mark.ray, pytest.mark.slow]


def require_suite_programs() -> None:
    """The programs the suite's tasks start besides the screen: xmessage and xev."""
    missing = [tool for tool in ("xmessage", "xev") if shutil.which(tool) is None]
    if missing:
        message = f"{', '.join(missing)} missing; install with: apt-get install x11-apps x11-utils"
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)


def test_oracle_solves_the_desktop_demo_and_noop_solves_nothing(tmp_path: Path) -> None:
    require_screen_tools()
    require_suite_programs()
    out = tmp_path / "out"
    suite = str(ROOT / "tasks" / "desktop_demo")
    done = crabray("run", suite, "--agent", "oracle", "--agent", "noop", "--out", str(out))
    assert done.returncode == 0, done.stdout + done.stderr
    everything = read_episodes(out)
    noop = everything[everything.agent == "noop"]
    assert len(noop) == 3 and not noop.success.any(), "no task is passed by doing nothing"
    episodes = everything[everything.agent == "oracle"]
    assert len(episodes) == 3
    assert episodes.success.all(), episodes[["task_id", "termination_reason"]]
    steps = read_steps(out)
    steps = steps[steps.agent == "oracle"]
    assert len(steps) >= 3
    for relative in steps.screenshot_path:
        assert relative, "every step records the screenshot the agent saw"
        png = (out / relative).read_bytes()
        assert png_size(png) == (1024, 768), "the suite's screen size, not downscaled"
    assert steps.observation.str.contains(r"\[desktop/screenshot\] \[image: screenshot\]").all()
