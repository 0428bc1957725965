"""What a default report counts (issue 25): suites apart, a re-run replacing, epochs clustered.

Results are written with the real ``ResultSink`` and manifests, and read back
through the real ``crabray leaderboard`` process.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

from crabray.core.result import EpisodeRecord, TerminationReason
from crabray.results import ResultSink, RunManifest, wilson_interval, write_manifest
from tests.conftest import crabray
from tests.results.conftest import build_record

OK, FAIL = TerminationReason.SUCCESS, TerminationReason.AGENT_FAIL


def _write_run(
    out: Path,
    run_id: str,
    suite: str,
    outcomes: dict[str, dict[str, list[TerminationReason]]],
    created: datetime,
) -> None:
    """A run of ``suite``: per agent, per task, one outcome per epoch; with its manifest."""
    records = [
        EpisodeRecord(
            result=build_record(
                task, run_id=run_id, agent=agent, epoch=epoch, reason=reason
            ).result.model_copy(update={"suite": suite}),
            steps=[],
        )
        for agent, tasks in outcomes.items()
        for task, reasons in tasks.items()
        for epoch, reason in enumerate(reasons)
    ]
    ResultSink(out, run_id).write(records)
    write_manifest(
        out,
        RunManifest(
            run_id=run_id,
            suite=suite,
            suite_name=suite,
            agents=list(outcomes),
            created_at=created,
            crabray_version="test",
        ),
    )


def _rows(out: Path, *options: str) -> tuple[list[dict], str]:
    done = crabray("leaderboard", str(out), "-f", "json", *options, check=True)
    return json.loads(done.stdout), done.stderr


@pytest.fixture
def two_suites(tmp_path: Path) -> Path:
    """Suite A run by the oracle (3 tasks); then suite B by the oracle and a weak agent (2)."""
    _write_run(
        tmp_path,
        "20261101-090000-aaaaaa",
        "suites/a",
        {"oracle": {"a1": [OK], "a2": [OK], "a3": [OK]}},
        datetime(2026, 11, 1, 9, 0, tzinfo=UTC),
    )
    _write_run(
        tmp_path,
        "20261102-090000-bbbbbb",
        "suites/b",
        {"oracle": {"b1": [OK], "b2": [OK]}, "weak": {"b1": [OK], "b2": [FAIL]}},
        datetime(2026, 11, 2, 9, 0, tzinfo=UTC),
    )
    return tmp_path


def test_two_suites_are_shown_apart_and_name_their_runs(two_suites: Path) -> None:
    rows, stderr = _rows(two_suites)
    episodes = {(row["suite"], row["agent"]): row["episodes"] for row in rows}
    assert episodes == {
        ("suites/a", "oracle"): 3,
        ("suites/b", "oracle"): 2,
        ("suites/b", "weak"): 2,
    }, "never one oracle row of 5 over both suites"
    assert "suite suites/a: runs: 20261101-090000-aaaaaa (created 2026-11-01 09:00 UTC)" in stderr
    assert "suite suites/b: runs: 20261102-090000-bbbbbb (created 2026-11-02 09:00 UTC)" in stderr
    md = crabray("leaderboard", str(two_suites), "-f", "md", check=True).stdout
    a, b = md.split("### leaderboard · suite suites/b")
    assert a.startswith("### leaderboard · suite suites/a")
    assert "runs: 20261101-090000-aaaaaa (created 2026-11-01 09:00 UTC)" in a
    assert "| oracle |  | 3 | 3 |" in a and "weak" not in a
    assert "runs: 20261102-090000-bbbbbb (created 2026-11-02 09:00 UTC)" in b
    assert "| oracle |  | 2 | 2 |" in b and "| weak |  | 2 | 1 |" in b
    table = crabray("leaderboard", str(two_suites), check=True).stdout
    assert "leaderboard · suite suites/a" in table and "leaderboard · suite suites/b" in table
    assert "20261101-090000-aaaaaa" in table and "20261102-090000-bbbbbb" in table


def test_the_same_run_twice_replaces_and_does_not_double(two_suites: Path) -> None:
    # The weak agent's suite B again: now it fails both tasks.
    _write_run(
        two_suites,
        "20261103-090000-cccccc",
        "suites/b",
        {"weak": {"b1": [FAIL], "b2": [FAIL]}},
        datetime(2026, 11, 3, 9, 0, tzinfo=UTC),
    )
    rows, stderr = _rows(two_suites)
    by_key = {(row["suite"], row["agent"]): row for row in rows}
    weak = by_key["suites/b", "weak"]
    assert (weak["episodes"], weak["successes"]) == (2, 0), "the re-run replaced the first run"
    assert by_key["suites/b", "oracle"]["episodes"] == 2, "the oracle's run still counts"
    assert (
        "suite suites/b: runs: 20261103-090000-cccccc (created 2026-11-03 09:00 UTC), "
        "20261102-090000-bbbbbb (created 2026-11-02 09:00 UTC)"
    ) in stderr
    summed, stderr = _rows(two_suites, "--all-runs")
    weak = {(row["suite"], row["agent"]): row for row in summed}["suites/b", "weak"]
    assert (weak["episodes"], weak["successes"]) == (4, 1)
    assert "every run summed (--all-runs: a task run twice counts twice)" in stderr
    only = crabray("leaderboard", str(two_suites), "--run", "latest", "-f", "json", check=True)
    assert [row["episodes"] for row in json.loads(only.stdout)] == [2]
    assert "run 20261103-090000-cccccc, suite suites/b" in only.stderr


def test_epochs_widen_the_interval_beyond_independent_wilson(tmp_path: Path) -> None:
    """11 tasks x 3 epochs, all solved: the interval is that of 11 tasks, not 33 episodes."""
    tasks = {f"t{index:02d}": [OK, OK, OK] for index in range(11)}
    _write_run(tmp_path, "20261101-090000-eeeeee", "suites/e", {"oracle": tasks}, datetime.now(UTC))
    (row,), _ = _rows(tmp_path)
    assert (row["episodes"], row["successes"]) == (33, 33)
    independent = wilson_interval(33, 33)
    assert round(independent[0], 2) == 0.9  # what the issue saw: 0.90-1.00
    assert row["success_ci_low"] == pytest.approx(wilson_interval(11, 11)[0])
    assert row["success_ci_low"] < independent[0] - 0.1
    assert row["pass@3"] == 1.0 and row["pass^3"] == 1.0  # pass@k as before
