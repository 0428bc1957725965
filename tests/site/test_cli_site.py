"""``crabray leaderboard OUT --html SITE`` after a real run, and ``crabray view``'s errors."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from crabray.results import read_episodes
from tests.conftest import crabray
from tests.site.conftest import write_dataset


@pytest.mark.ray
@pytest.mark.slow
def test_leaderboard_html_after_a_real_run(tmp_path: Path) -> None:
    out = tmp_path / "out"
    ran = crabray(
        "run", "tasks/demo", "--agent", "oracle", "--agent", "noop", "--out", str(out), check=True
    )
    # The run's log: what -v would have printed at info level, kept beside its manifest.
    (run_id,) = {path.stem for path in (out / "runs").glob("*.json")}
    log = (out / "runs" / f"{run_id}.log").read_text()
    assert f"run {run_id}: 22 episodes, 22 to run" in log
    assert "22 episodes, 22 to run" not in ran.stderr, "without -v the terminal stays quiet"
    site = tmp_path / "site"
    done = crabray("leaderboard", str(out), "--format", "md", "--html", str(site), check=True)
    assert done.stdout.startswith("### leaderboard · suite demo")  # tables go to stdout, alone
    assert "| agent" in done.stdout
    assert "site written" in done.stderr
    episodes = read_episodes(out)
    pages = {path.stem for path in (site / "episodes").glob("*.html")}
    assert pages == set(episodes["episode_id"]) and len(pages) == 22
    index = (site / "index.html").read_text(encoding="utf-8")
    listing = index.split('id="episodes-section"', 1)[1]
    assert len(re.findall(r'href="episodes/[0-9a-f]+\.html"', listing)) == 22
    # The suite's name is the title; the matrix has a row per task, a column per agent.
    assert "<title>demo</title>" in index
    assert '<p id="description">Small terminal and file tasks on the local backend' in index
    matrix = index.split('<table id="matrix">', 1)[1].split("</table>", 1)[0]
    assert matrix.count('<th scope="row">') == 11 and matrix.count('class="matrix-cell"') == 22
    oracle = episodes[episodes.agent == "oracle"].iloc[0]
    page = (site / "episodes" / f"{oracle.episode_id}.html").read_text(encoding="utf-8")
    assert f"<h1>{oracle.task_id}</h1>" in page
    assert page.count('<section class="step"') == int(oracle.steps)
    assert 'data-passed="true"' in page  # the oracle passed its evaluators
    run_page = (site / f"run-{run_id}.html").read_text(encoding="utf-8")
    assert f'<a href="logs/{run_id}.log">' in run_page
    assert (site / "logs" / f"{run_id}.log").read_text() == log


def test_view_refuses_a_missing_directory(tmp_path: Path) -> None:
    done = crabray("view", str(tmp_path / "missing"), "--port", "0")
    assert done.returncode == 2
    assert "(it does not exist)" in done.stderr and "crabray run" in done.stderr


def test_leaderboard_html_refuses_the_results_directory(tmp_path: Path) -> None:
    dataset = write_dataset(tmp_path / "out")
    done = crabray("leaderboard", str(dataset.out), "--html", str(dataset.out))
    assert done.returncode == 2
    assert "cannot be written into the results directory" in done.stderr
    ok = crabray("leaderboard", str(dataset.out), "--html", str(tmp_path / "site"), check=True)
    assert "graph-task" not in ok.stdout  # the terminal table is per agent, not per episode
    assert (tmp_path / "site" / "index.html").is_file()
