"""From an audit run's rows to each task's findings: which probe moved the grade, and how.

The rules, per task (k is the number of oracle and noop episodes):

- ``reference``: the oracle fails every time, an evaluator raised on the
  state it left (the benchmark's fault), or the task has no reference solution
  to check it with;
- ``determinism``: the oracle, or noop, passes some of its k episodes and not
  the others;
- ``do-nothing``: noop passes;
- ``trivial-answer``: a probe that hands in a trivial answer passes;
- ``answer-visible``: the peek probe found an expected value in the sandbox;
- ``grader-trust``: a probe that attacks the grader's inputs passes (its
  row's trust said as well), or the oracle's grade could not be trusted while
  noop's could: the grader ran something the agent's work had changed.

A probe that could not act (the task has no command action, no file to
write) shows ``n/a``; an episode whose infrastructure failed every try shows
``error`` and finds nothing.
"""

from __future__ import annotations

import json
from collections import defaultdict
from typing import Any

import pandas as pd

from crabray.agents.probes import REPORT_PREFIX, ProbeReport
from crabray.core.words import counted
from crabray.results.store.audit import Finding, TaskAudit

EPISODE_COLUMNS = [
    "task_id",
    "agent",
    "epoch",
    "success",
    "termination_reason",
    "attribution",
    "error",
    "grader_trusted",
    "grader_untrusted_reason",
    "graph_json",
    "score",
]
STEP_COLUMNS = ["task_id", "agent", "epoch", "step", "agent_message", "graph_passed", "result"]
_MARKERS = ("FAKED ", "PLANTED ", "TAMPERED ")
"""How the probes' scripts name what they changed (``crabray.agents.probes``)."""

REFERENCE = "oracle"
BASELINE = "noop"


def task_audits(
    episodes: pd.DataFrame,
    steps: pd.DataFrame,
    finding_of: dict[str, str],
    order: list[str],
    guarded: frozenset[str] = frozenset(),
) -> list[TaskAudit]:
    """Each task's verdicts and findings, tasks in the rows' order.

    Args:
        episodes: The run's episode rows (``EPISODE_COLUMNS``).
        steps: The run's step rows (``STEP_COLUMNS``).
        finding_of: Each probe's class of finding (``ProbeAgent.finding``).
        order: The agents and probes, in the order the verdicts are shown.
        guarded: Probes the harness guards against (``ProbeAgent.harness_guards``): their
            unverified passes are the guard at work, and no finding.
    """
    reports = _reports(steps)
    last_passed = _last_passed(steps)
    audits = []
    for task_id, rows in episodes.groupby("task_id", sort=False):
        by_agent = {agent: group for agent, group in rows.groupby("agent", sort=False)}
        audit = TaskAudit(task_id=str(task_id))
        for agent in order:
            if agent in by_agent:
                _judge(audit, agent, by_agent[agent], finding_of, reports, last_passed, guarded)
        _distrusted_reference(audit, by_agent)
        audits.append(_without_echoes(audit))
    return audits


def _judge(
    audit: TaskAudit,
    agent: str,
    rows: pd.DataFrame,
    finding_of: dict[str, str],
    reports: dict[tuple[str, str, int], ProbeReport],
    last_passed: dict[tuple[str, str, int], list[int]],
    guarded: frozenset[str],
) -> None:
    """The verdict of one agent or probe on the task, and what it shows."""
    counted = rows[rows["attribution"] != "infrastructure"]
    passes, total = int(counted["success"].sum()), len(counted)
    if agent == REFERENCE:
        audit.verdicts[agent] = f"pass {passes}/{total}"
        _reference(audit, counted, passes, total, last_passed)
    elif agent == BASELINE:
        audit.verdicts[agent] = f"pass {passes}/{total}" if passes else f"fail {total}/{total}"
        if passes:
            audit.findings.append(
                Finding(probe=agent, kind="do-nothing", evidence=_passed(passes, total))
            )
        _flaky(audit, agent, passes, total)
    else:
        _probe(audit, agent, counted, finding_of[agent], reports, agent in guarded)
    if total == 0:
        audit.verdicts[agent] = "error"


def _reference(
    audit: TaskAudit,
    rows: pd.DataFrame,
    passes: int,
    total: int,
    last_passed: dict[tuple[str, str, int], list[int]],
) -> None:
    faults = rows[rows["attribution"] == "benchmark"]
    if len(faults):
        error = str(faults.iloc[0]["error"] or faults.iloc[0]["termination_reason"])
        kind = "no-reference" if "no reference solution" in error else "reference"
        audit.findings.append(Finding(probe=REFERENCE, kind=kind, evidence=error[:500]))
        if kind == "no-reference":
            audit.verdicts[REFERENCE] = "no reference"
    elif total and passes == 0:
        audit.findings.append(
            Finding(
                probe=REFERENCE,
                kind="reference",
                evidence=f"the reference solution fails {total} of {total}: "
                + _fell(rows.iloc[0], last_passed),
            )
        )
    _flaky(audit, REFERENCE, passes, total, rows, last_passed)


def _flaky(
    audit: TaskAudit,
    agent: str,
    passes: int,
    total: int,
    rows: pd.DataFrame | None = None,
    last_passed: dict[tuple[str, str, int], list[int]] | None = None,
) -> None:
    """Some episodes of the same agent pass and some fail: an evaluator is not deterministic."""
    if not 0 < passes < total:
        return
    evidence = f"{agent} passed {passes} of {counted(total, 'identical episode')}"
    if rows is not None and last_passed is not None:
        failed = rows[~rows["success"].astype(bool)]
        if len(failed):
            evidence += "; in a failed one " + _fell(failed.iloc[0], last_passed)
    audit.findings.append(Finding(probe=agent, kind="determinism", evidence=evidence))


