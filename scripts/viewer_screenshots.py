"""Screenshots of the viewer for docs/viewer.md, taken with the system Chromium, headless.

Runs the demo suite with the oracle and noop agents into a scratch results
folder (or reads ``--out``), builds the static site, and photographs, at
1400x1000: the episode list filtered to the failures; the first screen of a
failed episode's page (its verdict, whose doing it is and the cause, which must lie
within the window: the script stops with an error otherwise); and that episode
side by side with the same task's passing one. Needs chromium (``apt-get install
chromium``) and Playwright (``pip install -e '.[dev]'``); Playwright's own browser
download is not used.

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
from typing import Any

from crabray.results import read_episodes
from crabray.results.site import build_site
from crabray.results.site._episode import side_by_side_url
from crabray.results.site._pages import episode_page_name

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run"]
VIEWPORT = {"width": 1400, "height": 1000}

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


def failed_and_passed(out: Path) -> tuple[str, str]:
    """A failed episode with the largest evaluator graph (its page shows the most), and a
    passed episode of the same task."""
    episodes = read_episodes(out)
    failed = episodes[~episodes["success"].astype(bool)]
    if failed.empty:
        raise SystemExit(f"{out} has no failed episode to photograph")
    chosen = failed.loc[failed["graph_json"].str.len().idxmax()]
    passed = episodes[(episodes["task_id"] == chosen["task_id"]) & episodes["success"].astype(bool)]
    if passed.empty:
        raise SystemExit(f"{out} has no passed episode of task {chosen['task_id']}")
    return str(chosen["episode_id"]), str(passed.iloc[0]["episode_id"])


def _check_first_screen(page: Any) -> None:
    """Stop when the cause is not within the window: the picture would not show it."""
    for element in ("#verdict", "#attribution", "#cause"):
        box = page.locator(element).bounding_box()
        if box is None or box["y"] + box["height"] > VIEWPORT["height"]:
            raise SystemExit(f"{element} is not on the first screen: {box}")


def photograph(site: Path, failed: str, passed: str, dest: Path) -> list[Path]:
    """The list of failures, a failed episode's first screen and it beside a pass, as PNG."""
    from playwright.sync_api import sync_playwright

    dest.mkdir(parents=True, exist_ok=True)
    shots = [dest / f"viewer-{name}.png" for name in ("episodes", "episode", "side-by-side")]
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        page = browser.new_page(viewport=VIEWPORT)
        page.goto((site / "index.html").as_uri())
        page.select_option("#filter-outcome", "fail")
        page.locator("#episodes-area").scroll_into_view_if_needed()
        page.keyboard.press("Escape")
        page.keyboard.press("j")
        page.locator("#episodes-area").screenshot(path=shots[0])
        page.goto((site / "episodes" / episode_page_name(failed)).as_uri())
        _check_first_screen(page)
        page.screenshot(path=shots[1])
        page.goto(site.as_uri() + "/" + side_by_side_url(failed, passed))
        page.frame_locator("#side-b").locator("#verdict").wait_for()
        page.screenshot(path=shots[2])
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
        for shot in photograph(site, *failed_and_passed(out), args.dest):
            logger.info("%s: %d KB", shot, shot.stat().st_size // 1024)


if __name__ == "__main__":
    main()
