"""Breakdowns by tag, by column and by termination reason; comparisons of two runs."""

from __future__ import annotations

import math

import pandas as pd
import pyarrow as pa
import pytest

from crabray.core.errors import ResultsError
from crabray.core.result import TerminationReason
from crabray.results import (
    BREAKDOWN_STATS,
    CHANGES,
    COMPARE_STATS,
    LEADERBOARD_INPUT_COLUMNS,
    ResultSink,
    breakdown,
    breakdown_table,
    compare_runs,
    compare_table,
    read_episode_table,
    read_episodes,
    render,
)

OK, FAIL, INFRA, STEPS = (
    TerminationReason.SUCCESS,
    TerminationReason.AGENT_FAIL,
    TerminationReason.ENV_ERROR,
    TerminationReason.MAX_STEPS,
)

# (agent, task, epoch, reason, tags)
BREAKDOWN_ROWS = [
    ("alpha", "t1", 0, OK, ["a", "b"]),
    ("alpha", "t1", 1, OK, ["a", "b"]),
    ("alpha", "t1", 2, FAIL, ["a", "b"]),
    ("alpha", "t2", 0, FAIL, ["b"]),
    ("alpha", "t2", 1, STEPS, ["b"]),
    ("alpha", "t2", 2, INFRA, ["b"]),
    ("bravo", "t1", 0, OK, []),
    ("bravo", "t2", 0, OK, ["a"]),
]


@pytest.fixture
def episodes(tmp_path, make_record) -> pd.DataFrame:
    records = [
        make_record(
            task, run_id="bd", agent=agent, epoch=epoch, reason=reason, tags=tags, score=1.0
        )
        for agent, task, epoch, reason, tags in BREAKDOWN_ROWS
    ]
    ResultSink(tmp_path, "bd").write(records)
    return read_episodes(tmp_path, "bd", [*LEADERBOARD_INPUT_COLUMNS, "tags"])


def _rows(table: pd.DataFrame, group: str) -> dict[tuple, dict]:
    """Rows by (agent, group value); a missing value (NaN or None) is keyed as None."""
    return {
        (row["agent"], None if pd.isna(row[group]) else row[group]): row
        for row in table.to_dict("records")
    }


def test_breakdown_by_tag_counts_an_episode_under_each_tag(episodes):
    table = breakdown(episodes, "tag")
    assert list(table.columns) == ["agent", "model", "tag", *BREAKDOWN_STATS]
    rows = _rows(table, "tag")
    assert set(rows) == {("alpha", "a"), ("alpha", "b"), ("bravo", "a"), ("bravo", None)}
    a, b = rows["alpha", "a"], rows["alpha", "b"]
    assert (a["episodes"], a["successes"], a["infra_errors"]) == (3, 2, 0)
    assert a["success_rate"] == pytest.approx(2 / 3)
    assert a["share"] == pytest.approx(3 / 6)
    assert (b["episodes"], b["successes"], b["infra_errors"]) == (5, 2, 1)
    assert b["share"] == pytest.approx(1.0)
    # t1 (3 epochs) and t2: clustered by task as the leaderboard (Wilson 2/5 is 0.117621).
    assert b["success_ci_low"] == pytest.approx(0.071064, abs=1e-6)
    untagged = rows["bravo", None]
    assert (untagged["episodes"], untagged["share"]) == (1, 0.5)
    assert breakdown(episodes, "tags").equals(table)


def test_breakdown_by_termination_reason_keeps_infra_apart(episodes):
    table = breakdown(episodes, "termination_reason")
    rows = _rows(table, "termination_reason")
    assert rows["alpha", "success"]["episodes"] == 2
    assert rows["alpha", "success"]["success_rate"] == 1.0
    assert rows["alpha", "agent_fail"]["episodes"] == 2
    assert rows["alpha", "max_steps"]["share"] == pytest.approx(1 / 6)
    infra = rows["alpha", "env_error"]
    assert (infra["episodes"], infra["infra_errors"]) == (0, 1)
    assert math.isnan(infra["success_rate"])
    assert sum(row["share"] for key, row in rows.items() if key[0] == "alpha") == pytest.approx(1)


def test_breakdown_by_task_column(episodes):
    rows = _rows(breakdown(episodes, "task_id", by=("agent",)), "task_id")
    assert rows["alpha", "t1"]["success_rate"] == pytest.approx(2 / 3)
    assert rows["alpha", "t2"]["success_rate"] == 0.0
    assert rows["bravo", "t2"]["success_rate"] == 1.0


def test_breakdown_errors_name_the_problem(episodes):
    with pytest.raises(ResultsError, match="'difficulty'"):
        breakdown(episodes, "difficulty")
    with pytest.raises(ResultsError, match="already one of"):
        breakdown(episodes, "agent")


