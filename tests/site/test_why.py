"""What the site gives for finding out why an episode failed, checked on the built files:
an episode page that opens with its verdict, whose doing it is and the cause, the episode
list's filter data, previous and next, the episodes of the same task to open side by side,
evaluator nodes in full, the verdict of a task graded by its scorer, the raw conversation,
instructions on error rows and suite names in the header."""

from __future__ import annotations

import json
import re
from html import unescape
from pathlib import Path

from crabray.core.result import CheckpointScore, TerminationReason
from crabray.core.task import graded_by_scorer
from crabray.results import ResultSink, RunManifest, write_manifest
from crabray.results.site import build_site
from crabray.results.site._data import suite_label
from crabray.results.site._why import SCORER_NODE
from tests.site.conftest import RUN_ID, SiteDataset, element_text, episode
from tests.site.test_viewer import _episode_page

LONG_NODE = (
    "file_contains(path='reports/quarterly/summary.md', text='Revenue grew 12% over the quarter')"
)


def _rows(index: str) -> list[dict[str, str]]:
    """The episode list's rows as their data attributes, in the listing's order."""
    body = index.split('<table class="sortable" id="episodes">', 1)[1].split("</tbody>", 1)[0]
    return [
        {name: unescape(value) for name, value in re.findall(r'data-([a-z]+)="([^"]*)"', tr)}
        for tr in re.findall(r"<tr( data-[^>]*)>", body)
    ]


def test_episode_rows_carry_what_the_filters_and_search_read(
    dataset: SiteDataset, tmp_path: Path
) -> None:
    index = build_site(dataset.out, tmp_path / "site").read_text(encoding="utf-8")
    rows = _rows(index)
    assert [(r["task"], r["agent"]) for r in rows] == [
        ("graph-task", "alpha"),
        ("t-one", "beta"),
        ("t-two", "beta"),
        ("t-one", "gamma"),
        ("t-two", "gamma"),
    ]
    showcase = rows[0]
    assert showcase["outcome"] == "fail" and showcase["attribution"] == "agent"
    assert showcase["ended"] == "agent_complete"
    assert [r["outcome"] for r in rows] == ["fail", "pass", "fail", "pass", "pass"]
    # An episode has several tags: the attribute is a JSON list, markup in a tag stays text.
    assert json.loads(showcase["tag"]) == ["files", "<hard>"]
    assert json.loads(rows[1]["tag"]) == ["files", "easy"]
    # The error and the instruction are searched though the table does not show them.
    assert "agent gave up on <sink>" in showcase["search"]
    assert "fix <b>config</b> & report." in showcase["search"]
    assert "do t-two." in rows[2]["search"] and rows[2]["ended"] == "max_steps"
    # Hostile text stays text inside the attribute, and the form starts hidden until the
    # script that makes it work shows it.
    assert "<script>window.__pwned" not in index
    assert '<form id="episode-filter" class="filters" role="search" hidden>' in index


def test_episode_pages_link_previous_and_next_in_the_listing_order(
    dataset: SiteDataset, tmp_path: Path
) -> None:
    site = tmp_path / "site"
    listed = [
        re.search(r'href="episodes/([^"]+)\.html"', tr).group(1)  # type: ignore[union-attr]
        for tr in build_site(dataset.out, site)
        .read_text(encoding="utf-8")
        .split('id="episodes">', 1)[1]
        .split("</tbody>", 1)[0]
        .split("<tr data-")[1:]
    ]
    walked, current = [], listed[0]
    while True:
        walked.append(current)
        page = _episode_page(site, current)
        found = re.search(r'id="next-episode" rel="next" href="([^"]+)\.html"', page)
        if found is None:
            assert "last episode" in page
            break
        back = _episode_page(site, found.group(1))
        assert f'id="previous-episode" rel="prev" href="{current}.html"' in back
        current = found.group(1)
    assert walked == listed
    first = _episode_page(site, listed[0])
    assert "first episode" in first and 'id="previous-episode"' not in first