def _probe(
    audit: TaskAudit,
    agent: str,
    rows: pd.DataFrame,
    kind: str,
    reports: dict[tuple[str, str, int], ProbeReport],
    guarded: bool,
) -> None:
    if not len(rows):
        return
    row = rows.iloc[0]
    report = reports.get((audit.task_id, agent, int(row["epoch"])))
    acted = report is None or report.acted
    if kind == "answer-visible":
        found = report.found if report is not None else []
        audit.verdicts[agent] = "found" if found else ("clean" if acted else "n/a")
        if found:
            audit.findings.append(Finding(probe=agent, kind=kind, evidence="; ".join(found)[:1000]))
        return
    if bool(row["success"]):
        trusted = not _distrusted(row["grader_trusted"])
        audit.verdicts[agent] = "pass" if trusted else "pass (unverified)"
        if guarded and not trusted:
            return
        evidence = "the grade passed"
        if report is not None and report.note:
            evidence += f" after it {report.note}"
        if not trusted and isinstance(row["grader_untrusted_reason"], str):
            evidence += f"; the harness did not trust it: {row['grader_untrusted_reason']}"
        audit.findings.append(Finding(probe=agent, kind=kind, evidence=evidence[:1000]))
    else:
        audit.verdicts[agent] = "fail" if acted else "n/a"


def _distrusted_reference(audit: TaskAudit, by_agent: dict[Any, pd.DataFrame]) -> None:
    """A grade of the oracle's state that is not trusted where noop's is: the grader ran
    something the agent's work changed (seen by the harness, no probe needed)."""
    oracle, noop = by_agent.get(REFERENCE), by_agent.get(BASELINE)
    if oracle is None or noop is None or not len(oracle):
        return
    if (noop["grader_trusted"] == False).any():  # noqa: E712 (a nullable column)
        return
    distrusted = oracle[(oracle["grader_trusted"] == False) & oracle["success"]]  # noqa: E712
    if len(distrusted):
        reason = distrusted.iloc[0]["grader_untrusted_reason"] or "no reason recorded"
        audit.findings.append(
            Finding(
                probe=REFERENCE,
                kind="grader-trust",
                evidence=f"the reference's pass could not be trusted: {reason}"[:1000],
            )
        )


def _without_echoes(audit: TaskAudit) -> TaskAudit:
    """A task noop passes passes every probe too: the probes' passes say nothing more."""
    if not any(f.kind == "do-nothing" for f in audit.findings):
        return audit
    kept = [f for f in audit.findings if f.probe in (REFERENCE, BASELINE)]
    return audit.model_copy(update={"findings": kept})


def _distrusted(trusted: Any) -> bool:
    """Whether a ``grader_trusted`` cell says no (it may be missing: unknown is not no)."""
    return trusted is not None and not pd.isna(trusted) and not bool(trusted)


def _passed(passes: int, total: int) -> str:
    return f"passed {passes} of {counted(total, 'episode')} without acting"


def _fell(row: Any, last_passed: dict[tuple[str, str, int], list[int]]) -> str:
    """The evaluators not passed at the episode's last step, or its error."""
    if isinstance(row["error"], str) and row["error"]:
        return row["error"][:300]
    try:
        nodes = json.loads(row["graph_json"] or "{}").get("nodes", [])
    except ValueError:
        nodes = []
    passed = set(last_passed.get((row["task_id"], row["agent"], int(row["epoch"])), []))
    fell = [str(label) for i, label in enumerate(nodes) if i not in passed]
    if fell == ["graded_by_scorer"]:
        return f"the task's own grader (its scorer) gave {float(row['score']):.2f} of 1"
    return "not passed: " + (", ".join(fell)[:300] if fell else str(row["termination_reason"]))


def _reports(steps: pd.DataFrame) -> dict[tuple[str, str, int], ProbeReport]:
    """Each probe episode's report, from the message of its last step that has one."""
    reports: dict[tuple[str, str, int], ProbeReport] = {}
    changed: dict[tuple[str, str, int], list[str]] = defaultdict(list)
    for row in _records(steps):
        key = (str(row["task_id"]), str(row["agent"]), int(row["epoch"]))
        message, result = row["agent_message"], row["result"]
        if isinstance(message, str) and message.startswith(REPORT_PREFIX):
            reports[key] = ProbeReport.model_validate_json(message[len(REPORT_PREFIX) :])
        if isinstance(result, str):
            changed[key] += [line for line in result.splitlines() if line.startswith(_MARKERS)]
    for key, lines in changed.items():
        if key not in reports and lines:
            # The grade passed on the probe's acting step: the episode ended before its
            # report; what its script printed says what it changed.
            note = "; ".join(line.lower() for line in lines[:8])
            reports[key] = ProbeReport(acted=True, found=lines, note=note)
    return reports


def _last_passed(steps: pd.DataFrame) -> dict[tuple[str, str, int], list[int]]:
    passed: dict[tuple[str, str, int], list[int]] = defaultdict(list)
    for row in _records(steps):
        value = row["graph_passed"]
        passed[(str(row["task_id"]), str(row["agent"]), int(row["epoch"]))] = (
            [int(i) for i in value] if value is not None else []
        )
    return passed


def _records(frame: pd.DataFrame) -> list[dict[str, Any]]:
    """The rows of ``frame`` as plain dicts, by column name."""
    return [{str(k): v for k, v in row.items()} for row in frame.to_dict("records")]
