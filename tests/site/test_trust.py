"""The grader's trust on the site and in the viewer: the leaderboard's verified figures
(the board's own numbers) and, on each episode page, whether its grade is verified and why not."""

from __future__ import annotations

import html
import re
import threading
import urllib.request
from pathlib import Path

import pytest

from crabray.results import ResultSink, leaderboard, read_episodes
from crabray.results.site import build_site, make_server
from tests.site.conftest import episode

WHY = "ssh sandbox: the login's dotfiles run with every command <b>bold</b>"


@pytest.fixture
def out(tmp_path: Path) -> Path:
    """alpha: a trusted pass, an untrusted pass (with its reason), a pass of unknown
    trust and a trusted failure; beta: one trusted pass."""
    records = [
        episode("t-trusted", "alpha", steps=1, success=True, grader_trusted=True),
        episode(
            "t-untrusted",
            "alpha",
            steps=1,
            success=True,
            grader_trusted=False,
            grader_untrusted_reason=WHY,
        ),
        episode("t-unknown", "alpha", steps=1, success=True),
        episode("t-fail", "alpha", steps=1, success=False, grader_trusted=True),
        episode("t-trusted", "beta", steps=1, success=True, grader_trusted=True),
    ]
    folder = tmp_path / "out"
    ResultSink(folder, records[0].result.run_id).write(records)
    return folder


def _board(page: str) -> dict[str, dict[str, str]]:
    """The leaderboard table of a page: per agent, each cell's text by header."""
    table = re.search(r'<table class="sortable" id="leaderboard">.*?</table>', page, re.S)
    assert table is not None
    headers = re.findall(r'<th scope="col" data-column="([^"]+)"', table.group(0))
    rows = {}
    for row in re.findall(r"<tr>(.*?)</tr>", table.group(0), re.S):
        cells = [
            html.unescape(re.sub(r"<[^>]+>", "", c)).strip()
            for c in re.findall(r"<td[^>]*>(.*?)</td>", row, re.S)
        ]
        if cells:
            rows[cells[0]] = dict(zip(headers, cells, strict=True))
    return rows


def _grade_lines(site: Path) -> dict[str, str]:
    """Per task, the line of its episode page that says whether its grade is verified."""
    lines = {}
    for page in (site / "episodes").glob("*.html"):
        text = page.read_text(encoding="utf-8")
        task = re.search(r"<h1>(.*?)</h1>", text)
        grade = re.search(r'<p id="grade" class="([^"]+)">(.*?)</p>', text, re.S)
        assert task is not None and grade is not None
        lines[task.group(1)] = f"{grade.group(1)}: {html.unescape(grade.group(2))}"
    return lines


def test_the_site_shows_the_boards_verified_figures(out: Path, tmp_path: Path) -> None:
    site = tmp_path / "site"
    board = _board(build_site(out, site).read_text(encoding="utf-8"))
    alpha = board["alpha"]
    assert (alpha["success_rate"], alpha["verified_success_rate"]) == ("0.750", "0.250")
    assert (alpha["unverified_passes"], alpha["unknown_trust_passes"]) == ("1", "1")
    assert board["beta"]["verified_success_rate"] == "1.000"
    # The very numbers of the leaderboard (one computation, not a second one for the site).
    counted = leaderboard(read_episodes(out), ("agent", "model", "suite")).set_index("agent")
    assert float(alpha["verified_success_rate"]) == counted.loc["alpha", "verified_success_rate"]
    page = (site / "index.html").read_text(encoding="utf-8")
    for label in ("Verified success rate", "Unverified passes", "Passes of unknown trust"):
        assert f">{label}</th>" in page, label


def test_episode_pages_say_whether_the_grade_is_verified(out: Path, tmp_path: Path) -> None:
    site = tmp_path / "site"
    build_site(out, site)
    lines = _grade_lines(site)
    assert lines["t-untrusted"] == f"warn: grade unverified: {WHY}"
    assert "&lt;b&gt;bold&lt;/b&gt;" in next(  # the reason is row text: escaped
        p.read_text(encoding="utf-8")
        for p in (site / "episodes").glob("*.html")
        if "t-untrusted" in p.read_text(encoding="utf-8")
    )
    assert lines["t-trusted"].startswith("muted: grade verified")
    assert lines["t-fail"].startswith("muted: grade verified")
    assert lines["t-unknown"].startswith("muted: grade unknown")


def test_the_viewer_serves_the_same_figures(out: Path) -> None:
    server = make_server(out, port=0)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        url = f"http://127.0.0.1:{server.server_port}/"
        with urllib.request.urlopen(url, timeout=30) as response:
            page = response.read().decode("utf-8")
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)
    alpha = _board(page)["alpha"]
    assert (alpha["verified_success_rate"], alpha["unverified_passes"]) == ("0.250", "1")
