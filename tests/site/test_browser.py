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
from pathlib import Path
from typing import Any

import pytest

from crabray.results import ResultSink, RunManifest, write_manifest
from crabray.results.site import build_site
from tests.conftest import ROOT
from tests.site.conftest import (
    OLDER_RUN_ID,
    RUN_ID,
    SETUP_OUTPUT,
    SUITE_NAME,
    Console,
    SiteDataset,
    episode,
    write_older_run,
)

pytestmark = pytest.mark.component  # Chromium, driven by Playwright

SERVER_START_SEC = 60.0


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
    assert browser_page.title() == SUITE_NAME
    assert browser_page.locator("#episodes tbody tr").count() == 5
    assert browser_page.locator("figure svg").count() == 3
    assert console.errors == []


def test_clicking_a_header_sorts_numerically_then_reverses(
    page: tuple[Any, Console], site: Path
) -> None:
    browser_page, console = page
    browser_page.goto(site.as_uri())
    header = browser_page.locator("#episodes thead th", has_text="Steps").first
    assert _column(browser_page, "episodes", "Steps") == ["3", "2", "10", "9", "1"]
    header.click()
    assert _column(browser_page, "episodes", "Steps") == ["1", "2", "3", "9", "10"]
    assert header.get_attribute("aria-sort") == "ascending"
    header.click()
    assert _column(browser_page, "episodes", "Steps") == ["10", "9", "3", "2", "1"]
    assert header.get_attribute("aria-sort") == "descending"
    agent = browser_page.locator("#leaderboard thead th", has_text="Agent").first
    agent.click()
    assert _column(browser_page, "leaderboard", "Agent") == ["alpha", "beta", "gamma"]
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
    final = browser_page.locator("#grading svg.graph")
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
    yield from _view(dataset.out)


def _view(out: Path) -> Iterator[tuple[str, subprocess.Popen[str]]]:
    """``crabray view OUT`` in a subprocess on a free port, until the generator is closed."""
    port = _free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "crabray", "view", str(out), "--port", str(port)],
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


def test_view_shows_new_episodes_live_without_a_reload(
    page: tuple[Any, Console],
    dataset: SiteDataset,
    view_server: tuple[str, subprocess.Popen[str]],
) -> None:
    url, process = view_server
    browser_page, console = page
    browser_page.goto(url)
    assert browser_page.locator("#episodes tbody tr").count() == 5
    # Sort by steps and mark the document: both must survive the update, which a reload
    # (or a navigation) would lose.
    browser_page.locator("#episodes thead th", has_text="Steps").first.click()
    browser_page.evaluate("() => { window.__stayed = true; }")
    browser_page.select_option("#filter-agent", "beta")
    assert len(_shown_tasks(browser_page)) == 2
    late = episode("late-task", "beta", steps=4, success=True, tags=("late",))
    ResultSink(dataset.out, RUN_ID).write([late])
    browser_page.wait_for_function(
        "() => document.querySelectorAll('#episodes tbody tr').length === 6", timeout=30_000
    )
    assert browser_page.evaluate("() => window.__stayed") is True
    # The filter still applies to the swapped-in list, and the new task is a choice.
    assert sorted(_shown_tasks(browser_page)) == ["late-task beta", "t-one beta", "t-two beta"]
    assert "late-task" in browser_page.locator("#filter-task option").all_inner_texts()
    assert browser_page.input_value("#filter-agent") == "beta"
    browser_page.select_option("#filter-agent", "")
    assert _column(browser_page, "episodes", "Steps") == ["1", "2", "3", "4", "9", "10"]
    assert "late-task" in browser_page.inner_text("#matrix")
    assert "6 episodes" in browser_page.inner_text("#live-status")
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


