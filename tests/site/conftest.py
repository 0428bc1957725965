"""A results dataset for the site tests, written by the real ``ResultSink``.

It holds what the pages must handle: a screenshot file, a four-node evaluator
graph passed step by step, HTML in the task text and in the agent's output and
conversation, several agents (one with a model and costs), tags, step counts
whose text order differs from their numeric order (2, 10, 9, 1), and a run
manifest naming the suite.

It also holds the browser the browser tests drive (Debian's chromium, by Playwright,
skipped with the package to install when absent) and ``element_text``, which reads an
element of a built page as a browser shows its text.
"""

from __future__ import annotations

import json
import os
import re
import struct
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest

from crabray.core.result import (
    ConversationMessage,
    EpisodeRecord,
    EpisodeResult,
    StepRecord,
    TerminationReason,
    ToolCallRecord,
)
from crabray.results import ResultSink, RunManifest, write_manifest

RUN_ID = "20261123-075300-517e01"
BASE_TIME = datetime(2026, 11, 23, 7, 53, 0, tzinfo=UTC)
INJECTED_DESCRIPTION = (
    "Fix <b>config</b> & report.<script>window.__pwned = 1</script>"
    '<img src=x onerror="window.__pwned = 2">'
)
INJECTED_MESSAGE = "</pre><script>window.__pwned = 3</script> I will <i>edit</i> the file"
GRAPH = {
    "nodes": ["path_exists(path='a.txt')", "file_contains(path='a.txt', text='x')", "b", "sink"],
    "edges": [[0, 1], [0, 2], [1, 3], [2, 3]],
}
SCREENSHOT = "screenshots/graph-task/step0.png"
SETUP_OUTPUT = (
    "[box] run_command(command='./init.sh')\nexit code 0\nstdout:\nready\n\n"
    "stderr:\nwarning: <cache> is cold"
)
SUITE_NAME = "site-suite"
INJECTED_REPLY = 'I will write it <b>now</b><img src=x onerror="window.__pwned = 4">'
INJECTED_TOOL_OUTPUT = "</pre><script>window.__pwned = 5</script>written"
CONVERSATION = [
    ConversationMessage(role="system", content="You operate a computer."),
    ConversationMessage(role="user", content=INJECTED_DESCRIPTION),
    ConversationMessage(role="user", content="Step 1 of 3.", images=1),
    ConversationMessage(
        role="assistant",
        content=INJECTED_REPLY,
        tool_calls=[
            ToolCallRecord(
                id="call-1", name="write_file", arguments='{"path": "a.txt", "content": "x<0>"}'
            )
        ],
        model="m-1",
        tokens_in=300,
        tokens_out=40,
        cost_usd=0.00014,
        latency_sec=1.25,
    ),
    ConversationMessage(role="tool", tool_call_id="call-1", content=INJECTED_TOOL_OUTPUT),
]


def png_bytes(width: int = 4, height: int = 3) -> bytes:
    """A valid RGB PNG image, made without an imaging library."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return (
            struct.pack(">I", len(data))
            + kind
            + data
            + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)
        )

    rows = b"".join(b"\x00" + b"\x2a\x80\xd0" * width for _ in range(height))
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(rows))
        + chunk(b"IEND", b"")
    )


def episode(
    task_id: str,
    agent: str,
    *,
    steps: int,
    success: bool,
    model: str | None = None,
    cost: float = 0.0,
    tags: tuple[str, ...] = (),
    run_id: str = RUN_ID,
    **fields: object,
) -> EpisodeRecord:
    """A finished episode with ``steps`` one-call steps on a one-node graph."""
    fields.setdefault("graph_json", json.dumps({"nodes": ["done"], "edges": []}))
    result = EpisodeResult(
        run_id=run_id,
        suite="tests/site",
        task_id=task_id,
        tags=list(tags),
        agent=agent,
        model=model,
        termination_reason=TerminationReason.SUCCESS if success else TerminationReason.MAX_STEPS,
        success=success,
        score=1.0 if success else 0.0,
        completeness=1.0 if success else 0.0,
        steps=steps,
        cost_usd=cost,
        description=f"Do {task_id}.",
        started_at=BASE_TIME,
        finished_at=BASE_TIME + timedelta(seconds=30),
        **fields,
    )
    records = [
        StepRecord(
            episode_id=result.episode_id,
            run_id=run_id,
            task_id=task_id,
            agent=agent,
            step=index,
            env="box",
            action="run_command",
            arguments_json=json.dumps({"command": f"echo {index}"}),
            result=f"{index}\n",
            observation=f"observation {index}",
            graph_passed=[0] if success and index == steps - 1 else [],
        )
        for index in range(steps)
    ]
    return EpisodeRecord(result=result, steps=records)


def graph_episode(out: Path) -> EpisodeRecord:
    """The showcase episode: injected HTML, a screenshot, a graph passed node by node."""
    shot = out / SCREENSHOT
    shot.parent.mkdir(parents=True, exist_ok=True)
    shot.write_bytes(png_bytes())
    result = EpisodeResult(
        run_id=RUN_ID,
        suite="tests/site",
        task_id="graph-task",
        tags=["files", "<hard>"],
        agent="alpha",
        model="m-1",
        termination_reason=TerminationReason.AGENT_COMPLETE,
        success=False,
        score=0.75,
        completeness=0.75,
        steps=3,
        action_errors=1,
        tokens_in=1200,
        tokens_out=345,
        cost_usd=0.012,
        error="agent gave up on <sink>",
        description=INJECTED_DESCRIPTION,
        graph_json=json.dumps(GRAPH),
        setup_output=SETUP_OUTPUT,
        conversation_json=json.dumps([m.model_dump(exclude_defaults=True) for m in CONVERSATION]),
        started_at=BASE_TIME,
        finished_at=BASE_TIME + timedelta(seconds=42),
    )
    passed = [[0], [0, 1], [0, 1, 2]]
    calls = [
        StepRecord(
            episode_id=result.episode_id,
            run_id=RUN_ID,
            task_id="graph-task",
            agent="alpha",
            step=index,
            env="box",
            action="write_file",
            arguments_json=json.dumps({"path": "a.txt", "content": f"x<{index}>"}),
            result="ok" if index != 1 else "",
            error="permission denied: <a.txt>" if index == 1 else None,
            agent_message=INJECTED_MESSAGE if index == 0 else f"step {index}",
            observation="$ ls\n<nothing>" if index == 0 else None,
            screenshot_path=SCREENSHOT if index == 0 else None,
            graph_passed=passed[index],
        )
        for index in range(3)
    ]
    return EpisodeRecord(result=result, steps=calls)


@dataclass
class SiteDataset:
    """The dataset's directory and the ids the tests look for."""

    out: Path
    graph_episode_id: str
    episode_ids: list[str]


