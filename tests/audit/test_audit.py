"""``crabray audit`` end to end: each seeded flaw named, no clean task flagged, bad input exit 2."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from crabray.results import read_episodes
from crabray.results.store.audit import read_audits
from tests.conftest import ROOT, crabray

pytestmark = [pytest.mark.ray, pytest.mark.slow]

FLAWED = ROOT / "tests" / "audit" / "flawed_suite.py"

EXPECTED = {
    "clean-reverse": set(),
    "clean-release-code": set(),
    "flaw-do-nothing": {("noop", "do-nothing")},
    "flaw-answer-visible": {("probe-peek", "answer-visible")},
    "flaw-grader-runs-agent-code": {("probe-tamper-scripts", "grader-trust")},
    "flaw-flaky-evaluator": {("oracle", "determinism")},
    "flaw-trivial-submission": {
        ("probe-echo", "trivial-answer"),
        ("probe-every-option", "trivial-answer"),
    },
}


def _audit(tmp_path: Path, *args: str) -> tuple[int, list[dict], Path]:
    """Audit the flawed suite one episode at a time; the JSON report when asked for."""
    out = tmp_path / "out"
    env = {"FLAWED_SUITE_COUNTER": str(tmp_path / "tally")}
    done = crabray("audit", str(FLAWED), "--out", str(out), "--concurrency", "1", *args, env=env)
    shown = json.loads(done.stdout) if "json" in args else []
    return done.returncode, shown, out


def test_audit_names_each_flawed_task_and_its_flaw_and_no_clean_one(tmp_path: Path) -> None:
    code, tasks, out = _audit(tmp_path, "--format", "json")
    assert code == 1
    found = {task["task_id"]: {(f["probe"], f["kind"]) for f in task["findings"]} for task in tasks}
    assert found == EXPECTED
    by_id = {task["task_id"]: task for task in tasks}
    evidence = by_id["flaw-answer-visible"]["findings"][0]["evidence"]
    assert '"orchid-7731-tango"' in evidence and ".cache/build/expected.txt" in evidence
    tampered = by_id["flaw-grader-runs-agent-code"]["findings"][0]["evidence"]
    assert "check.sh" in tampered
    flaky = by_id["flaw-flaky-evaluator"]["findings"][0]["evidence"]
    assert "passed 2 of 3" in flaky and "warmed_up" in flaky
    assert by_id["clean-reverse"]["verdicts"]["oracle"] == "pass 3/3"
    assert by_id["clean-reverse"]["verdicts"]["noop"] == "fail 3/3"

    # The audit's episodes are ordinary rows; its report is kept beside them.
    rows = read_episodes(out, columns=["task_id", "agent", "epoch"])
    oracle = rows[rows.agent == "oracle"]
    probes = rows[rows.agent == "probe-peek"]
    assert len(oracle) == 3 * len(EXPECTED) and len(probes) == len(EXPECTED)
    (report,) = read_audits(out)
    # The flaky evaluator fails the audit but is no exploit: 4 tasks fall, 5 fail.
    assert report.exploitable == 4 and report.failing == 5 and len(report.tasks) == 7
    assert 0.0 < report.low < report.share < report.high < 1.0

    # A resumed audit runs nothing again and reports the same.
    again = crabray("audit", "--resume", "latest", "--out", str(out), "--format", "json")
    assert again.returncode == 1
    assert {t["task_id"]: len(t["findings"]) for t in json.loads(again.stdout)} == {
        task_id: len(flaws) for task_id, flaws in EXPECTED.items()
    }
    assert len(read_episodes(out, columns=["task_id"])) == len(rows)

    # At 80 columns the table names, per task, the probes that moved its grade.
    narrow = crabray("audit", "--resume", "latest", "--out", str(out), env={"COLUMNS": "80"})
    assert all(len(line) <= 80 for line in narrow.stdout.splitlines())
    assert "probes that moved" in narrow.stdout
    (row,) = [line for line in narrow.stdout.splitlines() if "│ flaw-answer-visible " in line]
    assert "pass 3/3" in row and "peek" in row


def test_audit_table_and_fail_on(tmp_path: Path) -> None:
    """--fail-on counts only the classes named: the table still shows every finding."""
    code, _, _ = _audit(
        tmp_path,
        "--task",
        "clean-*",
        "--task",
        "flaw-answer-visible",
        "--probe",
        "probe-peek",
        "-k",
        "1",
        "--fail-on",
        "do-nothing,determinism",
    )
    assert code == 0
    code, _, _ = _audit(
        tmp_path, "--task", "flaw-answer-visible", "--probe", "probe-peek", "-k", "1"
    )
    assert code == 1


def test_audit_table_shows_findings_and_the_share(tmp_path: Path) -> None:
    out = tmp_path / "out"
    env = {"FLAWED_SUITE_COUNTER": str(tmp_path / "tally"), "COLUMNS": "120"}
    done = crabray(
        "audit",
        str(FLAWED),
        "--out",
        str(out),
        "--task",
        "flaw-do-nothing",
        "--task",
        "clean-reverse",
        "--probe",
        "probe-empty",
        "-k",
        "2",
        env=env,
    )
    assert done.returncode == 1, done.stderr
    assert "flaw-do-nothing  do-nothing  noop: passed 2 of 2 episodes without acting" in (
        done.stdout
    )
    assert "exploitable: 1 of 2 tasks (50%, 95% interval" in done.stdout


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--probe", "probe-nothing"], "not a probe: probe-nothing"),
        (["--fail-on", "cheating"], "unknown finding class cheating"),
        (["--address", "http://127.0.0.1:8265"], "not submitted to a head's job API"),
    ],
)
def test_audit_bad_input_exits_2(tmp_path: Path, args: list[str], message: str) -> None:
    done = crabray("audit", str(FLAWED), "--out", str(tmp_path / "out"), *args)
    assert done.returncode == 2
    assert message in done.stderr
    assert "Traceback" not in done.stderr


def test_demo_suite_audit_is_clean(tmp_path: Path) -> None:
    """The shipped demo suite falls to no probe (CI runs this audit)."""
    done = crabray(
        "audit", "tasks/demo", "-k", "2", "--out", str(tmp_path / "out"), "--format", "json"
    )
    assert done.returncode == 0, done.stdout + done.stderr
    tasks = json.loads(done.stdout)
    assert len(tasks) == 11
    assert all(task["findings"] == [] for task in tasks)
