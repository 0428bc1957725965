"""``build_site`` on a dataset written by the real sink: files, escaping, graphs, plots."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from crabray.core.errors import ResultsError
from crabray.core.result import CheckpointScore, TerminationReason
from crabray.results import ResultSink
from crabray.results.site import build_site
from crabray.results.site._assets import EPISODE_SCRIPT
from crabray.results.site._data import load, resolve_screenshot
from crabray.results.site._graph import Graph, GraphFormatError, graph_svg, layers, parse_graph
from crabray.results.site._plots import pareto_front, wilson_interval
from tests.site.conftest import (
    INJECTED_DESCRIPTION,
    INJECTED_MESSAGE,
    RUN_ID,
    SCREENSHOT,
    SiteDataset,
    episode,
    png_bytes,
)


def _page(site: Path, episode_id: str) -> str:
    return (site / "episodes" / f"{episode_id}.html").read_text(encoding="utf-8")


def test_writes_index_and_one_page_per_episode(dataset: SiteDataset, tmp_path: Path) -> None:
    site = tmp_path / "site"
    index = build_site(dataset.out, site)
    assert index == site / "index.html"
    pages = sorted(path.stem for path in (site / "episodes").glob("*.html"))
    assert pages == sorted(dataset.episode_ids)
    text = index.read_text(encoding="utf-8")
    for episode_id in dataset.episode_ids:
        assert f'href="episodes/{episode_id}.html"' in text
    for table_id in (
        "leaderboard",
        "episodes",
        "breakdown-by-tag",
        "breakdown-by-termination-reason",
    ):
        assert f'id="{table_id}"' in text
    assert text.count('class="sortable"') == 4


def test_index_embeds_three_svg_plots_and_nothing_external(
    dataset: SiteDataset, tmp_path: Path
) -> None:
    text = build_site(dataset.out, tmp_path / "site").read_text(encoding="utf-8")
    for figure_id in ("plot-success", "plot-cost", "plot-steps"):
        figure = re.search(rf'<figure id="{figure_id}"[^>]*><svg.*?</svg>', text, re.DOTALL)
        assert figure, figure_id
    # Every id is unique although three matplotlib figures share glyphs.
    ids = re.findall(r'\bid="([^"]+)"', text)
    assert len(ids) == len(set(ids))
    # Nothing loads from elsewhere: no remote src/href, no stylesheet or script file.
    assert not re.search(r'(?:src|href)="(?:https?:)?//', text)
    assert '<link rel="stylesheet"' not in text
    assert "<script src" not in text
    assert "Content-Security-Policy" in text


def test_build_is_deterministic(dataset: SiteDataset, tmp_path: Path) -> None:
    first = build_site(dataset.out, tmp_path / "a").read_text(encoding="utf-8")
    second = build_site(dataset.out, tmp_path / "b").read_text(encoding="utf-8")
    assert first == second


def test_untrusted_text_is_escaped(dataset: SiteDataset, tmp_path: Path) -> None:
    site = tmp_path / "site"
    build_site(dataset.out, site)
    page = _page(site, dataset.graph_episode_id)
    assert "window.__pwned" in page  # the text is shown...
    assert "<script>window.__pwned" not in page  # ...but never as markup
    assert "<img src=x" not in page and "<i>edit</i>" not in page
    assert "&lt;script&gt;window.__pwned = 1&lt;/script&gt;" in page
    assert "&lt;/pre&gt;&lt;script&gt;window.__pwned = 3" in page
    assert '<span class="tag">&lt;hard&gt;</span>' in page
    assert "permission denied: &lt;a.txt&gt;" in page
    # The only script on any page is the site's own: the index's, and on episode pages the
    # one that moves between episodes by key.
    assert (site / "index.html").read_text(encoding="utf-8").count("<script") == 1
    for path in (site / "episodes").glob("*.html"):
        text = path.read_text(encoding="utf-8")
        assert text.count("<script") == 1 and f"<script>{EPISODE_SCRIPT}</script>" in text, path
    assert INJECTED_DESCRIPTION not in page and INJECTED_MESSAGE not in page


def test_episode_page_shows_task_result_and_every_step(
    dataset: SiteDataset, tmp_path: Path
) -> None:
    site = tmp_path / "site"
    build_site(dataset.out, site)
    page = _page(site, dataset.graph_episode_id)
    assert "<h1>graph-task</h1>" in page
    assert len(re.findall(r'<section class="step" id="step-\d+">', page)) == 3
    for label in ("ended by", "completeness", "tokens in", "cost", "wall time (s)"):
        assert f"<dt>{label}</dt>" in page
    assert "<dt>cost</dt><dd>$0.012</dd>" in page
    assert "agent_complete" in page and "agent gave up on &lt;sink&gt;" in page
    # Arguments as pretty JSON, keys sorted; the failed call's error shown as one.
    assert "&#34;content&#34;: &#34;x&lt;0&gt;&#34;,\n  &#34;path&#34;: &#34;a.txt&#34;" in page
    assert '<div class="call failed">' in page
    assert "$ ls\n&lt;nothing&gt;" in page
    assert "../index.html" in page


def test_screenshots_are_copied_and_linked_relatively(dataset: SiteDataset, tmp_path: Path) -> None:
    site = tmp_path / "site"
    build_site(dataset.out, site)
    copied = site / "files" / SCREENSHOT
    assert copied.read_bytes() == png_bytes()
    assert f'src="../files/{SCREENSHOT}"' in _page(site, dataset.graph_episode_id)


def test_graph_progress_marks_passed_nodes_per_step(dataset: SiteDataset, tmp_path: Path) -> None:
    site = tmp_path / "site"
    build_site(dataset.out, site)
    page = _page(site, dataset.graph_episode_id)
    graphs = re.findall(r'<svg class="graph".*?</svg>', page, re.DOTALL)
    assert len(graphs) == 4  # one after each step, then the final graph (the grading)
    passed = [re.findall(r'data-index="(\d)" data-passed="true"', svg) for svg in graphs]
    assert passed == [["0"], ["0", "1"], ["0", "1", "2"], ["0", "1", "2"]]
    assert "✓ path_exists(path=&#x27;a.txt&#x27;)" in graphs[-1]
    assert graphs[-1].count("<polygon") == 4  # one arrowhead per edge
    assert "3 of 4 evaluators passed" in page


def test_a_missing_screenshot_is_reported_on_the_page(tmp_path: Path) -> None:
    out = tmp_path / "out"
    record = episode("t", "a", steps=1, success=True)
    record.steps[0].screenshot_path = "screenshots/gone.png"
    escaping = episode("u", "a", steps=1, success=True)
    escaping.steps[0].screenshot_path = "../../etc/passwd"
    ResultSink(out, RUN_ID).write([record, escaping])
    site = tmp_path / "site"
    build_site(out, site)
    assert "screenshot missing: screenshots/gone.png" in _page(site, record.result.episode_id)
    assert "screenshot missing: ../../etc/passwd" in _page(site, escaping.result.episode_id)
    assert not (site / "files").exists()


def test_only_the_requested_run(dataset: SiteDataset, tmp_path: Path) -> None:
    other = episode("t-other", "delta", steps=1, success=True, run_id="20261124-000000-abcdef")
    ResultSink(dataset.out, "20261124-000000-abcdef").write([other])
    site = tmp_path / "site"
    text = build_site(dataset.out, site, run_id=RUN_ID).read_text(encoding="utf-8")
    assert "delta" not in text
    assert not (site / "episodes" / f"{other.result.episode_id}.html").exists()
    everything = build_site(dataset.out, tmp_path / "all").read_text(encoding="utf-8")
    assert "delta" in everything


def test_empty_dataset_gives_a_page_saying_so(tmp_path: Path) -> None:
    (tmp_path / "out").mkdir()
    text = build_site(tmp_path / "out", tmp_path / "site").read_text(encoding="utf-8")
    assert 'id="no-episodes"' in text


def test_refuses_to_write_into_the_results_directory(dataset: SiteDataset) -> None:
    with pytest.raises(ResultsError, match="cannot be written into the results directory"):
        build_site(dataset.out, dataset.out)


def test_screenshot_paths_must_stay_inside_the_output_directory(tmp_path: Path) -> None:
    for bad in ("/etc/passwd", "../x.png", "a/../../x.png", ""):
        with pytest.raises(ResultsError):
            resolve_screenshot(tmp_path, bad)
    assert resolve_screenshot(tmp_path, "a/b.png") == (tmp_path / "a" / "b.png").resolve()


def test_layers_follow_topological_generations() -> None:
    graph = Graph(labels=list("abcde"), edges=[(0, 1), (0, 2), (1, 3), (2, 3), (3, 4), (0, 4)])
    assert layers(graph) == [[0], [1, 2], [3], [4]]
    cyclic = Graph(labels=list("abc"), edges=[(0, 1), (1, 2), (2, 1)])
    assert layers(cyclic) == [[0], [1, 2]]
    assert graph_svg(cyclic, []).count('class="node"') == 3


def test_parse_graph_rejects_malformed_json() -> None:
    assert parse_graph("") is None
    assert parse_graph(float("nan")) is None  # rows written before the column existed
    assert parse_graph(json.dumps({"nodes": ["a"], "edges": []})) == Graph(["a"], [])
    for bad in ("{", json.dumps({"edges": []}), json.dumps({"nodes": ["a"], "edges": [[0, 5]]})):
        with pytest.raises(GraphFormatError):
            parse_graph(bad)


def test_a_malformed_graph_is_reported_not_hidden(tmp_path: Path) -> None:
    out = tmp_path / "out"
    record = episode("t", "a", steps=1, success=True, graph_json='{"nodes": 3}')
    ResultSink(out, RUN_ID).write([record])
    build_site(out, tmp_path / "site")
    page = _page(tmp_path / "site", record.result.episode_id)
    assert "evaluator graph not drawn" in page


def test_pareto_front_and_wilson_interval() -> None:
    points = [(0.0, 0.5), (0.01, 0.0), (0.4, 1.0), (0.5, 0.9), (0.2, 0.5)]
    assert pareto_front(points) == [0, 2]
    low, high = wilson_interval(0, 10)
    assert low == 0.0 and high == pytest.approx(0.2775, abs=1e-4)
    low, high = wilson_interval(5, 10)
    assert (low, high) == pytest.approx((0.2366, 0.7634), abs=1e-4)
    assert wilson_interval(0, 0) == (0.0, 1.0)


def test_loaded_steps_are_grouped_by_episode(dataset: SiteDataset) -> None:
    data = load(dataset.out)
    assert len(data.episodes) == 5
    steps = data.steps_of(dataset.graph_episode_id)
    assert list(steps["step"]) == [0, 1, 2]
    assert data.steps_of("nope").empty
    assert data.episode("nope") is None


def test_episode_record_roundtrip_keeps_graph(dataset: SiteDataset) -> None:
    row = load(dataset.out).episode(dataset.graph_episode_id)
    assert row is not None
    graph = parse_graph(row["graph_json"])
    assert graph is not None and len(graph.labels) == 4


def test_infra_failures_and_repeated_epochs_still_render(tmp_path: Path) -> None:
    out = tmp_path / "out"
    broken = episode("t", "flaky", steps=0, success=False)
    broken.result.termination_reason = TerminationReason.ENV_ERROR
    repeated = [
        episode("t", "steady", steps=2, success=epoch == 0, epoch=epoch) for epoch in (0, 1)
    ]
    ResultSink(out, RUN_ID).write([broken, *repeated])
    text = build_site(out, tmp_path / "site").read_text(encoding="utf-8")
    assert '<figure id="plot-success" data-points=' in text
    assert "flaky" in text and "env_error" in text
    assert "The agent took no step." in _page(tmp_path / "site", broken.result.episode_id)


def test_a_large_dataset_lists_only_the_most_recent_episodes(tmp_path: Path) -> None:
    from datetime import UTC, datetime, timedelta

    from crabray.core.result import EpisodeRecord, EpisodeResult, TerminationReason
    from crabray.results import ResultSink
    from crabray.results.site import build_site

    start = datetime(2026, 1, 1, tzinfo=UTC)
    records = [
        EpisodeRecord(
            result=EpisodeResult(
                run_id="big",
                suite="s",
                task_id=f"t{i:02d}",
                agent="a",
                termination_reason=TerminationReason.SUCCESS
                if i % 2
                else TerminationReason.MAX_STEPS,
                success=bool(i % 2),
                finished_at=start + timedelta(minutes=i),
            )
        )
        for i in range(12)
    ]
    ResultSink(tmp_path / "out", "big").write(records)
    index = build_site(tmp_path / "out", tmp_path / "site", max_listed=5)
    pages = sorted(p.stem for p in (tmp_path / "site" / "episodes").glob("*.html"))
    newest = sorted(r.result.episode_id for r in records[-5:])
    assert pages == newest, "pages only for the five most recent episodes"
    html = index.read_text()
    assert "Listing the 5 most recent of 12 episodes" in html
    listing = html.split('id="episodes-section"', 1)[1]
    assert listing.count('href="episodes/') == 5
    # The matrix's drill-downs link the five listed episodes and name the other seven.
    assert html.count('href="episodes/') == 10
    assert ">12<" in html, "the leaderboard still counts all 12"


def test_episode_page_lists_the_checkpoints_a_scorer_graded(tmp_path: Path) -> None:
    out = tmp_path / "out"
    graded = episode(
        "t-graded",
        "beta",
        steps=1,
        success=False,
        checkpoints=[CheckpointScore(total=1, result=1), CheckpointScore(total=2, result=0)],
    )
    plain = episode("t-plain", "beta", steps=1, success=True)
    ResultSink(out, RUN_ID).write([graded, plain])
    site = tmp_path / "site"
    build_site(out, site)
    page = _page(site, graded.result.episode_id)
    assert '<h3>Checkpoints <span class="muted">(1 of 3 points)</span></h3>' in page
    assert "<tr><td>1</td><td>1 / 1</td></tr><tr><td>2</td><td>0 / 2</td></tr>" in page
    assert 'id="checkpoints"' not in _page(site, plain.result.episode_id)