def test_evaluator_nodes_are_listed_in_full_with_their_arguments(tmp_path: Path) -> None:
    graph = {"nodes": ["path_exists(path='a.txt')", LONG_NODE], "edges": [[0, 1]]}
    record = episode("report", "alpha", steps=1, success=False, graph_json=json.dumps(graph))
    record.steps[0].graph_passed = [0]
    out = tmp_path / "out"
    ResultSink(out, RUN_ID).write([record])
    site = tmp_path / "site"
    build_site(out, site)
    page = _episode_page(site, record.result.episode_id)
    nodes = page.split('<ol class="graph-nodes" id="graph-nodes" start="0">', 1)[1]
    nodes = unescape(nodes.split("</ol>", 1)[0])
    assert re.findall(r'<li class="(\w+)"><code>([^<]+)</code>', nodes) == [
        ("passed", "path_exists(path='a.txt')"),
        ("pending", LONG_NODE),
    ]
    assert "final evaluator graph: 1 of 2 evaluators passed" in page
    # The boxes widen for the long label: its arguments are on the drawing too.
    svg = unescape(page.split('<svg class="graph"', 1)[1].split("</svg>", 1)[0])
    assert "file_contains(path='reports/quarterly/summary.md'" in svg


def test_a_task_graded_by_its_scorer_says_so_instead_of_zero_evaluators(
    tmp_path: Path,
) -> None:
    assert graded_by_scorer.label == SCORER_NODE
    scorer_graph = json.dumps({"nodes": [graded_by_scorer.label], "edges": []})
    solved = episode("folder-task", "alpha", steps=2, success=True, graph_json=scorer_graph)
    solved.result.termination_reason = TerminationReason.AGENT_COMPLETE
    out = tmp_path / "out"
    ResultSink(out, RUN_ID).write([solved])
    site = tmp_path / "site"
    build_site(out, site)
    page = _episode_page(site, solved.result.episode_id)
    verdict = re.search(r'<p id="verdict" class="(\w+)">([^<]+)</p>', page)
    assert verdict is not None
    assert verdict.groups() == (
        "ok",
        "solved (graded by the task&#39;s scorer after the agent finished, score 1.00); "
        "ended by agent_complete",
    )
    assert "evaluators passed" not in page and "graded_by_scorer" not in page


def test_the_raw_conversation_is_in_a_collapsed_section(
    dataset: SiteDataset, tmp_path: Path
) -> None:
    site = tmp_path / "site"
    build_site(dataset.out, site)
    page = _episode_page(site, dataset.graph_episode_id)
    raw = page.split('<details class="logs" id="raw-conversation">', 1)[1].split("</details>")[0]
    shown = json.loads(unescape(raw.split('<pre class="raw">', 1)[1].split("</pre>", 1)[0]))
    assert [m["role"] for m in shown] == ["system", "user", "user", "assistant", "tool"]
    assert shown[3]["tool_calls"][0]["name"] == "write_file"
    other = next(i for i in dataset.episode_ids if i != dataset.graph_episode_id)
    assert 'id="raw-conversation"' not in _episode_page(site, other)


def test_an_error_row_without_an_instruction_shows_the_tasks(tmp_path: Path) -> None:
    """Rows written before the driver recorded the instruction on env and setup errors."""
    done = episode("t-one", "beta", steps=1, success=True)
    broken = episode("t-one", "beta", steps=0, success=False, epoch=1)
    broken.result.description = ""
    broken.result.termination_reason = TerminationReason.ENV_ERROR
    out = tmp_path / "out"
    ResultSink(out, RUN_ID).write([done, broken])
    site = tmp_path / "site"
    build_site(out, site)
    page = _episode_page(site, broken.result.episode_id)
    assert '<pre class="description">Do t-one.</pre>' in page


def test_headers_name_suites_not_absolute_paths(tmp_path: Path) -> None:
    out = tmp_path / "out"
    for run_id, suite, name in (
        ("20261123-075300-aaaaaa", "/home/someone/checkout/tasks/demo", ""),
        ("20261124-075300-bbbbbb", "/srv/suites/desktop", "desktop-suite"),
    ):
        record = episode(f"task-{name or 'demo'}", "beta", steps=1, success=True, run_id=run_id)
        ResultSink(out, run_id).write([record])
        write_manifest(
            out,
            RunManifest(
                run_id=run_id, suite=suite, suite_name=name, agents=["beta"], crabray_version="t"
            ),
        )
    index = build_site(out, tmp_path / "site").read_text(encoding="utf-8")
    header = index.split("<header>", 1)[1].split("</header>", 1)[0]
    assert "/home/someone" not in header and "/srv/suites" not in header
    assert '<p id="description">suites demo, desktop-suite</p>' in header
    assert "20261123-075300-aaaaaa (demo, created" in header
    assert "20261124-075300-bbbbbb (desktop-suite, created" in header
    assert suite_label("", "tasks/demo") == "tasks/demo"
    assert suite_label("", "/a/b/demo/") == "demo"


