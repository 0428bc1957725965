"""A host that lacks what its sandboxes need is the infrastructure's fault, never the agent's.

An image typo and an unreachable engine are refused by the preflight before any
episode (exit 2, tests/preflight); a host error an episode meets later stops the
run, and its rows are attributed to the infrastructure: counted apart by the
leaderboard and shown by the site as not the agent's, never as a red 0.00.
"""

from __future__ import annotations

import html
import json
from pathlib import Path

import pytest

from crabray.results import read_episodes
from tests.conftest import crabray
from tests.preflight.suites import host_error_suite

pytestmark = [pytest.mark.ray, pytest.mark.slow]


def test_a_host_error_is_infrastructure_in_the_rows_the_board_and_the_site(
    tmp_path: Path,
) -> None:
    suite = host_error_suite(tmp_path / "suite", tasks=2)
    out = tmp_path / "out"
    done = crabray("run", str(suite), "--agent", "oracle", "--concurrency", "1", "--out", str(out))
    assert done.returncode == 2, f"{done.stdout}\n{done.stderr}"
    assert "apt-get install frob" in done.stderr
    episodes = read_episodes(out)
    assert len(episodes) >= 1
    assert set(episodes.error_type) == {"SandboxHostError"}
    assert set(episodes.attribution) == {"infrastructure"}
    assert not episodes.success.any()

    board = crabray("leaderboard", str(out), "--format", "json", check=True)
    (entry,) = json.loads(board.stdout)
    assert entry["episodes"] == 0, "nothing of it is in the agent's denominator"
    assert entry["infra_errors"] == len(episodes)
    assert entry["benchmark_errors"] == 0

    site = tmp_path / "site"
    crabray("leaderboard", str(out), "--html", str(site), check=True)
    index = (site / "index.html").read_text(encoding="utf-8")
    assert ">infra error</a>" in index
    assert ">0.00</a>" not in index, "never an agent's red 0.00"
    row = episodes.iloc[0]
    page = (site / "episodes" / f"{row['episode_id']}.html").read_text(encoding="utf-8")
    verdict = "infrastructure error, not the agent's (not scored); ended by setup_error"
    assert verdict in html.unescape(page)