def test_episode_page_shows_the_conversation_beside_the_steps(
    page: tuple[Any, Console], site: Path, dataset: SiteDataset
) -> None:
    browser_page, console = page
    browser_page.goto((site.parent / "episodes" / f"{dataset.graph_episode_id}.html").as_uri())
    messages = browser_page.locator("#conversation .message")
    assert messages.count() == 5
    roles = [
        text.strip().lower() for text in browser_page.locator(".message .role").all_inner_texts()
    ]
    assert roles == ["system", "user", "user", "assistant", "tool"]
    reply = browser_page.locator(".message.role-assistant")
    assert reply.locator(".tool-name").inner_text() == "write_file"
    assert '"content": "x<0>"' in reply.locator("pre.arguments").inner_text()
    assert (
        reply.locator(".usage").inner_text() == "m-1 · 300 in · 40 out tokens · $0.00014 · 1.25 s"
    )
    assert "<b>now</b>" in reply.locator("pre.content").inner_text()
    tool = browser_page.locator(".message.role-tool")
    assert "<script>window.__pwned = 5</script>written" in tool.inner_text()
    # Side by side: the conversation's column starts level with the steps' column.
    left = browser_page.locator("#conversation").bounding_box()
    right = browser_page.locator("#steps").bounding_box()
    assert left is not None and right is not None
    assert left["x"] + left["width"] <= right["x"] and abs(left["y"] - right["y"]) < 5
    assert browser_page.evaluate("() => window.__pwned") is None
    assert console.errors == []


def test_matrix_cell_drills_down_to_its_episodes(
    page: tuple[Any, Console], site: Path, dataset: SiteDataset
) -> None:
    browser_page, console = page
    browser_page.goto(site.as_uri())
    headers = browser_page.locator("#matrix thead th").all_inner_texts()
    assert headers == ["Task", "alpha / m-1", "beta", "gamma / m-2"]
    cell = browser_page.locator("#matrix tbody tr", has_text="graph-task").locator("td").first
    assert cell.locator("a").inner_text() == "0.75"
    assert "0 of 1 solved" in cell.inner_text()
    drill = browser_page.locator("#cell-0-0")
    assert not drill.is_visible()
    cell.locator("a").click()
    assert drill.is_visible()
    assert "agent_complete" in drill.inner_text()
    drill.locator("a", has_text=RUN_ID).click()
    browser_page.wait_for_load_state("load")
    assert browser_page.url.endswith(f"episodes/{dataset.graph_episode_id}.html")
    assert console.errors == []


def test_headers_title_and_costs_read_as_text(page: tuple[Any, Console], site: Path) -> None:
    browser_page, console = page
    browser_page.goto(site.as_uri())
    assert browser_page.inner_text("#title") == SUITE_NAME
    assert browser_page.inner_text("#description") == "suite tests/site"
    headers = browser_page.locator("#leaderboard thead th").all_inner_texts()
    assert "Success rate" in headers and "Cost per success" in headers
    assert not [header for header in headers if "_" in header]
    agents = _column(browser_page, "leaderboard", "Agent")
    costs = dict(zip(agents, _column(browser_page, "leaderboard", "Cost"), strict=True))
    assert costs == {"alpha": "$0.012", "beta": "$0.00", "gamma": "$0.80"}
    assert console.errors == []


def test_run_picker_and_comparison(
    page: tuple[Any, Console], dataset: SiteDataset, tmp_path: Path
) -> None:
    write_older_run(dataset.out)
    site = build_site(dataset.out, tmp_path / "site")
    browser_page, console = page
    browser_page.goto(site.as_uri())
    runs = browser_page.locator("#run-picker a[data-run]")
    assert [runs.nth(i).get_attribute("data-run") for i in range(runs.count())] == [
        RUN_ID,
        OLDER_RUN_ID,
    ]
    runs.nth(1).click()
    browser_page.wait_for_load_state("load")
    assert browser_page.inner_text("#scope").startswith(f"run {OLDER_RUN_ID} (")
    assert browser_page.locator("#episodes tbody tr").count() == 5
    assert browser_page.locator("#run-picker a.current").get_attribute("data-run") == OLDER_RUN_ID
    browser_page.click("#compare-link")
    browser_page.wait_for_load_state("load")
    assert browser_page.input_value("#run-a") == OLDER_RUN_ID
    assert browser_page.input_value("#run-b") == RUN_ID
    rows = {
        row.locator("td").first.inner_text(): row
        for row in browser_page.locator("#comparison tbody tr").all()
    }
    fixed = rows["t-one · beta"]
    assert [c.strip() for c in fixed.locator("td").all_inner_texts()] == [
        "t-one · beta",
        "0.00",
        "1.00",
        "+1.00",
        "fixed",
    ]
    assert fixed.get_attribute("class") == "change-fixed"
    assert rows["t-one · gamma / m-2"].locator("td").last.inner_text() == "same"
    assert rows["graph-task · alpha / m-1"].locator("td").last.inner_text() == "only in B"
    hostile = rows["</script><script>window.__pwned = 6</script> · beta"]
    assert hostile.locator("td").last.inner_text() == "only in A"
    summary = browser_page.inner_text("#compare-summary")
    assert summary.startswith(f"{OLDER_RUN_ID} → {RUN_ID}: ") and "2 fixed" in summary
    # Swapping the runs turns fixed into broke.
    browser_page.select_option("#run-a", RUN_ID)
    browser_page.select_option("#run-b", OLDER_RUN_ID)
    swapped = browser_page.locator("#comparison tbody tr", has_text="t-one · beta")
    assert swapped.locator("td").last.inner_text() == "broke"
    assert browser_page.evaluate("() => window.__pwned") is None
    assert console.errors == []


