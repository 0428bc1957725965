"""The site in a real headless browser: Debian's chromium driven by Playwright.

Playwright's own browser download is never used (``playwright install`` needs
the network); the system chromium is launched instead. Without it the tests
skip with the package to install, except in CI (``CI=true``), where a
missing browser is a failure: CI must exercise the pages for real.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from crabray.results import ResultSink
from crabray.results.site import build_site
from tests.conftest import ROOT
from tests.site.conftest import RUN_ID, SiteDataset, episode

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
SERVER_START_SEC = 60.0


def _unavailable(reason: str) -> None:
    message = f"{reason}: apt-get install chromium"
    if os.environ.get("CI") == "true":
        pytest.fail(f"browser tests cannot run in CI: {message}")
    pytest.skip(message)


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    if not (Path(CHROMIUM).is_file() and os.access(CHROMIUM, os.X_OK)):
        _unavailable(f"{CHROMIUM} not found")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        _unavailable("playwright is not installed (pip install -e '.[dev]')")
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield launched
        launched.close()


@dataclass
class Console:
    """Errors a page reported: console messages of type error and uncaught exceptions."""

    errors: list[str] = field(default_factory=list)


@pytest.fixture
def page(browser: Any) -> Iterator[tuple[Any, Console]]:
    context = browser.new_context()
    opened = context.new_page()
    console = Console()
    opened.on(
        "console",
        lambda message: console.errors.append(message.text) if message.type == "error" else None,
    )
    opened.on("pageerror", lambda error: console.errors.append(f"page error: {error}"))
    yield opened, console
    context.close()


@pytest.fixture
def site(dataset: SiteDataset, tmp_path: Path) -> Path:
    return build_site(dataset.out, tmp_path / "site")


def _column(page: Any, table: str, column: str) -> list[str]:
    """The texts of one column of a table, in the order shown."""
    return page.eval_on_selector(
        f"#{table}",
        """(table, name) => {
            const headers = Array.from(table.tHead.rows[0].cells).map(c => c.textContent.trim());
            const index = headers.indexOf(name);
            return Array.from(table.tBodies[0].rows).map(r => r.cells[index].textContent.trim());
        }""",
        column,
    )


def test_index_loads_without_console_errors(page: tuple[Any, Console], site: Path) -> None:
    browser_page, console = page
    browser_page.goto(site.as_uri())
    browser_page.wait_for_load_state("load")
    assert browser_page.title() == "crabray leaderboard"
    assert browser_page.locator("#episodes tbody tr").count() == 5
    assert browser_page.locator("figure svg").count() == 3
    assert console.errors == []


def test_clicking_a_header_sorts_numerically_then_reverses(
    page: tuple[Any, Console], site: Path
) -> None:
    browser_page, console = page
    browser_page.goto(site.as_uri())
    header = browser_page.locator("#episodes thead th", has_text="steps").first
    assert _column(browser_page, "episodes", "steps") == ["3", "2", "10", "9", "1"]
    header.click()
    assert _column(browser_page, "episodes", "steps") == ["1", "2", "3", "9", "10"]
    assert header.get_attribute("aria-sort") == "ascending"
    header.click()
    assert _column(browser_page, "episodes", "steps") == ["10", "9", "3", "2", "1"]
    assert header.get_attribute("aria-sort") == "descending"
    agent = browser_page.locator("#leaderboard thead th", has_text="agent").first
    agent.click()
    assert _column(browser_page, "leaderboard", "agent") == ["alpha", "beta", "gamma"]
    assert console.errors == []


def test_episode_page_shows_steps_screenshot_and_graph(
    page: tuple[Any, Console], site: Path, dataset: SiteDataset
) -> None:
    browser_page, console = page
    browser_page.goto(site.as_uri())
    browser_page.click("#episodes a:text('graph-task')")
    browser_page.wait_for_load_state("load")
    assert browser_page.url.endswith(f"episodes/{dataset.graph_episode_id}.html")
    assert browser_page.locator("section.step").count() == 3
    assert browser_page.locator("section.step .call").count() == 3
    screenshot = browser_page.locator("img.screenshot")
    assert screenshot.count() == 1
    screenshot.scroll_into_view_if_needed()
    browser_page.wait_for_function(
        "() => { const i = document.querySelector('img.screenshot'); return i && i.complete; }"
    )
    assert screenshot.evaluate("image => image.naturalWidth") > 0
    final = browser_page.locator("svg.graph").first
    assert final.locator("g.node").count() == 4
    assert final.locator("g.node.passed").count() == 3
    assert final.locator("g.node.passed rect").first.get_attribute("fill") == "#dcf5e3"
    assert "✓" in final.locator("g.node.passed text").first.text_content()
    after_first = browser_page.locator("#step-1 svg.graph g.node.passed")
    assert after_first.count() == 1
    # The injected markup is shown as text and never ran.
    assert "<script>window.__pwned = 1</script>" in browser_page.inner_text("pre.description")
    assert browser_page.evaluate("() => window.__pwned") is None
    assert console.errors == []


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _wait_until_serving(url: str, process: subprocess.Popen[str]) -> None:
    deadline = time.monotonic() + SERVER_START_SEC
    while time.monotonic() < deadline:
        if process.poll() is not None:
            out, err = process.communicate()
            pytest.fail(f"crabray view exited {process.returncode}:\n{out}\n{err}")
        try:
            with urllib.request.urlopen(url, timeout=5):
                return
        except (urllib.error.URLError, ConnectionError):
            time.sleep(0.2)
    pytest.fail(f"crabray view did not answer {url} within {SERVER_START_SEC} s")


@pytest.fixture
def view_server(dataset: SiteDataset) -> Iterator[tuple[str, subprocess.Popen[str]]]:
    port = _free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "crabray", "view", str(dataset.out), "--port", str(port)],
        cwd=ROOT,
        env={**os.environ, "COLUMNS": "200", "NO_COLOR": "1"},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    url = f"http://127.0.0.1:{port}/"
    try:
        _wait_until_serving(url, process)
        yield url, process
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()


def test_view_serves_and_shows_new_episodes_on_reload(
    page: tuple[Any, Console],
    dataset: SiteDataset,
    view_server: tuple[str, subprocess.Popen[str]],
) -> None:
    url, process = view_server
    browser_page, console = page
    browser_page.goto(url)
    assert browser_page.locator("#episodes tbody tr").count() == 5
    late = episode("late-task", "beta", steps=4, success=True, tags=("late",))
    ResultSink(dataset.out, RUN_ID).write([late])
    browser_page.reload()
    assert browser_page.locator("#episodes tbody tr").count() == 6
    browser_page.click("#episodes a:text('late-task')")
    browser_page.wait_for_load_state("load")
    assert browser_page.url == f"{url}episodes/{late.result.episode_id}.html"
    assert browser_page.locator("section.step").count() == 4
    browser_page.goto(url + f"episodes/{dataset.graph_episode_id}.html")
    assert browser_page.locator("img.screenshot").evaluate("image => image.naturalWidth") > 0
    assert console.errors == []
    # Ctrl-C stops the server cleanly.
    process.send_signal(signal.SIGINT)
    out, err = process.communicate(timeout=30)
    assert process.returncode == 0, err
    assert "serving" in out and "stopped" in out
