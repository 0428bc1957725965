"""The grader's trust on the board: verified success, passes not verified, --verified-only.

alpha has a trusted pass, an untrusted pass, a pass of unknown trust (null), a
trusted and an untrusted failure, and a benchmark error (in no denominator);
bravo two trusted passes. Every figure below is counted by hand from that.
"""

from __future__ import annotations

import io
import json
import math
import re

import pandas as pd
import pytest
from rich.console import Console

from crabray.core.result import TerminationReason
from crabray.results import (
    LEADERBOARD_INPUT_COLUMNS,
    ResultSink,
    breakdown,
    compare_runs,
    leaderboard,
    leaderboard_table,
    read_episode_table,
    read_episodes,
    render,
    to_rich_table,
)
from crabray.results.board.trust import (
    TRUST_INPUT_COLUMNS,
    passes_not_verified,
    row_trust,
    trust_text,
)

RUN = "trust"
OK, FAIL, SETUP = (
    TerminationReason.SUCCESS,
    TerminationReason.AGENT_FAIL,
    TerminationReason.SETUP_ERROR,
)
WHY = "the evaluator ran a command while the agent was root"

# (agent, task, epoch, reason, grader_trusted, grader_untrusted_reason)
EPISODES = [
    ("alpha", "t-trusted", 0, OK, True, None),
    ("alpha", "t-untrusted", 0, OK, False, WHY),
    ("alpha", "t-unknown", 0, OK, None, None),
    ("alpha", "t-fail", 0, FAIL, True, None),
    ("alpha", "t-fail-untrusted", 0, FAIL, False, WHY),
    ("alpha", "t-setup", 0, SETUP, None, None),
    ("bravo", "t-trusted", 0, OK, True, None),
    ("bravo", "t-untrusted", 0, OK, True, None),
]


def _write(out, make_record, episodes=EPISODES, run=RUN) -> None:
    records = [
        make_record(
            task,
            run_id=run,
            agent=agent,
            model="m",
            epoch=epoch,
            reason=reason,
            score=1.0 if reason is OK else 0.0,
            cost_usd=0.5,
            grader_trusted=trusted,
            grader_untrusted_reason=why,
        )
        for agent, task, epoch, reason, trusted, why in episodes
    ]
    ResultSink(out, run).write(records)


@pytest.fixture
def out(tmp_path, make_record):
    _write(tmp_path, make_record)
    return tmp_path


@pytest.fixture
def episodes(out) -> pd.DataFrame:
    return read_episodes(out, RUN, [*LEADERBOARD_INPUT_COLUMNS, "tags"])


def _row(table: pd.DataFrame, agent: str) -> dict:
    return table[table["agent"] == agent].iloc[0].to_dict()


def test_verified_rate_and_passes_not_verified(episodes):
    alpha = _row(leaderboard(episodes), "alpha")
    # 5 graded (the setup error is the benchmark's), 3 passes: 1 trusted, 1 not, 1 unknown.
    assert (alpha["episodes"], alpha["successes"], alpha["benchmark_errors"]) == (5, 3, 1)
    assert alpha["success_rate"] == pytest.approx(3 / 5)
    assert alpha["verified_success_rate"] == pytest.approx(1 / 5)
    assert (alpha["unverified_passes"], alpha["unknown_trust_passes"]) == (1, 1)
    bravo = _row(leaderboard(episodes), "bravo")
    assert bravo["verified_success_rate"] == bravo["success_rate"] == 1.0
    assert (bravo["unverified_passes"], bravo["unknown_trust_passes"]) == (0, 0)


def test_verified_only_counts_unverified_passes_as_failures(episodes):
    usual, strict = (
        _row(leaderboard(episodes), "alpha"),
        _row(leaderboard(episodes, verified_only=True), "alpha"),
    )
    assert strict["episodes"] == usual["episodes"] == 5  # the same denominator
    assert strict["successes"] == 1
    assert strict["success_rate"] == pytest.approx(1 / 5) == strict["verified_success_rate"]
    assert strict["success_ci_high"] < usual["success_ci_high"]
    assert strict["cost_per_success"] == pytest.approx(2.5)  # 5 x $0.50 for one success
    assert strict["mean_score"] == usual["mean_score"]  # scores stay as graded
    # The passes not verified are still counted, so the strict table says what it left out.
    assert (strict["unverified_passes"], strict["unknown_trust_passes"]) == (1, 1)


def test_verified_only_applies_to_pass_at_k(tmp_path, make_record):
    """Two epochs of one task, one pass trusted and one not: pass^2 1 becomes 0."""
    _write(
        tmp_path,
        make_record,
        [("alpha", "t", 0, OK, True, None), ("alpha", "t", 1, OK, False, WHY)],
    )
    rows = read_episodes(tmp_path, RUN, list(LEADERBOARD_INPUT_COLUMNS))
    assert leaderboard(rows).iloc[0]["pass^2"] == 1.0
    strict = leaderboard(rows, verified_only=True).iloc[0]
    assert (strict["pass^2"], strict["pass@2"], strict["pass@1"]) == (0.0, 1.0, 0.5)


def test_arrow_and_frame_boards_agree(out, episodes):
    rows = read_episode_table(out, RUN, list(LEADERBOARD_INPUT_COLUMNS))
    for verified_only in (False, True):
        table = leaderboard_table(rows, verified_only=verified_only)
        frame = leaderboard(episodes, verified_only=verified_only)
        for fmt in ("md", "csv", "json"):
            assert render(table, fmt) == render(frame, fmt), (fmt, verified_only)