def test_a_run_that_just_started_fills_in_live(page: tuple[Any, Console], tmp_path: Path) -> None:
    out = tmp_path / "out"
    write_manifest(
        out,
        RunManifest(
            run_id=RUN_ID,
            suite="tests/site",
            suite_name=SUITE_NAME,
            agents=["beta"],
            crabray_version="test",
        ),
    )
    server = _view(out)
    url, _ = next(server)
    try:
        browser_page, console = page
        browser_page.goto(url)
        assert "No episodes yet" in browser_page.inner_text("#no-episodes")
        assert browser_page.locator("#matrix").count() == 0
        ResultSink(out, RUN_ID).write([episode("t-one", "beta", steps=2, success=True)])
        browser_page.wait_for_selector("#matrix", timeout=30_000)
        assert browser_page.locator("#no-episodes").count() == 0
        assert browser_page.locator("#episodes tbody tr").count() == 1
        # A drill-down left open stays open when the next episode lands.
        browser_page.locator("#matrix td.matrix-cell a").first.click()
        assert browser_page.locator("#cell-0-0").is_visible()
        ResultSink(out, RUN_ID).write([episode("t-one", "beta", steps=3, success=False, epoch=1)])
        browser_page.wait_for_function(
            "() => document.querySelectorAll('#episodes tbody tr').length === 2", timeout=30_000
        )
        drill = browser_page.locator("#cell-0-0")
        assert drill.is_visible() and "1 of 2 solved" in drill.inner_text()
        assert console.errors == []
    finally:
        server.close()


def _shown_tasks(page: Any) -> list[str]:
    """The task of each episode row the filters leave visible, in the order shown."""
    return page.eval_on_selector(
        "#episodes",
        """table => Array.from(table.tBodies[0].rows)
            .filter(row => !row.hidden && row.offsetParent !== null)
            .map(row => row.cells[1].textContent.trim() + " " + row.cells[2].textContent.trim())""",
    )


def test_filtering_and_searching_the_episodes(page: tuple[Any, Console], site: Path) -> None:
    browser_page, console = page
    browser_page.goto(site.as_uri())
    form = browser_page.locator("#episode-filter")
    assert form.is_visible()
    assert browser_page.inner_text("#filter-count") == "5 episodes"
    agents = browser_page.locator("#filter-agent option").all_inner_texts()
    assert agents == ["all", "alpha", "beta", "gamma"]
    outcomes = browser_page.locator("#filter-outcome option").all_inner_texts()
    assert outcomes == ["all", "fail", "pass"]
    endings = browser_page.locator("#filter-ended option").all_inner_texts()
    assert endings == ["all", "agent_complete", "max_steps", "success"]
    browser_page.select_option("#filter-agent", "gamma")
    assert _shown_tasks(browser_page) == ["t-one gamma", "t-two gamma"]
    assert browser_page.inner_text("#filter-count") == "2 of 5 episodes shown"
    browser_page.select_option("#filter-task", "t-two")
    assert _shown_tasks(browser_page) == ["t-two gamma"]
    # Back from an episode's page, the list is filtered as it was left.
    browser_page.locator("#episodes tbody tr:not([hidden]) a").click()
    browser_page.wait_for_load_state("load")
    assert browser_page.inner_text("h1") == "t-two"
    browser_page.go_back()
    browser_page.wait_for_load_state("load")
    assert _shown_tasks(browser_page) == ["t-two gamma"]
    assert browser_page.input_value("#filter-agent") == "gamma"
    # Clear empties the fields and shows every row in the same event: nothing to wait for.
    browser_page.click("#filter-clear")
    assert browser_page.input_value("#filter-agent") == ""
    assert browser_page.inner_text("#filter-count") == "5 episodes"
    assert len(_shown_tasks(browser_page)) == 5
    # The search reads the error and the instruction, which the table does not show.
    browser_page.fill("#episode-search", "gave UP")
    assert _shown_tasks(browser_page) == ["graph-task alpha"]
    browser_page.fill("#episode-search", "do t-two")
    assert _shown_tasks(browser_page) == ["t-two beta", "t-two gamma"]
    browser_page.select_option("#filter-ended", "max_steps")
    assert _shown_tasks(browser_page) == ["t-two beta"]
    browser_page.select_option("#filter-attribution", "agent")
    assert _shown_tasks(browser_page) == ["t-two beta"]
    browser_page.fill("#episode-search", "no such words")
    assert _shown_tasks(browser_page) == []
    assert browser_page.inner_text("#filter-count") == "0 of 5 episodes shown"
    # Enter in the search box does not submit the form (the page may not navigate).
    browser_page.press("#episode-search", "Enter")
    assert browser_page.url == site.as_uri()
    assert console.errors == []


