"""Every number a site page shows comes from the leaderboard's rule, on every part of the page.

The rule (``crabray.results.board.leaderboard``): benchmark and infrastructure errors
are counted apart and are in no rate, mean or sum; without ``--run`` a row is one
agent, model and suite. The dataset here has two suites sharing a task id, both kinds
of error, and costs; the built pages are parsed back (the leaderboard table, the data
each plot was drawn from, the matrix cells, the breakdowns and the run picker) and
must agree with each other.
"""

from __future__ import annotations

import html
import json
import math
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from crabray.core.result import EpisodeRecord, EpisodeResult, StepRecord, TerminationReason
from crabray.results import ResultSink, RunManifest, write_manifest
from crabray.results.site import build_site

START = datetime(2026, 11, 23, 7, 53, 0, tzinfo=UTC)
RUN_ALPHA = "20261123-075300-a1a1a1"
RUN_BETA = "20261124-075300-b2b2b2"
MODEL = "gpt-4o-2024-08-06"
OK, FAIL = TerminationReason.SUCCESS, TerminationReason.MAX_STEPS


def _record(
    run_id: str,
    suite: str,
    task_id: str,
    agent: str,
    reason: TerminationReason,
    *,
    steps: int = 2,
    cost: float = 0.0,
    epoch: int = 0,
    error_type: str | None = None,
) -> EpisodeRecord:
    """A finished episode of ``steps`` one-call steps."""
    result = EpisodeResult(
        run_id=run_id,
        suite=suite,
        task_id=task_id,
        agent=agent,
        model=MODEL if agent == "mock-llm" else None,
        epoch=epoch,
        termination_reason=reason,
        success=reason is OK,
        score=1.0 if reason is OK else 0.0,
        steps=steps,
        cost_usd=cost,
        error=None if error_type is None else "it broke",
        error_type=error_type,
        description=f"Do {task_id}.",
        started_at=START,
        finished_at=START + timedelta(seconds=10),
    )
    records = [
        StepRecord(
            episode_id=result.episode_id,
            run_id=run_id,
            task_id=task_id,
            agent=agent,
            epoch=epoch,
            step=index,
            env="box",
            action="run_command",
            arguments_json="{}",
        )
        for index in range(steps)
    ]
    return EpisodeRecord(result=result, steps=records)


def _write(out: Path) -> None:
    """Two runs of two suites; both suites have a task named ``shared``."""
    alpha, beta = "suites/alpha", "suites/beta"
    runs = {
        RUN_ALPHA: (
            alpha,
            [
                _record(RUN_ALPHA, alpha, "shared", "oracle", OK),
                _record(RUN_ALPHA, alpha, "a1", "oracle", OK, steps=3),
                _record(
                    RUN_ALPHA,
                    alpha,
                    "a2",
                    "oracle",
                    TerminationReason.AGENT_ERROR,
                    steps=0,
                    error_type="NoSolutionError",
                ),
                _record(RUN_ALPHA, alpha, "shared", "mock-llm", OK, steps=3, cost=0.02),
                _record(RUN_ALPHA, alpha, "a1", "mock-llm", FAIL, steps=10, cost=0.05),
                _record(
                    RUN_ALPHA,
                    alpha,
                    "a2",
                    "mock-llm",
                    TerminationReason.ENV_ERROR,
                    steps=0,
                    cost=0.3,
                ),
            ],
        ),
        RUN_BETA: (
            beta,
            [
                _record(RUN_BETA, beta, "shared", "oracle", OK, steps=1),
                _record(
                    RUN_BETA,
                    beta,
                    "b1",
                    "oracle",
                    TerminationReason.EVALUATOR_ERROR,
                    error_type="EvaluatorFaultError",
                ),
                _record(RUN_BETA, beta, "shared", "mock-llm", FAIL, steps=4, cost=0.01),
                _record(RUN_BETA, beta, "b1", "mock-llm", OK, steps=5, cost=0.04),
                _record(
                    RUN_BETA,
                    beta,
                    "b1",
                    "mock-llm",
                    TerminationReason.AGENT_ERROR,
                    epoch=1,
                    steps=1,
                    cost=0.2,
                    error_type="ModelUnreachableError",
                ),
            ],
        ),
    }
    for run_id, (suite, records) in runs.items():
        ResultSink(out, run_id).write(records)
        write_manifest(
            out,
            RunManifest(
                run_id=run_id,
                suite=suite,
                suite_name=suite.rsplit("/", 1)[1],
                agents=["oracle", "mock-llm"],
                crabray_version="test",
            ),
        )


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("numbers")
    _write(root / "out")
    build_site(root / "out", root / "site")
    return root / "site"


def _attributes(tag: str) -> dict[str, str]:
    return {name: html.unescape(value) for name, value in re.findall(r'([\w-]+)="([^"]*)"', tag)}


def _table(page: str, table_id: str) -> list[dict[str, str]]:
    """A sortable table's rows: per column, the cell's raw value (``data-sort``) or text."""
    body = page.split(f'id="{table_id}"', 1)[1].split("</table>", 1)[0]
    columns = re.findall(r'<th scope="col" data-column="([^"]+)"', body)
    rows = []
    for row in re.findall(r"<tr[^>]*>(.*?)</tr>", body.split("<tbody>", 1)[1], re.S):
        cells = re.findall(r"<td([^>]*)>(.*?)</td>", row, re.S)
        values = []
        for attributes, content in cells:
            sort = _attributes(attributes).get("data-sort")
            values.append(
                sort if sort is not None else html.unescape(re.sub(r"<[^>]+>", "", content))
            )
        rows.append(dict(zip(columns, values, strict=True)))
    return rows