def test_rows_without_the_column_have_unknown_trust(episodes):
    """Rows made by hand (or read without the column): no error, no pass verified."""
    alpha = _row(leaderboard(episodes.drop(columns=["grader_trusted"])), "alpha")
    assert alpha["verified_success_rate"] == 0.0
    assert (alpha["unverified_passes"], alpha["unknown_trust_passes"]) == (0, 3)
    everything_unknown = episodes.assign(grader_trusted=None)  # an all-None column
    assert _row(leaderboard(everything_unknown), "alpha")["unknown_trust_passes"] == 3


def test_files_keep_the_figures(episodes):
    table = leaderboard(episodes)
    rows = {row["agent"]: row for row in json.loads(render(table, "json"))}
    assert rows["alpha"]["verified_success_rate"] == pytest.approx(0.2)
    assert rows["alpha"]["unverified_passes"] == 1 and rows["alpha"]["unknown_trust_passes"] == 1
    csv = pd.read_csv(io.StringIO(render(table, "csv"))).set_index("agent")
    assert csv.loc["alpha", "verified_success_rate"] == pytest.approx(0.2)
    assert csv.loc["alpha", "unverified_passes"] == 1
    lines = render(table, "md").splitlines()
    cells = [[cell.strip() for cell in line.strip("|").split("|")] for line in lines]
    alpha = dict(zip(cells[0], next(c for c in cells[2:] if c[0] == "alpha"), strict=True))
    assert alpha["success_rate"] == "0.600" and alpha["verified_success_rate"] == "0.200"
    assert (alpha["unverified_passes"], alpha["unknown_trust_passes"]) == ("1", "1")


def terminal_cells(text: str, agent: str = "alpha") -> dict[str, str]:
    """An agent's cells of a terminal table, by short header (numbers are right-aligned
    under their header, so a cell ends where its header does)."""
    lines = text.splitlines()
    header = next(line for line in lines if " agent " in f" {line} ")
    row = next(line for line in lines if line.split()[:1] == [agent])
    cells = {}
    for name in ("success", "verif", "unverif", "trust?", "cost $"):
        found = re.search(rf"(?<!\S){re.escape(name)}(?!\S)", header)
        if found:
            cells[name] = row[: found.end()].split()[-1]
    return cells


def _terminal(table: pd.DataFrame, width: int | None) -> dict[str, str]:
    console = Console(file=io.StringIO(), width=300)
    console.print(to_rich_table(table, max_width=width))
    text = console.file.getvalue()  # type: ignore[attr-defined]
    assert width is None or max(len(line.rstrip()) for line in text.splitlines()) <= width
    return terminal_cells(text)


def test_terminal_table_shows_the_verified_figures(episodes):
    table = leaderboard(episodes)
    narrow = _terminal(table, 80)
    # The verified rate fits 80 columns, ahead of cost.
    assert (narrow["success"], narrow["verif"]) == ("0.600", "0.200")
    assert "cost $" not in narrow
    wide = _terminal(table, None)
    assert (wide["verif"], wide["unverif"], wide["trust?"], wide["cost $"]) == (
        "0.200",
        "1",
        "1",
        "2.50",
    )
    # Once every pass records its trust, the column of unknown trust is left out.
    known = _terminal(leaderboard(episodes[episodes["grader_trusted"].notna()]), None)
    assert known["unverif"] == "1" and "trust?" not in known


def test_breakdown_and_comparison_take_verified_only(tmp_path, out, episodes, make_record):
    per_task = breakdown(episodes, "task_id", verified_only=True).set_index(["agent", "task_id"])
    assert per_task.loc[("alpha", "t-trusted"), "success_rate"] == 1.0
    assert per_task.loc[("alpha", "t-untrusted"), "success_rate"] == 0.0
    assert per_task.loc[("alpha", "t-unknown"), "success_rate"] == 0.0
    assert (
        breakdown(episodes, "task_id")
        .set_index(["agent", "task_id"])
        .loc[("alpha", "t-untrusted"), "success_rate"]
        == 1.0
    )
    _write(out, make_record, [("alpha", "t-untrusted", 0, OK, True, None)], run="later")
    both = read_episodes(out, columns=list(LEADERBOARD_INPUT_COLUMNS))
    both = both[both["agent"] == "alpha"]
    assert compare_runs(both, RUN, "later").counts["same"] == 1
    assert compare_runs(both, RUN, "later", verified_only=True).counts["fixed"] == 1


def test_passes_not_verified_by_reason(out):
    rows = read_episode_table(out, RUN, list(TRUST_INPUT_COLUMNS), ordered=True)
    groups = passes_not_verified(rows)
    assert [(g.trusted, g.reason, g.passes, g.episodes) for g in groups] == [
        (False, WHY, 1, [("alpha", "t-untrusted")]),
        (None, None, 1, [("alpha", "t-unknown")]),
    ]


def test_an_episode_reads_as_the_board_counts_it():
    assert trust_text(row_trust(True), None).startswith("verified")
    assert trust_text(row_trust(False), WHY) == f"unverified: {WHY}"
    for missing in (None, math.nan, pd.NA):
        assert trust_text(row_trust(missing), None).startswith("unknown")