def test_setup_output_is_folded_and_open_when_setup_failed(tmp_path: Path) -> None:
    ran = episode("t-one", "beta", steps=1, success=True)
    ran.result.setup_output = "[box] run_command(command='make')\nexit code 0\nstdout:\nbuilt"
    failed = episode("t-two", "beta", steps=0, success=False)
    failed.result.termination_reason = TerminationReason.SETUP_ERROR
    failed.result.setup_output = "[box] init_sh\nfailed: /mnt/container/task-setup.log: <missing>"
    older = episode("t-three", "beta", steps=1, success=True)  # no setup output recorded
    out = tmp_path / "out"
    ResultSink(out, RUN_ID).write([ran, failed, older])
    site = tmp_path / "site"
    build_site(out, site)
    folded = _episode_page(site, ran.result.episode_id)
    assert '<details class="logs" id="setup-output"><summary>' in folded
    assert "exit code 0\nstdout:\nbuilt</pre>" in folded
    opened = _episode_page(site, failed.result.episode_id)
    assert '<details class="logs" id="setup-output" open><summary>' in opened
    assert "failed: /mnt/container/task-setup.log: &lt;missing&gt;" in opened
    assert 'id="setup-output"' not in _episode_page(site, older.result.episode_id)


def test_a_long_call_result_is_folded(tmp_path: Path) -> None:
    record = episode("t-one", "beta", steps=2, success=True)
    noisy = "exit code 1\nstdout:\n" + "".join(f"line {i}\n" for i in range(30)) + "stderr:\nboom"
    record.steps[0].result = noisy
    out = tmp_path / "out"
    ResultSink(out, RUN_ID).write([record])
    site = tmp_path / "site"
    build_site(out, site)
    page = _episode_page(site, record.result.episode_id)
    folded = page.split('<details class="output">', 1)[1].split("</details>", 1)[0]
    assert "(34 lines: output, stderr)" in folded and "line 29\nstderr:\nboom" in folded
    assert page.count('<details class="output">') == 1, "the short result stays open"


def _positions(page: str, *ids: str) -> list[int]:
    return [page.index(f'id="{element_id}"') for element_id in ids]


def test_a_failed_episode_opens_with_verdict_attribution_and_cause(
    dataset: SiteDataset, tmp_path: Path
) -> None:
    site = tmp_path / "site"
    build_site(dataset.out, site)
    page = _episode_page(site, dataset.graph_episode_id)
    # The verdict and the cause first, then the transcript (conversation, steps), then
    # the grading, and the metadata last, folded.
    order = _positions(page, "why", "cause", "conversation", "steps", "graph-nodes", "metadata")
    assert order == sorted(order), order
    assert element_text(page, "outcome") == "fail"
    assert element_text(page, "verdict") == "not solved (score 0.75); ended by agent_complete"
    assert element_text(page, "attribution") == (
        "agent the agent's doing: counted in its success rate"
    )
    assert element_text(page, "cause-error") == "error agent gave up on <sink>"
    assert element_text(page, "cause-evaluator") == (
        "evaluator not passed sink on the state after step 3, the agent's last "
        "(3 of 4 evaluators passed)"
    )
    last = element_text(page, "cause-last-step")
    assert last is not None
    assert last.startswith("last step's output step 3: write_file on box")
    assert last.endswith("ok")
    assert '<a href="#step-3">step 3</a>' in page
    assert '<details class="metadata" id="metadata">' in page
    metadata = page.split('<details class="metadata" id="metadata">', 1)[1]
    assert "<dt>cost</dt><dd>$0.012</dd>" in metadata and "<dt>episode id</dt>" in metadata


def test_the_cause_of_a_benchmark_and_an_infrastructure_error(tmp_path: Path) -> None:
    setup = episode("t-setup", "beta", steps=0, success=False)
    setup.result.termination_reason = TerminationReason.SETUP_ERROR
    setup.result.error = "setup action 'run_command' failed: exit code 2"
    setup.result.error_type = "SetupError"
    setup.result.setup_output = "".join(f"setup line {i}\n" for i in range(40)) + "no such file"
    model = episode("t-model", "beta", steps=0, success=False)
    model.result.termination_reason = TerminationReason.AGENT_ERROR
    model.result.error = "model API at http://127.0.0.1:8766/v1: request failed: refused"
    model.result.error_type = "ModelUnreachableError"
    out = tmp_path / "out"
    ResultSink(out, RUN_ID).write([setup, model])
    site = tmp_path / "site"
    build_site(out, site)
    page = _episode_page(site, setup.result.episode_id)
    assert element_text(page, "outcome") == "error"
    assert element_text(page, "attribution") == (
        "benchmark the benchmark's doing, not the agent's: not scored, not retried"
    )
    assert element_text(page, "cause-error") == (
        "error SetupError setup action 'run_command' failed: exit code 2"
    )
    # The setup's last lines, where its failure is, without opening the folded output.
    shown = element_text(page, "cause-setup")
    assert shown is not None and shown.endswith("setup line 39 no such file")
    assert "setup line 20" not in shown and "31 earlier lines" in shown
    assert element_text(page, "cause-evaluator") is None
    assert element_text(page, "cause-last-step") is None
    page = _episode_page(site, model.result.episode_id)
    assert element_text(page, "outcome") == "error"
    assert element_text(page, "attribution") == (
        "infrastructure the infrastructure's doing, not the agent's: not scored, "
        "retried where a retry can help"
    )
    assert element_text(page, "cause-error") == (
        "error ModelUnreachableError model API at http://127.0.0.1:8766/v1: request failed: refused"
    )
    assert element_text(page, "cause-evaluator") is None


