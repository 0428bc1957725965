"""Leaderboard numbers on a hand-made dataset (epochs, retries, infra failures), and renderings."""

from __future__ import annotations

import io
import json
import math

import pandas as pd
import pytest
from rich.console import Console

from crabray.core.errors import ResultsError
from crabray.core.result import EpisodeRecord, TerminationReason
from crabray.results import (
    LEADERBOARD_COLUMNS,
    LEADERBOARD_INPUT_COLUMNS,
    STAT_COLUMNS,
    ResultSink,
    leaderboard,
    leaderboard_table,
    read_episode_table,
    read_episodes,
    render,
    terminal_view,
    to_rich_table,
)

RUN = "lb"
OK, FAIL, INFRA = (
    TerminationReason.SUCCESS,
    TerminationReason.AGENT_FAIL,
    TerminationReason.ENV_ERROR,
)
Z2 = 1.959963984540054**2

# (agent, model, task, epoch, attempt, reason, score, steps, wall_time_sec); each graded
# row of alpha used 100/10 tokens, 2 model calls and $0.50; infra rows used far more
# (ignored), and bravo is a scripted agent (no usage).
EPISODES = [
    # alpha/m1, three epochs of t1 (S, S, F) and t2 (F, F, infra); t1 epoch 0 was retried.
    ("alpha", "m1", "t1", 0, 0, INFRA, 0.9, 9, 999.0),
    ("alpha", "m1", "t1", 0, 1, OK, 1.0, 2, 10.0),
    ("alpha", "m1", "t1", 1, 0, OK, 1.0, 4, 20.0),
    ("alpha", "m1", "t1", 2, 0, FAIL, 0.5, 6, 30.0),
    ("alpha", "m1", "t2", 0, 0, FAIL, 0.0, 8, 40.0),
    ("alpha", "m1", "t2", 1, 0, FAIL, 0.5, 10, 50.0),
    ("alpha", "m1", "t2", 2, 0, INFRA, 0.9, 9, 999.0),
    # bravo (no model), one epoch, both solved.
    ("bravo", None, "t1", 0, 0, OK, 1.0, 3, 5.0),
    ("bravo", None, "t2", 0, 0, OK, 0.8, 5, 7.0),
    # charlie/m2 never got a verdict: its only episode is an infrastructure failure.
    ("charlie", "m2", "t1", 0, 0, INFRA, 0.0, 0, 1.0),
]


def _usage(agent: str, reason: TerminationReason) -> dict[str, float]:
    if agent != "alpha":
        return {}
    if reason is INFRA:
        return {"tokens_in": 1000, "tokens_out": 1000, "model_calls": 50, "cost_usd": 5.0}
    return {"tokens_in": 100, "tokens_out": 10, "model_calls": 2, "cost_usd": 0.5}


@pytest.fixture
def episodes(tmp_path, make_record) -> pd.DataFrame:
    records = [
        make_record(
            task,
            run_id=RUN,
            agent=agent,
            model=model,
            epoch=epoch,
            attempt=attempt,
            reason=reason,
            score=score,
            completeness=score,
            n_steps=steps,
            wall_time_sec=wall,
            tags={"t1": ["a", "b"], "t2": ["b"]}[task] if agent != "bravo" or task == "t2" else [],
            **_usage(agent, reason),
        )
        for agent, model, task, epoch, attempt, reason, score, steps, wall in EPISODES
    ]
    ResultSink(tmp_path, RUN).write(records)
    return read_episodes(tmp_path, RUN, [*LEADERBOARD_INPUT_COLUMNS, "tags"])


@pytest.fixture
def table(episodes) -> pd.DataFrame:
    return leaderboard(episodes)


def _row(table: pd.DataFrame, agent: str) -> dict:
    return table[table["agent"] == agent].iloc[0].to_dict()