def test_previous_next_and_an_episodes_logs(
    page: tuple[Any, Console], site: Path, dataset: SiteDataset
) -> None:
    browser_page, console = page
    browser_page.goto(site.as_uri())
    browser_page.click("#episodes a:text('graph-task')")
    browser_page.wait_for_load_state("load")
    assert browser_page.locator("#previous-episode").count() == 0
    # The evaluator nodes in full, with their arguments and whether they passed.
    nodes = browser_page.locator("#graph-nodes li")
    assert nodes.nth(1).locator("code").inner_text() == "file_contains(path='a.txt', text='x')"
    assert nodes.nth(1).get_attribute("class") == "passed"
    assert nodes.nth(3).get_attribute("class") == "pending"
    # The model's requests and replies as recorded, folded until opened.
    raw = browser_page.locator("#raw-conversation pre.raw")
    assert not raw.is_visible()
    browser_page.click("#raw-conversation summary")
    assert raw.is_visible()
    assert '"name": "write_file"' in raw.inner_text()
    # The setup's output (its stderr too), folded: the setup did not fail.
    setup = browser_page.locator("#setup-output pre")
    assert not setup.is_visible()
    browser_page.click("#setup-output summary")
    assert setup.inner_text() == SETUP_OUTPUT
    browser_page.click("#next-episode")
    browser_page.wait_for_load_state("load")
    assert browser_page.inner_text("h1") == "t-one"
    assert "beta" in browser_page.inner_text("h1 + p")
    browser_page.click("#previous-episode")
    browser_page.wait_for_load_state("load")
    assert browser_page.url.endswith(f"episodes/{dataset.graph_episode_id}.html")
    assert console.errors == []


def test_a_wide_episode_list_scrolls_inside_the_page(
    page: tuple[Any, Console], tmp_path: Path
) -> None:
    out = tmp_path / "out"
    wide = "a-task-with-a-very-long-identifier-" * 12
    ResultSink(out, RUN_ID).write(
        [episode(wide, "beta", steps=1, success=True)]
        + [episode(f"t-{index}", "beta", steps=1, success=True) for index in range(60)]
    )
    site = build_site(out, tmp_path / "site")
    browser_page, console = page
    browser_page.set_viewport_size({"width": 1600, "height": 900})
    browser_page.goto(site.as_uri())
    wrap = browser_page.locator("#episodes-section .table-wrap")
    sizes = wrap.evaluate("w => [w.scrollWidth, w.clientWidth]")
    assert sizes[0] > sizes[1], "the table is wider than its box"
    assert sizes[1] > 1500, "the list uses the window's width, not a 1,400 px column"
    # Sixty rows: the box scrolls both ways, so its horizontal scrollbar is on screen
    # with the rows, not below the last of them.
    wrap.scroll_into_view_if_needed()
    box = wrap.bounding_box()
    assert box is not None and box["y"] + box["height"] <= 900
    # The page itself does not overflow: the list scrolls in its box, to its last column.
    assert browser_page.evaluate("() => document.documentElement.scrollWidth <= window.innerWidth")
    wrap.evaluate("w => { w.scrollLeft = w.scrollWidth; }")
    assert wrap.evaluate("w => w.scrollLeft") > 0
    finished = browser_page.locator("#episodes tbody td").last
    finished.scroll_into_view_if_needed()
    assert finished.is_visible()
    assert console.errors == []