def test_the_cause_shows_the_tail_of_a_long_last_output(tmp_path: Path) -> None:
    record = episode("t-long", "beta", steps=2, success=False)
    record.steps[-1].result = "".join(f"output line {i}\n" for i in range(100)) + "FAILED"
    record.steps[-1].agent_message = "running the tests"
    out = tmp_path / "out"
    ResultSink(out, RUN_ID).write([record])
    site = tmp_path / "site"
    build_site(out, site)
    page = _episode_page(site, record.result.episode_id)
    last = element_text(page, "cause-last-step")
    assert last is not None
    assert last.startswith("last step's output step 2: run_command on box")
    assert "running the tests" in last
    assert "output line 99 FAILED" in last and "output line 80" not in last
    assert "91 earlier lines: the whole output is with step 2" in last
    # The one-node graph of the test episodes: its node did not pass.
    assert element_text(page, "cause-evaluator") == (
        "evaluator not passed done on the state after step 2, the agent's last "
        "(0 of 1 evaluators passed)"
    )


def test_the_cause_of_a_task_graded_by_its_scorer_and_of_no_step(tmp_path: Path) -> None:
    scorer_graph = json.dumps({"nodes": [SCORER_NODE], "edges": []})
    graded = episode(
        "t-scored",
        "beta",
        steps=1,
        success=False,
        graph_json=scorer_graph,
        checkpoints=[CheckpointScore(total=1, result=1), CheckpointScore(total=2, result=0)],
    )
    graded.result.score = 0.33
    idle = episode("t-idle", "beta", steps=0, success=False)
    out = tmp_path / "out"
    ResultSink(out, RUN_ID).write([graded, idle])
    site = tmp_path / "site"
    build_site(out, site)
    page = _episode_page(site, graded.result.episode_id)
    assert element_text(page, "cause-evaluator") == (
        "grade the task's scorer gave 0.33 (1 of 3 checkpoint points) on the state after "
        "step 1, the agent's last"
    )
    page = _episode_page(site, idle.result.episode_id)
    assert element_text(page, "cause-evaluator") == (
        "evaluator not passed done on the state setup left: the agent took no step "
        "(0 of 1 evaluators passed)"
    )
    assert element_text(page, "cause-last-step") == "last step's output the agent took no step"


def test_a_passed_episode_says_so_without_a_cause(dataset: SiteDataset, tmp_path: Path) -> None:
    site = tmp_path / "site"
    build_site(dataset.out, site)
    solved = dataset.episode_ids[1]  # t-one by beta
    page = _episode_page(site, solved)
    assert element_text(page, "outcome") == "pass"
    assert (
        element_text(page, "attribution") == "agent the agent's doing: counted in its success rate"
    )
    assert element_text(page, "cause") is None


def test_episodes_of_the_same_task_open_side_by_side(dataset: SiteDataset, tmp_path: Path) -> None:
    site = tmp_path / "site"
    build_site(dataset.out, site)
    beta, gamma = dataset.episode_ids[1], dataset.episode_ids[3]  # t-one by beta and by gamma
    page = _episode_page(site, beta)
    peers = element_text(page, "peers")
    assert peers == "side by side with gamma / m-2: pass (score 1.00)"
    link = f'href="../side-by-side.html?a={beta}&amp;b={gamma}" target="_top"'
    assert link in page
    pair = (site / "side-by-side.html").read_text(encoding="utf-8")
    assert '<iframe id="side-a"' in pair and '<iframe id="side-b"' in pair
    # An episode without another of its task has nothing to pair with.
    assert 'id="peers"' not in _episode_page(site, dataset.graph_episode_id)