def test_columns_order_and_types(table):
    passes = ["pass@1", "pass@2", "pass^1", "pass^2"]
    assert list(table.columns) == [*LEADERBOARD_COLUMNS, *passes]
    for name in ("episodes", "successes", "tokens_in", "tokens_out", "model_calls", "infra_errors"):
        assert table[name].dtype == "int64", name
    assert list(table["agent"]) == ["bravo", "alpha", "charlie"]  # rate 1, 0.4, none


def test_alpha_numbers_by_hand(table):
    alpha = _row(table, "alpha")
    # Kept rows: t1 x3 (S, S, F; the retried epoch counts once), t2 x2 graded + 1 infra.
    assert (alpha["episodes"], alpha["successes"], alpha["infra_errors"]) == (5, 2, 1)
    assert alpha["success_rate"] == pytest.approx(0.4)
    # Clustered by task (t1 has 3 epochs): task residuals 2 - 3·0.4 = 0.8 and 0 - 2·0.4 = -0.8,
    # clustered variance 2/1 · 1.28 / 25 = 0.1024 against 0.24/5 independent: design effect
    # 32/15, so Wilson on rate 0.4 and n = 5 · 15/32 = 2.34375:
    # centre (0.4 + z²/2n) / (1 + z²/n) = 0.462107, half z·sqrt(0.4·0.6/n + z²/4n²) / (1 + z²/n)
    # = 0.391043. (Independent Wilson 2/5 would be 0.1176-0.7693.)
    assert alpha["success_ci_low"] == pytest.approx(0.071064, abs=1e-6)
    assert alpha["success_ci_high"] == pytest.approx(0.853150, abs=1e-6)
    # Scores t1: 1, 1, 0.5; t2: 0, 0.5; mean 0.6; task residuals 0.7 and -0.7, clustered
    # se sqrt(2/1 · 0.98) / 5 (independent: sqrt(0.175/5)).
    assert alpha["mean_score"] == pytest.approx(0.6)
    assert alpha["score_se"] == pytest.approx(0.28)
    assert alpha["mean_completeness"] == pytest.approx(0.6)
    assert alpha["mean_steps"] == pytest.approx(6.0)  # 2, 4, 6, 8, 10
    assert alpha["mean_wall_time_sec"] == pytest.approx(30.0)
    # Usage of graded rows only: 5 x (100, 10, 2 calls, $0.50).
    assert (alpha["tokens_in"], alpha["tokens_out"], alpha["model_calls"]) == (500, 50, 10)
    assert alpha["cost_usd"] == pytest.approx(2.5)
    assert alpha["cost_per_success"] == pytest.approx(1.25)


def test_pass_at_k_by_hand(table):
    alpha = _row(table, "alpha")
    # t1: n=3, c=2; t2: n=2, c=0 (its third epoch is an infra failure), so K = 2.
    assert alpha["pass@1"] == pytest.approx((2 / 3 + 0) / 2)
    assert alpha["pass@2"] == pytest.approx((1 - 0 / 3 + 0) / 2)  # t1: 1 - C(1,2)/C(3,2)
    assert alpha["pass^1"] == pytest.approx((2 / 3 + 0) / 2)
    assert alpha["pass^2"] == pytest.approx((1 / 3 + 0) / 2)  # t1: C(2,2)/C(3,2)
    bravo = _row(table, "bravo")
    assert bravo["pass@1"] == pytest.approx(1.0)
    assert math.isnan(bravo["pass@2"]) and math.isnan(bravo["pass^2"])  # one epoch only


def test_max_k_caps_the_pass_columns(episodes):
    assert not any(name.startswith("pass") for name in leaderboard(episodes, max_k=1).columns)


def test_scripted_agent_and_infra_only_group(table):
    bravo = _row(table, "bravo")
    assert (bravo["episodes"], bravo["successes"], bravo["success_rate"]) == (2, 2, 1.0)
    # Wilson n/n: low = n / (n + z²), high 1.
    assert bravo["success_ci_low"] == pytest.approx(2 / (2 + Z2))
    assert bravo["success_ci_high"] == 1.0
    assert bravo["cost_usd"] == 0.0 and bravo["cost_per_success"] == 0.0
    assert pd.isna(bravo["model"])
    charlie = _row(table, "charlie")
    assert (charlie["episodes"], charlie["infra_errors"]) == (0, 1)
    for name in ("success_rate", "success_ci_low", "mean_score", "score_se", "cost_per_success"):
        assert math.isnan(charlie[name]), name


