"""The desktop demo suite end to end: CLI, local Ray, the oracle, screenshots on disk."""

from __future__ import annotations

from pathlib import Path

import pytest

from crabray.core.images import png_size
from crabray.results import read_episodes, read_steps
from tests.conftest import ROOT, crabray
from tests.desktop.conftest import require_screen_tools

pytestmark = [pytest.mark.ray, pytest.mark.slow]


def test_oracle_solves_the_desktop_demo_with_screenshots(tmp_path: Path) -> None:
    require_screen_tools()
    out = tmp_path / "out"
    done = crabray(
        "run", str(ROOT / "tasks" / "desktop_demo"), "--agent", "oracle", "--out", str(out)
    )
    assert done.returncode == 0, done.stdout + done.stderr
    episodes = read_episodes(out)
    assert len(episodes) == 3
    assert episodes.success.all(), episodes[["task_id", "termination_reason"]]
    steps = read_steps(out)
    assert len(steps) >= 3
    for relative in steps.screenshot_path:
        assert relative, "every step records the screenshot the agent saw"
        png = (out / relative).read_bytes()
        assert png_size(png) == (1024, 768), "the suite's screen size, not downscaled"
    assert steps.observation.str.contains(r"\[desktop/screenshot\] \[image: screenshot\]").all()