def _number(text: str) -> float:
    return float("nan") if text in ("", "nan") else float(text)


def _key(row: dict[str, Any]) -> tuple[str, str, str]:
    """A leaderboard row's identity: agent, model ('' for none) and suite ('' when by run)."""
    model = row.get("model") or ""
    return (
        str(row["agent"]),
        "" if model in ("None", "nan") else str(model),
        row.get("suite") or "",
    )


def _label(agent: str, model: str) -> str:
    return f"{agent} / {model}" if model else agent


def _points(page: str, figure: str) -> list[dict[str, Any]]:
    tag = re.search(rf'<figure id="{figure}"[^>]*>', page)
    assert tag is not None, f"no figure {figure}"
    points: list[dict[str, Any]] = json.loads(_attributes(tag.group(0))["data-points"])
    return points


def _close(a: float, b: float) -> bool:
    return (math.isnan(a) and math.isnan(b)) or math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12)


def _check_page(page: str) -> dict[tuple[str, str, str], dict[str, str]]:
    """Check that the page's plots, matrix and breakdowns agree with its leaderboard."""
    board = {_key(row): row for row in _table(page, "leaderboard")}
    graded = {key: row for key, row in board.items() if int(row["episodes"]) > 0}

    success = {_key(point): point for point in _points(page, "plot-success")}
    assert set(success) == set(graded)
    for key, point in success.items():
        assert _close(point["success_rate"], _number(board[key]["success_rate"])), key
        assert _close(point["ci_low"], _number(board[key]["success_ci_low"])), key

    cost = {_key(point): point for point in _points(page, "plot-cost")}
    assert set(cost) == set(graded)
    for key, point in cost.items():
        row = board[key]
        assert _close(point["success_rate"], _number(row["success_rate"])), key
        mean = _number(row["cost_usd"]) / int(row["episodes"])
        assert _close(point["mean_cost_usd"], mean), key

    steps = {_key(point): point for point in _points(page, "plot-steps")}
    assert set(steps) == set(graded)
    for key, point in steps.items():
        counts = {int(value): n for value, n in point["episodes_by_steps"].items()}
        assert sum(counts.values()) == int(board[key]["episodes"]), key
        mean = sum(value * n for value, n in counts.items()) / sum(counts.values())
        assert _close(mean, _number(board[key]["mean_steps"])), key

    cells = [_attributes(tag) for tag in re.findall(r'<td class="matrix-cell"[^>]*>', page)]
    sums: dict[tuple[str, str, str], list[int]] = {}
    for cell in cells:
        suite = cell["data-suite"] if any(k[2] for k in board) else ""
        group = next(k for k in board if _label(k[0], k[1]) == cell["data-group"] and k[2] == suite)
        total = sums.setdefault(group, [0, 0, 0, 0])
        for index, name in enumerate(("solved", "graded", "benchmark-errors", "infra-errors")):
            total[index] += int(cell[f"data-{name}"])
    for key, row in board.items():
        expected = [int(row[name]) for name in ("successes", "episodes")]
        expected += [int(row["benchmark_errors"]), int(row["infra_errors"])]
        assert sums[key] == expected, key

    reasons = _table(page, "breakdown-by-termination-reason")
    per_group: dict[tuple[str, str, str], list[int]] = {}
    for row in reasons:
        total = per_group.setdefault(_key(row), [0, 0, 0, 0])
        for index, name in enumerate(("successes", "episodes", "benchmark_errors", "infra_errors")):
            total[index] += int(row[name])
    for key, row in board.items():
        names = ("successes", "episodes", "benchmark_errors", "infra_errors")
        assert per_group[key] == [int(row[name]) for name in names], key
    return board


def test_the_index_counts_every_number_by_the_leaderboards_rule(site: Path) -> None:
    index = (site / "index.html").read_text(encoding="utf-8")
    board = _check_page(index)
    # One row per agent, model and suite; errors in neither rate: the oracle solved
    # every task it was graded on, in both suites.
    oracle_alpha = board["oracle", "", "suites/alpha"]
    assert (oracle_alpha["episodes"], oracle_alpha["successes"]) == ("2", "2")
    assert (
        float(oracle_alpha["success_rate"])
        == 1.0
        == float(board["oracle", "", "suites/beta"]["success_rate"])
    )
    cost = {_key(point): point for point in _points(index, "plot-cost")}
    assert cost["oracle", "", "suites/alpha"]["success_rate"] == 1.0
    mock = cost["mock-llm", MODEL, "suites/alpha"]
    assert mock["success_rate"] == 0.5 and math.isclose(mock["mean_cost_usd"], 0.035)
    # The task both suites have is a row of the matrix per suite.
    cells = [_attributes(tag) for tag in re.findall(r'<td class="matrix-cell"[^>]*>', index)]
    shared = sorted(cell["data-suite"] for cell in cells if cell["data-task"] == "shared")
    assert shared == ["suites/alpha", "suites/alpha", "suites/beta", "suites/beta"]


@pytest.mark.parametrize("run_id", [RUN_ALPHA, RUN_BETA])
def test_a_run_page_counts_by_the_same_rule(site: Path, run_id: str) -> None:
    page = (site / f"run-{run_id}.html").read_text(encoding="utf-8")
    board = _check_page(page)
    # The run picker says what the run's leaderboard says: passes of graded episodes.
    solved = sum(int(row["successes"]) for row in board.values())
    graded = sum(int(row["episodes"]) for row in board.values())
    link = re.search(rf'data-run="{run_id}"[^>]*>(.*?)</a>', page, re.S)
    assert link is not None
    assert f"{solved}/{graded} solved" in html.unescape(re.sub(r"<[^>]+>", "", link.group(1)))