def test_per_suite_rows(episodes):
    two_suites = episodes.assign(suite=["s1" if t == "t1" else "s2" for t in episodes.task_id])
    table = leaderboard(two_suites, by=("agent", "model", "suite"))
    alpha = table[table.agent == "alpha"].set_index("suite")
    assert alpha.loc["s1", "episodes"] == 3 and alpha.loc["s1", "successes"] == 2
    assert alpha.loc["s2", "episodes"] == 2 and alpha.loc["s2", "infra_errors"] == 1
    assert list(table.columns[:3]) == ["agent", "model", "suite"]


@pytest.mark.parametrize("by", [("agent", "model"), ("agent", "model", "suite")])
def test_categorical_input_gives_the_same_table(tmp_path, episodes, by):
    """What `crabray leaderboard` reads (categoricals) gives what strings give, dtypes included."""
    categorical = read_episodes(tmp_path, RUN, list(LEADERBOARD_INPUT_COLUMNS), categorical=True)
    assert isinstance(categorical["agent"].dtype, pd.CategoricalDtype)
    pd.testing.assert_frame_equal(leaderboard(categorical, by), leaderboard(episodes, by))


def _in_suite(record: EpisodeRecord, suite: str) -> EpisodeRecord:
    return EpisodeRecord(result=record.result.model_copy(update={"suite": suite}), steps=[])


@pytest.fixture
def second_run(tmp_path, episodes, make_record) -> str:
    """A second run beside RUN: another suite, a retried then solved episode, a new agent."""
    records = [
        _in_suite(make_record("t1", run_id="lb2", agent="alpha", model="m1"), "tasks/other"),
        make_record("t1", run_id="lb2", agent="alpha", model="m1", epoch=1, reason=FAIL),
        make_record("t3", run_id="lb2", agent="delta", model="m1", reason=INFRA),
        make_record("t3", run_id="lb2", agent="delta", model="m1", attempt=1, score=0.25),
        make_record("t3", run_id="lb2", agent="delta", model="m1", epoch=1, score=0.75),
    ]
    ResultSink(tmp_path, "lb2").write(records)
    return "lb2"


def _terminal(table: object) -> str:
    console = Console(file=io.StringIO(), width=200)
    console.print(to_rich_table(table, title="leaderboard"))  # type: ignore[arg-type]
    return console.file.getvalue()  # type: ignore[attr-defined]


@pytest.mark.parametrize("run", [RUN, None])
@pytest.mark.parametrize("by", [("agent", "model"), ("agent", "model", "suite")])
@pytest.mark.parametrize("max_k", [None, 1])
def test_arrow_leaderboard_renders_what_the_frame_renders(tmp_path, second_run, run, by, max_k):
    """`crabray leaderboard`'s Arrow path prints, in every format, what the pandas path prints.

    Two runs (several part files, so dictionaries unified across chunks), retries,
    ungraded rows, a null model, an agent with no graded episode (NaN rates sort last).
    """
    frame = leaderboard(
        read_episodes(tmp_path, run, list(LEADERBOARD_INPUT_COLUMNS)), by, max_k=max_k
    )
    rows = read_episode_table(tmp_path, run, list(LEADERBOARD_INPUT_COLUMNS))
    table = leaderboard_table(rows, by, max_k=max_k)
    assert table.column_names == list(frame.columns)
    for fmt in ("md", "csv", "json"):
        assert render(table, fmt) == render(frame, fmt), fmt  # type: ignore[arg-type]
    assert _terminal(table) == _terminal(frame)
    assert "charlie" in render(table, "csv")