def write_dataset(out: Path) -> SiteDataset:
    """Write the dataset into ``out`` with the real sink."""
    showcase = graph_episode(out)
    others = [
        episode("t-one", "beta", steps=2, success=True, tags=("files", "easy")),
        episode("t-two", "beta", steps=10, success=False, tags=("shell",)),
        episode("t-one", "gamma", steps=9, success=True, model="m-2", cost=0.5, tags=("files",)),
        episode("t-two", "gamma", steps=1, success=True, model="m-2", cost=0.3, tags=("shell",)),
    ]
    ResultSink(out, RUN_ID).write([showcase, *others])
    write_manifest(
        out,
        RunManifest(
            run_id=RUN_ID,
            suite="tests/site",
            suite_name=SUITE_NAME,
            agents=["alpha", "beta", "gamma"],
            crabray_version="test",
        ),
    )
    return SiteDataset(
        out=out,
        graph_episode_id=showcase.result.episode_id,
        episode_ids=[showcase.result.episode_id, *(r.result.episode_id for r in others)],
    )


@pytest.fixture
def dataset(tmp_path: Path) -> SiteDataset:
    return write_dataset(tmp_path / "out")


OLDER_RUN_ID = "20261122-101500-0ld0ld"
HOSTILE_TASK = "</script><script>window.__pwned = 6</script>"


def write_older_run(out: Path) -> None:
    """An earlier run of the same suite: beta failed t-one then, gamma had not solved t-two,
    and a task with markup in its id that the newer run does not have."""
    earlier = BASE_TIME - timedelta(days=1)
    ResultSink(out, OLDER_RUN_ID).write(
        [
            episode("t-one", "beta", steps=3, success=False, run_id=OLDER_RUN_ID),
            episode("t-two", "beta", steps=3, success=False, run_id=OLDER_RUN_ID),
            episode("t-one", "gamma", steps=3, success=True, model="m-2", run_id=OLDER_RUN_ID),
            episode("t-two", "gamma", steps=3, success=False, model="m-2", run_id=OLDER_RUN_ID),
            episode(HOSTILE_TASK, "beta", steps=1, success=True, run_id=OLDER_RUN_ID),
        ]
    )
    write_manifest(
        out,
        RunManifest(
            run_id=OLDER_RUN_ID,
            suite="tests/site",
            suite_name=SUITE_NAME,
            agents=["beta", "gamma"],
            created_at=earlier,
            crabray_version="test",
        ),
    )


# The browser the site's browser tests drive: Debian's chromium, by Playwright.
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


_VOID = frozenset(
    {"area", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "wbr"}
)


class _ElementText(HTMLParser):
    """Collects the text inside the element whose ``id`` is given (unescaped, tags dropped)."""

    def __init__(self, element_id: str) -> None:
        super().__init__(convert_charrefs=True)
        self.element_id = element_id
        self.depth = 0
        self.found = False
        self.parts: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in _VOID:
            return
        if self.depth:
            self.depth += 1
        elif not self.found and dict(attrs).get("id") == self.element_id:
            self.found, self.depth = True, 1

    def handle_endtag(self, tag: str) -> None:
        if self.depth and tag not in _VOID:
            self.depth -= 1

    def handle_data(self, data: str) -> None:
        if self.depth:
            self.parts.append(data)


def element_text(html: str, element_id: str) -> str | None:
    """The text of the element ``id="element_id"`` of a page, whitespace collapsed; None
    when the page has no such element."""
    parser = _ElementText(element_id)
    parser.feed(html)
    if not parser.found:
        return None
    return re.sub(r"\s+", " ", "".join(parser.parts)).strip()
