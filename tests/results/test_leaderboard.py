"""Leaderboard numbers on a hand-made dataset, and its renderings."""

from __future__ import annotations

import io
import json

import pandas as pd
import pytest
from rich.console import Console

from crabray.core.errors import ResultsError
from crabray.core.result import TerminationReason
from crabray.results import (
    LEADERBOARD_COLUMNS,
    ResultSink,
    leaderboard,
    read_episodes,
    render,
    to_rich_table,
)

RUN = "lb"
OK, FAIL, INFRA = (
    TerminationReason.SUCCESS,
    TerminationReason.AGENT_FAIL,
    TerminationReason.ENV_ERROR,
)

# (agent, model, task, reason, score, completeness, steps, tokens_in, tokens_out)
EPISODES = [
    ("alpha", "m1", "t1", OK, 1.0, 1.0, 4, 100, 10),
    ("alpha", "m1", "t2", FAIL, 0.5, 0.5, 6, 200, 20),
    ("alpha", "m1", "t3", INFRA, 0.0, 0.0, 2, 0, 0),
    ("alpha", None, "t1", FAIL, 0.0, 0.25, 3, 7, 1),
    ("bravo", None, "t1", OK, 1.0, 1.0, 3, 50, 5),
    ("bravo", None, "t2", OK, 0.8, 0.6, 5, 50, 5),
    ("charlie", "m2", "t1", OK, 1.0, 1.0, 1, 1, 1),
    ("charlie", "m2", "t2", FAIL, 0.0, 0.0, 2, 1, 1),
    ("delta", "m2", "t1", OK, 1.0, 1.0, 2, 3, 4),
    ("delta", "m2", "t2", FAIL, 0.5, 0.5, 4, 3, 4),
]

EXPECTED = [
    # agent, model, episodes, successes, rate, score, completeness, steps, in, out, infra
    ("bravo", None, 2, 2, 1.0, 0.9, 0.8, 4.0, 100, 10, 0),
    ("delta", "m2", 2, 1, 0.5, 0.75, 0.75, 3.0, 6, 8, 0),
    ("charlie", "m2", 2, 1, 0.5, 0.5, 0.5, 1.5, 2, 2, 0),
    ("alpha", "m1", 3, 1, 1 / 3, 0.5, 0.5, 4.0, 300, 30, 1),
    ("alpha", None, 1, 0, 0.0, 0.0, 0.25, 3.0, 7, 1, 0),
]


@pytest.fixture
def episodes(tmp_path, make_record) -> pd.DataFrame:
    records = [
        make_record(
            f"{agent}-{model}-{task}",
            run_id=RUN,
            agent=agent,
            model=model,
            reason=reason,
            score=score,
            completeness=completeness,
            n_steps=steps,
            tokens_in=tokens_in,
            tokens_out=tokens_out,
        )
        for agent, model, task, reason, score, completeness, steps, tokens_in, tokens_out in (
            EPISODES
        )
    ]
    ResultSink(tmp_path, RUN).write(records)
    return read_episodes(tmp_path, RUN)


@pytest.fixture
def table(episodes) -> pd.DataFrame:
    return leaderboard(episodes)


def _rows(frame: pd.DataFrame) -> list[tuple]:
    return [
        tuple(None if isinstance(v, float) and pd.isna(v) else v for v in row)
        for row in frame.itertuples(index=False, name=None)
    ]


def test_leaderboard_numbers(table):
    assert list(table.columns) == list(LEADERBOARD_COLUMNS)
    rows = _rows(table)
    assert [row[:4] for row in rows] == [row[:4] for row in EXPECTED]
    for got, want in zip(rows, EXPECTED, strict=True):
        assert got[4:8] == pytest.approx(want[4:8]), got[:2]
        assert got[8:] == want[8:], got[:2]
    for name in ("episodes", "successes", "tokens_in", "tokens_out", "infra_errors"):
        assert table[name].dtype == "int64"


def test_leaderboard_of_no_episodes_is_empty_with_columns(tmp_path):
    table = leaderboard(read_episodes(tmp_path, RUN))
    assert table.empty
    assert list(table.columns) == list(LEADERBOARD_COLUMNS)
    assert render(table, "md").count("\n") == 2


def test_leaderboard_names_missing_columns(episodes):
    with pytest.raises(ResultsError, match="tokens_in"):
        leaderboard(episodes.drop(columns=["tokens_in"]))


def test_markdown_parses_back(table):
    lines = render(table, "md").splitlines()
    cells = [[cell.strip() for cell in line.strip("|").split("|")] for line in lines]
    assert cells[0] == list(LEADERBOARD_COLUMNS)
    assert cells[1][:3] == ["---", "---", "---:"]
    assert len(cells) == 2 + len(EXPECTED)
    assert cells[2] == ["bravo", "", "2", "2", "1.000", "0.900", "0.800", "4.0", "100", "10", "0"]
    assert cells[5][:5] == ["alpha", "m1", "3", "1", "0.333"]


def test_markdown_escapes_pipes():
    frame = pd.DataFrame({"agent": ["a|b"], "score": [0.12345]})
    assert render(frame, "md").splitlines()[2] == "| a\\|b | 0.123 |"


def test_csv_parses_back(table):
    parsed = pd.read_csv(io.StringIO(render(table, "csv")))
    assert list(parsed.columns) == list(LEADERBOARD_COLUMNS)
    pd.testing.assert_frame_equal(parsed, table, check_dtype=False)


def test_json_parses_back(table):
    parsed = json.loads(render(table, "json"))
    assert [list(row) for row in parsed] == [list(LEADERBOARD_COLUMNS)] * len(EXPECTED)
    assert parsed[0]["model"] is None
    assert parsed[0]["mean_score"] == pytest.approx(0.9)
    assert parsed[3]["success_rate"] == pytest.approx(1 / 3)
    assert parsed[3]["infra_errors"] == 1


def test_unknown_format_is_an_error(table):
    with pytest.raises(ResultsError, match="'html'"):
        render(table, "html")  # type: ignore[arg-type]


def test_rich_table_shows_every_row(table):
    console = Console(file=io.StringIO(), width=200)
    console.print(to_rich_table(table, title="demo"))
    text = console.file.getvalue()
    for agent in ("alpha", "bravo", "charlie", "delta"):
        assert agent in text
    assert "0.333" in text
