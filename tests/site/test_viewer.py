"""What the viewer adds to the site, checked on the built files: the conversation, the task x
agent matrix, run pages and the comparison's data, the suite's title, headers and costs, and
that hostile text in all of them stays text."""

from __future__ import annotations

import json
import re
from html import unescape
from pathlib import Path

import pandas as pd

from crabray.results import read_manifest, write_manifest
from crabray.results.site import build_site
from crabray.results.site._html import human
from crabray.results.site._plots import cost_plot
from tests.site.conftest import (
    HOSTILE_TASK,
    INJECTED_REPLY,
    INJECTED_TOOL_OUTPUT,
    OLDER_RUN_ID,
    RUN_ID,
    SUITE_NAME,
    SiteDataset,
    write_older_run,
)

MINUS = "\N{MINUS SIGN}"  # matplotlib's negative tick labels


def _episode_page(site: Path, episode_id: str) -> str:
    return (site / "episodes" / f"{episode_id}.html").read_text(encoding="utf-8")


def test_conversation_is_shown_beside_the_steps_and_escaped(
    dataset: SiteDataset, tmp_path: Path
) -> None:
    site = tmp_path / "site"
    build_site(dataset.out, site)
    page = _episode_page(site, dataset.graph_episode_id)
    conversation = page.split('<section id="conversation">', 1)[1].split('<section id="steps">')[0]
    assert conversation.count('<div class="message role-') == 5
    assert '<code class="tool-name">write_file</code>' in conversation
    assert "m-1 · 300 in · 40 out tokens · $0.00014 · 1.25 s" in conversation
    assert "1 image attached" in conversation
    assert "answers call-1" in conversation
    # Hostile model output and tool output are text, never markup.
    for hostile in (INJECTED_REPLY, INJECTED_TOOL_OUTPUT):
        assert hostile not in page
        assert unescape(hostile) in unescape(page)
    assert "&lt;script&gt;window.__pwned = 5&lt;/script&gt;" in conversation
    assert "<img src=x" not in page
    assert page.count("<script") == 1  # the site's own, which moves between episodes by key


def test_an_agent_without_a_model_has_no_conversation_section(
    dataset: SiteDataset, tmp_path: Path
) -> None:
    site = tmp_path / "site"
    build_site(dataset.out, site)
    other = next(i for i in dataset.episode_ids if i != dataset.graph_episode_id)
    page = _episode_page(site, other)
    assert 'id="conversation"' not in page and 'id="steps"' in page


def test_title_description_headers_and_costs(dataset: SiteDataset, tmp_path: Path) -> None:
    index = build_site(dataset.out, tmp_path / "site").read_text(encoding="utf-8")
    assert f"<title>{SUITE_NAME}</title>" in index
    assert f'<h1 id="title">{SUITE_NAME}</h1>' in index
    assert '<p id="description">suite tests/site</p>' in index
    headers = re.findall(r'<th scope="col" data-column="[^"]+"[^>]*>([^<]+)</th>', index)
    assert {"Success rate", "Cost per success", "Ended by", "Wall time (s)"} <= set(headers)
    assert not [h for h in headers if "_" in h], headers
    assert ">$0.80<" in index  # gamma's two episodes: $0.50 + $0.30
    custom = build_site(dataset.out, tmp_path / "custom", title="Nightly <sweep>", description="")
    text = custom.read_text(encoding="utf-8")
    assert '<h1 id="title">Nightly &lt;sweep&gt;</h1>' in text
    assert 'id="description"' not in text


def test_human_headers() -> None:
    assert human("success_rate") == "Success rate"
    assert human("mean_wall_time_sec") == "Mean wall time (s)"
    assert human("pass@2") == "Pass@2"
    assert human("some_new_column") == "Some new column"


def test_cost_axis_starts_at_zero_and_reads_in_dollars() -> None:
    def ticks(costs: list[float]) -> list[str]:
        board = pd.DataFrame(  # leaderboard rows: one graded episode each
            {
                "agent": ["a", "b"],
                "model": [None, None],
                "episodes": [1, 1],
                "success_rate": [1.0, 0.0],
                "cost_usd": costs,
            }
        )
        plot = cost_plot(board)
        assert plot is not None
        svg = plot.svg
        return [t for t in re.findall(r"<!-- (.*?) -->", svg) if t.startswith(("$", "-", MINUS))]

    free = ticks([0.0, 0.0])
    assert free[0] == "$0.00" and all(not t.startswith(("-", MINUS)) for t in free), free
    cheap = ticks([0.00014, 0.0002])
    assert cheap[0] == "$0.00" and "$0.0001" in cheap, cheap


