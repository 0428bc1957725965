"""Why an episode failed, in a real browser (Debian's chromium, headless, by Playwright).

A failed episode's page shows its verdict, whose doing it is and the cause on the first
screen at 1400x1000; the episode list filters by outcome, attribution, agent, task, tag
and text; keys move between episodes in the list as filtered; two episodes of a task open
side by side. Where a picture is the proof, the screenshot is read back: its pixels show
the verdict where the page's layout says it is.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from PIL import Image

from crabray.core.result import (
    ConversationMessage,
    EpisodeRecord,
    TerminationReason,
    ToolCallRecord,
)
from crabray.results import ResultSink
from crabray.results.site import build_site
from tests.site.conftest import RUN_ID, Console, SiteDataset, episode

pytestmark = pytest.mark.component  # Chromium, driven by Playwright

VIEWPORT = {"width": 1400, "height": 1000}
FAIL_RED = (0xB4, 0x23, 0x18)
"""The fail badge's colour (the stylesheet's --bad)."""
PASS_GREEN = (0x1A, 0x7F, 0x37)
"""The pass badge's colour (the stylesheet's --ok)."""
ERROR_VIOLET = (0x6A, 0x3D, 0x9A)
"""The error badge's colour (benchmark, infrastructure and the episode's own errors)."""


def _worst_case_failure() -> EpisodeRecord:
    """A failed episode with everything long: the instruction, the error, the conversation,
    many steps with long output, many tags, a wide evaluator graph."""
    nodes = [f"file_contains(path='report-{i}.md', text='section {i} done')" for i in range(8)]
    graph = {"nodes": [*nodes, "sink"], "edges": [[i, 8] for i in range(8)]}
    record = episode(
        "long-report",
        "alpha",
        steps=12,
        success=False,
        model="m-1",
        tags=tuple(f"tag-{i}" for i in range(14)),
        graph_json=json.dumps(graph),
    )
    result = record.result
    result.termination_reason = TerminationReason.EVALUATOR_ERROR
    result.error_type = "EvaluatorError"
    result.error = "evaluator file_contains(path='report-3.md') raised:\n" + "".join(
        f"  File 'grader.py', line {i}, in check\n" for i in range(40)
    )
    result.description = "".join(f"Instruction line {i}: write the report.\n" for i in range(80))
    messages = [ConversationMessage(role="system", content="You operate a computer.")]
    for step in range(12):
        messages += [
            ConversationMessage(role="user", content=f"Step {step + 1} of 12.\n" * 5),
            ConversationMessage(
                role="assistant",
                content="I will run it.",
                tool_calls=[ToolCallRecord(id=f"c{step}", name="run_command", arguments="{}")],
            ),
            ConversationMessage(role="tool", tool_call_id=f"c{step}", content="out\n" * 30),
        ]
    result.conversation_json = json.dumps([m.model_dump(exclude_defaults=True) for m in messages])
    for number, recorded in enumerate(record.steps):
        recorded.result = "".join(f"log line {i} of step {number}\n" for i in range(300))
        recorded.observation = "$ ls\n" + "file\n" * 50
        recorded.graph_passed = [0, 1, 2]
    return record


@pytest.fixture
def out(dataset: SiteDataset) -> Path:
    """The site dataset, a benchmark error and the worst case of a failure added."""
    broken = episode("t-two", "delta", steps=0, success=False, tags=("shell",))
    broken.result.termination_reason = TerminationReason.SETUP_ERROR
    broken.result.error = "setup action 'run_command' failed: exit code 2"
    ResultSink(dataset.out, RUN_ID).write([broken, _worst_case_failure()])
    return dataset.out


@pytest.fixture
def site(out: Path, tmp_path: Path) -> Path:
    return build_site(out, tmp_path / "site").parent


def _shown(page: Any) -> list[str]:
    """Task and agent of each episode row the filters leave visible, in the order shown."""
    return page.eval_on_selector(
        "#episodes",
        """table => Array.from(table.tBodies[0].rows)
            .filter(row => !row.hidden && row.offsetParent !== null)
            .map(row => row.cells[1].textContent.trim() + " " + row.cells[2].textContent.trim())""",
    )


def _episode_url(site: Path, page: Any, task: str, agent: str) -> str:
    """The address of the page of the episode of ``task`` by ``agent`` (the list links it)."""
    href = page.eval_on_selector(
        "#episodes",
        """(table, [task, agent]) => Array.from(table.tBodies[0].rows)
            .filter(r => r.cells[1].textContent.trim() === task &&
                         r.cells[2].textContent.trim() === agent)
            .map(r => r.querySelector("a").getAttribute("href"))[0]""",
        [task, agent],
    )
    return (site / href).as_uri()


def _go(page: Any, key: str) -> None:
    """Press ``key`` and wait for the page it opens to load."""
    with page.expect_navigation():
        page.keyboard.press(key)


def _inside(box: dict[str, float] | None) -> bool:
    """Whether a bounding box lies wholly within the 1400x1000 viewport."""
    assert box is not None
    return (
        box["x"] >= 0
        and box["y"] >= 0
        and box["x"] + box["width"] <= VIEWPORT["width"]
        and box["y"] + box["height"] <= VIEWPORT["height"]
    )


def _pixels(image: Image.Image, box: dict[str, float], colour: tuple[int, int, int]) -> int:
    """How many pixels of ``image`` inside ``box`` are exactly ``colour``."""
    region = image.convert("RGB").crop(
        (int(box["x"]), int(box["y"]), int(box["x"] + box["width"]), int(box["y"] + box["height"]))
    )
    return sum(
        count
        for count, rgb in region.getcolors(region.width * region.height) or []
        if rgb == colour
    )


def test_a_failed_episode_shows_its_cause_on_the_first_screen(
    page: tuple[Any, Console], site: Path, tmp_path: Path
) -> None:
    browser_page, console = page
    browser_page.set_viewport_size(VIEWPORT)
    browser_page.goto((site / "index.html").as_uri())
    browser_page.goto(_episode_url(site, browser_page, "long-report", "alpha"))
    assert browser_page.evaluate("() => window.scrollY") == 0
    for element in ("#outcome", "#verdict", "#attribution", "#cause", "#cause-error"):
        assert _inside(browser_page.locator(element).bounding_box()), element
    for element in ("#cause-evaluator", "#cause-last-step"):
        assert _inside(browser_page.locator(element).bounding_box()), element
    assert browser_page.inner_text("#outcome").strip().lower() == "error"
    assert "EvaluatorError" in browser_page.inner_text("#cause-error")
    # The output's box shows its last line without scrolling.
    output = browser_page.locator("#cause-last-step pre").last
    assert output.inner_text().endswith("log line 299 of step 11")
    assert output.evaluate("box => box.scrollHeight <= box.clientHeight")
    evaluator = browser_page.inner_text("#cause-evaluator")
    assert "file_contains(path='report-3.md', text='section 3 done')" in evaluator
    # The transcript comes next, before the grading; the metadata is folded at the end.
    transcript = browser_page.locator("#conversation").bounding_box()
    grading = browser_page.locator("#grading").bounding_box()
    assert transcript is not None and grading is not None
    assert transcript["y"] < grading["y"]
    assert not browser_page.locator("#metadata dl").first.is_visible()
    # The picture: at 1400x1000, the red badge is where the page says the verdict is.
    shot = tmp_path / "failed-episode-1400x1000.png"
    browser_page.screenshot(path=str(shot))
    with Image.open(shot) as image:
        assert image.size == (1400, 1000)
        badge = browser_page.locator("#outcome").bounding_box()
        assert badge is not None
        assert _pixels(image, badge, ERROR_VIOLET) > 200
        assert _pixels(image, badge, FAIL_RED) == 0, "an error is not painted as a failure"
    assert console.errors == []


def test_a_plain_failure_on_the_first_screen_is_red(
    page: tuple[Any, Console], site: Path, tmp_path: Path
) -> None:
    browser_page, console = page
    browser_page.set_viewport_size(VIEWPORT)
    browser_page.goto((site / "index.html").as_uri())
    browser_page.goto(_episode_url(site, browser_page, "graph-task", "alpha"))
    cause = browser_page.locator("#cause")
    assert _inside(cause.bounding_box())
    assert "agent gave up on <sink>" in cause.inner_text()
    shot = tmp_path / "graph-task.png"
    browser_page.screenshot(path=str(shot))
    with Image.open(shot) as image:
        badge = browser_page.locator("#outcome").bounding_box()
        assert badge is not None and _pixels(image, badge, FAIL_RED) > 200
    assert console.errors == []


def test_filters_narrow_the_list(page: tuple[Any, Console], site: Path) -> None:
    browser_page, console = page
    browser_page.goto((site / "index.html").as_uri())
    assert len(_shown(browser_page)) == 7
    outcomes = browser_page.locator("#filter-outcome option").all_inner_texts()
    assert outcomes == ["all", "error", "fail", "pass"]
    browser_page.select_option("#filter-outcome", "fail")
    assert _shown(browser_page) == ["graph-task alpha", "t-two beta"]
    browser_page.select_option("#filter-outcome", "error")
    assert _shown(browser_page) == ["long-report alpha", "t-two delta"]
    browser_page.select_option("#filter-attribution", "benchmark")
    assert _shown(browser_page) == ["t-two delta"]
    browser_page.click("#filter-clear")
    # A tag filter matches any of an episode's tags, markup in a tag included.
    tags = browser_page.locator("#filter-tag option").all_inner_texts()
    assert {"<hard>", "files", "shell", "easy", "tag-0"} <= set(tags)
    browser_page.select_option("#filter-tag", "shell")
    assert _shown(browser_page) == ["t-two beta", "t-two delta", "t-two gamma"]
    browser_page.select_option("#filter-tag", "<hard>")
    assert _shown(browser_page) == ["graph-task alpha"]
    browser_page.select_option("#filter-tag", "files")
    browser_page.select_option("#filter-outcome", "pass")
    assert _shown(browser_page) == ["t-one beta", "t-one gamma"]
    browser_page.select_option("#filter-agent", "gamma")
    assert _shown(browser_page) == ["t-one gamma"]
    browser_page.click("#filter-clear")
    browser_page.select_option("#filter-task", "t-two")
    browser_page.select_option("#filter-ended", "max_steps")
    assert _shown(browser_page) == ["t-two beta"]
    browser_page.click("#filter-clear")
    browser_page.fill("#episode-search", "exit code 2")
    assert _shown(browser_page) == ["t-two delta"]
    assert browser_page.inner_text("#filter-count") == "1 of 7 episodes shown"
    assert console.errors == []


def test_keys_move_between_the_episodes_of_the_filtered_list(
    page: tuple[Any, Console], site: Path
) -> None:
    browser_page, console = page
    index = (site / "index.html").as_uri()
    browser_page.goto(index)
    keys = browser_page.inner_text("#list-keys")
    assert "j" in keys and "k" in keys and "Enter" in keys
    # Keys typed into the search box are text, not moves.
    browser_page.click("#episode-search")
    browser_page.keyboard.press("j")
    assert browser_page.input_value("#episode-search") == "j"
    assert browser_page.locator("#episodes tr.current").count() == 0
    browser_page.click("#filter-clear")
    browser_page.select_option("#filter-outcome", "fail")
    browser_page.locator("#episode-search").blur()
    browser_page.keyboard.press("j")
    browser_page.keyboard.press("j")
    browser_page.keyboard.press("k")
    current = browser_page.locator("#episodes tr.current")
    assert current.count() == 1 and "graph-task" in current.inner_text()
    browser_page.keyboard.press("x")  # picked for side by side
    assert current.locator("input.pick").is_checked()
    _go(browser_page, "Enter")
    assert browser_page.inner_text("h1") == "graph-task"
    assert "j" in browser_page.inner_text("#keys") and "k" in browser_page.inner_text("#keys")
    assert browser_page.inner_text("#walk") == "1 of 2 in the list as filtered"
    # The next episode of the list as filtered, not of the whole list (t-one by beta).
    _go(browser_page, "j")
    assert browser_page.inner_text("h1") == "t-two"
    assert "beta" in browser_page.inner_text("h1 + p")
    assert browser_page.inner_text("#walk") == "2 of 2 in the list as filtered"
    at_end = browser_page.url
    browser_page.keyboard.press("j")  # the last of the list: nowhere to go
    browser_page.wait_for_timeout(300)
    assert browser_page.url == at_end
    _go(browser_page, "ArrowLeft")
    assert browser_page.inner_text("h1") == "graph-task"
    _go(browser_page, "u")
    assert browser_page.url == index
    assert browser_page.input_value("#filter-outcome") == "fail"
    assert console.errors == []


def test_keys_follow_the_listing_order_without_a_list(
    page: tuple[Any, Console], site: Path
) -> None:
    browser_page, console = page
    browser_page.goto((site / "index.html").as_uri())
    first = _episode_url(site, browser_page, "graph-task", "alpha")
    browser_page.evaluate("() => window.sessionStorage.clear()")
    browser_page.goto(first)
    assert browser_page.locator("#walk").inner_text() == ""
    _go(browser_page, "ArrowRight")
    assert browser_page.inner_text("h1") == "long-report"  # the next of the whole list
    _go(browser_page, "k")
    assert browser_page.url == first
    # With a modifier the key is the browser's (Alt+Left is "back"), not a move.
    browser_page.keyboard.press("Control+j")
    browser_page.wait_for_timeout(300)
    assert browser_page.url == first
    assert console.errors == []


def test_two_episodes_of_a_task_open_side_by_side(
    page: tuple[Any, Console], site: Path, tmp_path: Path
) -> None:
    browser_page, console = page
    browser_page.set_viewport_size(VIEWPORT)
    browser_page.goto((site / "index.html").as_uri())
    button = browser_page.locator("#side-by-side-open")
    assert button.is_disabled()
    browser_page.select_option("#filter-task", "t-two")
    rows = browser_page.locator("#episodes tbody tr:not([hidden])")
    rows.filter(has_text="beta").locator("input.pick").check()
    assert button.is_disabled()
    rows.filter(has_text="gamma").locator("input.pick").check()
    assert button.is_enabled()
    button.click()
    browser_page.wait_for_load_state("load")
    assert browser_page.url.split("/")[-1].startswith("side-by-side.html?a=")
    left = browser_page.frame_locator("#side-a")
    right = browser_page.frame_locator("#side-b")
    assert left.locator("h1").inner_text() == "t-two"
    assert right.locator("h1").inner_text() == "t-two"
    assert left.locator("#outcome").inner_text().strip().lower() == "fail"
    assert right.locator("#outcome").inner_text().strip().lower() == "pass"
    assert "beta" in left.locator("h1 + p").inner_text()
    assert "gamma" in right.locator("h1 + p").inner_text()
    a = browser_page.locator("#side-a").bounding_box()
    b = browser_page.locator("#side-b").bounding_box()
    assert a is not None and b is not None
    assert a["x"] + a["width"] <= b["x"] and abs(a["y"] - b["y"]) < 2
    assert _inside(a) and _inside(b)
    # The picture: the failure's red badge on the left, the pass's green one on the right.
    shot = tmp_path / "side-by-side.png"
    browser_page.screenshot(path=str(shot))
    with Image.open(shot) as image:
        assert _pixels(image, a, FAIL_RED) > 200 and _pixels(image, a, PASS_GREEN) == 0
        assert _pixels(image, b, PASS_GREEN) > 200 and _pixels(image, b, FAIL_RED) == 0
    # From an episode's page: the other episodes of its task, each opening beside it.
    browser_page.goto((site / "index.html").as_uri())
    browser_page.click("#filter-clear")
    browser_page.goto(_episode_url(site, browser_page, "t-one", "beta"))
    browser_page.locator("#peers a", has_text="gamma").click()
    browser_page.wait_for_load_state("load")
    assert "beta" in browser_page.frame_locator("#side-a").locator("h1 + p").inner_text()
    assert "gamma" in browser_page.frame_locator("#side-b").locator("h1 + p").inner_text()
    browser_page.click("#side-swap")
    browser_page.wait_for_load_state("load")
    assert "gamma" in browser_page.frame_locator("#side-a").locator("h1 + p").inner_text()
    assert console.errors == []


def test_the_side_by_side_page_refuses_what_is_not_an_episode(
    page: tuple[Any, Console], site: Path
) -> None:
    browser_page, console = page
    for query in ("", "?a=javascript:alert(1)&b=../index", "?a=x"):
        browser_page.goto((site / "side-by-side.html").as_uri() + query)
        assert browser_page.locator("#side-a").get_attribute("src") is None
        assert browser_page.locator("#side-by-side-empty").is_visible()
    assert console.errors == []