# (run, agent, task, epoch, reason, steps)
COMPARE_ROWS = [
    ("base", "old", "t1", 0, FAIL, 5),
    ("new", "next", "t1", 0, OK, 3),  # fixed
    ("base", "old", "t2", 0, OK, 2),
    ("new", "next", "t2", 0, FAIL, 9),  # broke
    ("base", "old", "t3", 0, OK, 2),
    ("new", "next", "t3", 0, OK, 2),  # same
    ("base", "old", "t4", 0, OK, 2),  # only in base
    ("new", "next", "t5", 0, OK, 2),  # only in new
    ("base", "old", "t6", 0, OK, 2),
    ("base", "old", "t6", 1, FAIL, 2),
    ("new", "next", "t6", 0, OK, 2),
    ("new", "next", "t6", 1, OK, 2),  # better: 0.5 -> 1.0
    ("base", "old", "t7", 0, OK, 2),
    ("new", "next", "t7", 0, INFRA, 2),  # no verdict in new: only in base
]


@pytest.fixture
def two_runs(tmp_path, make_record) -> pd.DataFrame:
    for run in ("base", "new"):
        records = [
            make_record(task, run_id=run, agent=agent, epoch=epoch, reason=reason, n_steps=steps)
            for row_run, agent, task, epoch, reason, steps in COMPARE_ROWS
            if row_run == run
        ]
        ResultSink(tmp_path, run).write(records)
    return read_episodes(tmp_path, columns=list(LEADERBOARD_INPUT_COLUMNS))


def test_compare_runs_labels_each_task(two_runs):
    comparison = compare_runs(two_runs, "base", "new")
    assert comparison.key == ("task_id",)  # one agent per run: matched by task
    tasks = comparison.tasks
    assert list(tasks.columns) == ["task_id", *COMPARE_STATS]
    changes = dict(zip(tasks["task_id"], tasks["change"], strict=True))
    assert changes == {
        "t1": "fixed",
        "t2": "broke",
        "t3": "same",
        "t4": "only_a",
        "t5": "only_b",
        "t6": "better",
        "t7": "only_a",
    }
    assert list(tasks["change"]) == sorted(tasks["change"], key=CHANGES.index)
    t2 = tasks.set_index("task_id").loc["t2"]
    assert (t2["mean_steps_a"], t2["mean_steps_b"]) == (2.0, 9.0)
    t6 = tasks.set_index("task_id").loc["t6"]
    assert (t6["episodes_a"], t6["success_rate_a"], t6["success_rate_b"]) == (2, 0.5, 1.0)
    assert comparison.counts == {
        "fixed": 1,
        "broke": 1,
        "better": 1,
        "worse": 0,
        "only_a": 2,
        "only_b": 1,
        "same": 1,
    }
    # Tasks graded in both: t1, t2, t3, t6: A 0, 1, 1, 0.5 -> B 1, 0, 1, 1.
    assert comparison.summary.startswith(
        "base -> new: 4 tasks in both, success 0.625 -> 0.750; fixed 1, broke 1"
    )


def test_compare_runs_with_several_agents_matches_per_agent(two_runs):
    # Run "again" holds both agents' episodes, so each agent is matched with itself.
    both = pd.concat([two_runs, two_runs.assign(run_id="again")])
    comparison = compare_runs(both, "base", "again")
    assert comparison.key == ("agent", "model", "task_id")
    assert comparison.counts["same"] == 6  # "old": t1-t4, t6, t7 against themselves
    assert comparison.counts["only_b"] == 5  # "next" has no episodes in base (t7: infra)


def test_compare_runs_names_a_missing_run(two_runs):
    with pytest.raises(ResultsError, match=r"'nope' has no episodes.*base, new"):
        compare_runs(two_runs, "base", "nope")


@pytest.mark.parametrize("column", ["tag", "termination_reason", "task_id", "suite"])
def test_arrow_breakdown_renders_what_the_frame_renders(tmp_path, episodes, column):
    """`crabray leaderboard --by` (Arrow rows, dictionaries) prints what the frame API gives."""
    rows = read_episode_table(tmp_path, "bd", [*LEADERBOARD_INPUT_COLUMNS, "tags"])
    table, frame = breakdown_table(rows, column), breakdown(episodes, column)
    assert table.column_names == list(frame.columns)
    for fmt in ("md", "csv", "json"):
        assert render(table, fmt) == render(frame, fmt), fmt


def test_arrow_comparison_matches_the_frame_comparison(tmp_path, two_runs):
    """`crabray leaderboard --compare` (two runs read apart, concatenated) as compare_runs."""
    columns = list(LEADERBOARD_INPUT_COLUMNS)
    rows = pa.concat_tables(
        [read_episode_table(tmp_path, run, columns, ordered=True) for run in ("base", "new")]
    )
    arrow, frame = compare_table(rows, "base", "new"), compare_runs(two_runs, "base", "new")
    assert (arrow.key, arrow.counts, arrow.summary) == (frame.key, frame.counts, frame.summary)
    for fmt in ("md", "csv", "json"):
        assert render(arrow.table, fmt) == render(frame.tasks, fmt), fmt