def test_arrow_leaderboard_of_nothing_has_the_columns(tmp_path):
    rows = read_episode_table(tmp_path, RUN, list(LEADERBOARD_INPUT_COLUMNS))
    table = leaderboard_table(rows)
    assert table.num_rows == 0
    assert table.column_names == list(LEADERBOARD_COLUMNS)
    assert render(table, "md") == render(leaderboard(read_episodes(tmp_path, RUN)), "md")


def test_arrow_leaderboard_names_missing_columns(tmp_path, episodes):
    rows = read_episode_table(tmp_path, RUN, list(LEADERBOARD_INPUT_COLUMNS))
    with pytest.raises(ResultsError, match="cost_usd"):
        leaderboard_table(rows.drop_columns(["cost_usd"]))


def test_empty_input_gives_columns(tmp_path):
    table = leaderboard(read_episodes(tmp_path, RUN))
    assert table.empty
    assert list(table.columns) == list(LEADERBOARD_COLUMNS)
    assert render(table, "md").count("\n") == 2


def test_missing_columns_are_named(episodes):
    with pytest.raises(ResultsError, match="cost_usd"):
        leaderboard(episodes.drop(columns=["cost_usd"]))


def test_markdown_parses_back(table):
    lines = render(table, "md").splitlines()
    cells = [[cell.strip() for cell in line.strip("|").split("|")] for line in lines]
    assert cells[0] == list(table.columns)
    assert cells[1][:3] == ["---", "---", "---:"]
    assert len(cells) == 2 + len(table)
    bravo = dict(zip(cells[0], cells[2], strict=True))
    assert (bravo["agent"], bravo["model"], bravo["episodes"]) == ("bravo", "", "2")
    assert (bravo["success_rate"], bravo["mean_steps"], bravo["pass@2"]) == ("1.000", "4.0", "")


def test_markdown_escapes_pipes():
    frame = pd.DataFrame({"agent": ["a|b"], "score": [0.12345]})
    assert render(frame, "md").splitlines()[2] == "| a\\|b | 0.123 |"


def test_csv_parses_back(table):
    parsed = pd.read_csv(io.StringIO(render(table, "csv")))
    pd.testing.assert_frame_equal(parsed, table, check_dtype=False)


def test_json_parses_back(table):
    parsed = json.loads(render(table, "json"))
    assert [list(row) for row in parsed] == [list(table.columns)] * 3
    assert parsed[0]["model"] is None
    assert parsed[1]["success_rate"] == pytest.approx(0.4)
    assert parsed[2]["success_rate"] is None and parsed[2]["infra_errors"] == 1


def test_unknown_format_is_an_error(table):
    with pytest.raises(ResultsError, match="'html'"):
        render(table, "html")  # type: ignore[arg-type]


def _printed(table: pd.DataFrame) -> str:
    console = Console(file=io.StringIO(), width=200)
    console.print(to_rich_table(table, title="leaderboard"))
    return console.file.getvalue()


def test_terminal_table_fits_80_columns_and_shows_the_essentials(table):
    text = _printed(table)
    assert max(len(line.rstrip()) for line in text.splitlines()) <= 80
    header = text.splitlines()[2].split()
    for short in ("agent", "model", "n", "success", "95%", "CI", "score", "infra", "pass@2"):
        assert short in header, short
    assert "0.07-0.85" in text  # the merged interval of alpha (clustered by task)
    for agent in ("alpha", "bravo", "charlie"):
        assert agent in text


def test_terminal_view_keeps_identity_and_drops_empty_usage(table):
    view = terminal_view(table.assign(cost_usd=0.0, cost_per_success=0.0), max_width=40)
    assert list(view.columns[:2]) == ["agent", "model"]
    assert "cost_usd" not in view.columns
    assert "pass@1" not in terminal_view(table, max_width=1000).columns  # largest k only
    wide = terminal_view(table, max_width=1000)
    # No pass here was graded untrusted: a column of zeros is left out, as for unknown trust.
    merged_or_zero = {"success_ci_low", "success_ci_high", "unverified_passes"}
    assert set(STAT_COLUMNS) - merged_or_zero <= set(wide.columns)