def test_matrix_has_a_cell_per_task_and_agent_with_drill_downs(
    dataset: SiteDataset, tmp_path: Path
) -> None:
    index = build_site(dataset.out, tmp_path / "site").read_text(encoding="utf-8")
    matrix = index.split('<table id="matrix">', 1)[1].split("</table>", 1)[0]
    columns = re.findall(r'<th scope="col">([^<]*)</th>', matrix)
    assert columns == ["Task", "alpha / m-1", "beta", "gamma / m-2"]
    rows = re.findall(r'<th scope="row">([^<]*)</th>', matrix)
    assert rows == ["graph-task", "t-one", "t-two"]
    assert matrix.count('class="matrix-cell"') == 5
    assert matrix.count('class="matrix-cell empty"') == 4
    assert "hsl(120, 65%, 82%)" in matrix and "hsl(0, 65%, 82%)" in matrix
    drill = index.split('<div class="drill" id="cell-0-0">', 1)[1].split("</div>", 1)[0]
    assert f'href="episodes/{dataset.graph_episode_id}.html"' in drill
    assert "agent_complete" in drill and "score 0.75" in drill


def test_run_pages_and_comparison_data(dataset: SiteDataset, tmp_path: Path) -> None:
    write_older_run(dataset.out)
    site = tmp_path / "site"
    index = build_site(dataset.out, site).read_text(encoding="utf-8")
    picker = index.split('<nav id="run-picker"', 1)[1].split("</nav>", 1)[0]
    runs = re.findall(r'data-run="([^"]+)"', picker)
    assert runs == [RUN_ID, OLDER_RUN_ID], "newest first"
    assert 'href="compare.html"' in picker
    older_page = (site / f"run-{OLDER_RUN_ID}.html").read_text(encoding="utf-8")
    assert HOSTILE_TASK not in index + older_page
    assert '<th scope="row">&lt;/script&gt;&lt;script&gt;window.__pwned = 6' in index
    older = (site / f"run-{OLDER_RUN_ID}.html").read_text(encoding="utf-8")
    # Each header names the runs its numbers count: suite and creation time from the manifests.
    older_run = f"{OLDER_RUN_ID} ({SUITE_NAME}, created 2026-11-22 07:53 UTC)"
    assert f'<p class="muted" id="scope">run {older_run}</p>' in older
    assert '<p class="muted" id="episode-count">5 episodes</p>' in older
    scope = index.split('<p class="muted" id="scope">', 1)[1].split("</p>", 1)[0]
    assert scope.startswith(
        f"per task the latest run&#39;s episodes: runs {RUN_ID} ({SUITE_NAME}, created "
    )
    assert scope.endswith(f"UTC), {older_run}")
    compare = (site / "compare.html").read_text(encoding="utf-8")
    data_text = compare.split('<script type="application/json" id="compare-data">', 1)[1]
    data_text = data_text.split("</script>", 1)[0]
    assert "</script><script>" not in data_text and "\\u003c/script\\u003e" in data_text
    data = json.loads(data_text)
    assert data["runs"] == [RUN_ID, OLDER_RUN_ID]
    assert data["scores"][OLDER_RUN_ID]["t-one · beta"] == [0.0, 0, 1]
    assert data["scores"][RUN_ID]["t-one · beta"] == [1.0, 1, 1]
    assert f"{HOSTILE_TASK} · beta" in data["scores"][OLDER_RUN_ID]
    assert compare.count("<script") == 2  # the site's script and the inert JSON data block


def test_the_suites_own_description_comes_first(dataset: SiteDataset, tmp_path: Path) -> None:
    manifest = read_manifest(dataset.out, RUN_ID)
    described = manifest.model_copy(update={"suite_description": "Edits <files> & reports."})
    write_manifest(dataset.out, described)
    index = build_site(dataset.out, tmp_path / "site").read_text(encoding="utf-8")
    assert '<p id="description">Edits &lt;files&gt; &amp; reports.</p>' in index
