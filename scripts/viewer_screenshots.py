"""Screenshots of the viewer for docs/viewer.md, taken with the system Chromium, headless.

Runs the demo suite with the oracle and noop agents into a scratch results
folder (or reads ``--out``), builds the static site, and photographs the episode
list filtered to one agent and a failed episode's page (evaluator nodes in full,
setup output open). Needs chromium (``apt-get install chromium``) and Playwright
(``pip install -e '.[dev]'``); Playwright's own browser download is not used.

Usage::

    .venv/bin/python scripts/viewer_screenshots.py              # writes docs/images/viewer-*.png
    .venv/bin/python scripts/viewer_screenshots.py --out results --dest /tmp/shots
"""

from __future__ import annotations

import argparse
import logging
import subprocess
import sys
import tempfile
from pathlib import Path

from crabray.results import read_episodes
from crabray.results.site import build_site
from crabray.results.site._pages import episode_page_name

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run"]
VIEWPORT = {"width": 1280, "height": 760}

logger = logging.getLogger("viewer_screenshots")


def run_demo(out: Path) -> None:
    """The demo suite with the oracle (solves all) and noop (solves none) agents."""
    for agent in ("oracle", "noop"):
        subprocess.run(
            [sys.executable, "-m", "crabray", "run", "tasks/demo", "--agent", agent, "--out", out],
            cwd=ROOT,
            check=True,
            stdout=subprocess.DEVNULL,
        )


def failed_episode(out: Path) -> str:
    """A noop episode with the largest evaluator graph: its page shows the most."""
    episodes = read_episodes(out)
    failed = episodes[(episodes["agent"] == "noop") & ~episodes["success"].astype(bool)]
    if failed.empty:
        raise SystemExit(f"{out} has no failed noop episode to photograph")
    widest = failed["graph_json"].str.len().idxmax()
    return str(failed.loc[widest, "episode_id"])


def photograph(site: Path, episode_id: str, dest: Path) -> list[Path]:
    """The episode list filtered to noop, and one of its episodes, as PNG files in ``dest``."""
    from playwright.sync_api import sync_playwright

    dest.mkdir(parents=True, exist_ok=True)
    shots = [dest / "viewer-episodes.png", dest / "viewer-episode.png"]
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        page = browser.new_page(viewport=VIEWPORT)
        page.goto((site / "index.html").as_uri())
        page.select_option("#filter-agent", "noop")
        page.fill("#episode-search", "file")
        page.locator("#episodes-area").scroll_into_view_if_needed()
        page.locator("#episodes-area").screenshot(path=shots[0])
        page.goto((site / "episodes" / episode_page_name(episode_id)).as_uri())
        page.evaluate("() => document.querySelectorAll('details.logs').forEach(d => d.open = true)")
        # From the verdict's section on: setup output, evaluator nodes in full, the steps.
        top = page.evaluate(
            "() => document.querySelector('#setup-output, .graph-progress')"
            ".getBoundingClientRect().top + window.scrollY - 4"
        )
        clip = {"x": 0, "y": top, "width": VIEWPORT["width"], "height": 720}
        page.screenshot(path=shots[1], full_page=True, clip=clip)
        browser.close()
    return shots


def main() -> None:
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, help="a results folder (default: run the demo)")
    parser.add_argument("--dest", type=Path, default=ROOT / "docs" / "images")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        out = args.out or Path(scratch) / "results"
        if args.out is None:
            run_demo(out)
        site = build_site(out, Path(scratch) / "site").parent
        for shot in photograph(site, failed_episode(out), args.dest):
            logger.info("%s: %d KB", shot, shot.stat().st_size // 1024)


if __name__ == "__main__":
    main()
