"""An audit's report: per task, what each probe did and the flaws found (``OUT/audits/``).

``crabray audit`` writes one report per audit run beside the run's rows; the
static site's audit page and ``crabray audit --format json`` read it back.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, Field

from crabray.core.errors import ResultsError

AUDITS_DIR = "audits"

FINDING_CLASSES = (
    "reference",
    "no-reference",
    "do-nothing",
    "trivial-answer",
    "answer-visible",
    "grader-trust",
    "determinism",
)
"""Every class of finding, in the order a report shows them."""

EXPLOIT_CLASSES = ("do-nothing", "trivial-answer", "answer-visible", "grader-trust")
"""The classes that say the task can be passed without doing it: what the exploitability
figure counts (a broken reference or a flaky evaluator is a flaw of another kind)."""


class Finding(BaseModel):
    """One way the task's grade moves without the task being done, with its evidence."""

    probe: str = Field(description="The agent or probe that showed it (oracle, noop, probe-...).")
    kind: str = Field(description="Its class: one of FINDING_CLASSES.")
    evidence: str = Field(description="What happened: the evaluator, the state, what was found.")


class TaskAudit(BaseModel):
    """One task's audit: a verdict per probe, and the findings."""

    task_id: str
    verdicts: dict[str, str] = Field(
        default_factory=dict,
        description="Probe -> what it did: 'pass 3/3', 'fail', 'found', 'n/a', ...",
    )
    findings: list[Finding] = Field(default_factory=list)


class AuditReport(BaseModel):
    """A suite's audit: each task's findings, and the share of tasks that fall."""

    run_id: str
    suite: str
    repeats: int = Field(description="Episodes of the oracle and of noop per task (k).")
    probes: list[str] = Field(description="The agents and probes run, in the table's order.")
    counted: list[str] = Field(
        description="The finding classes that make a task exploitable (--fail-on)."
    )
    tasks: list[TaskAudit]
    exploitable: int = Field(
        description="Tasks that fall to at least one probe: a counted finding of an "
        "EXPLOIT_CLASSES class."
    )
    failing: int = Field(
        default=0, description="Tasks with a finding of a counted class (the exit code's)."
    )
    share: float = Field(description="exploitable / tasks.")
    low: float = Field(description="Lower end of the share's 95% Wilson interval.")
    high: float = Field(description="Upper end of the share's 95% Wilson interval.")

    def falls(self, task: TaskAudit) -> bool:
        """Whether ``task`` falls to a probe: a counted finding of an exploit class."""
        return falls(task, self.counted)


def falls(task: TaskAudit, counted: list[str]) -> bool:
    """Whether ``task`` falls to a probe: a finding of a counted exploit class."""
    return any(f.kind in counted and f.kind in EXPLOIT_CLASSES for f in task.findings)


def fails(task: TaskAudit, counted: list[str]) -> bool:
    """Whether ``task`` has a finding of a counted class (``--fail-on``)."""
    return any(f.kind in counted for f in task.findings)


def audit_path(out_dir: str | Path, run_id: str) -> Path:
    return Path(out_dir) / AUDITS_DIR / f"{run_id}.json"


def write_audit(out_dir: str | Path, report: AuditReport) -> Path:
    """Write ``report`` (atomically: a reader never sees half of it)."""
    path = audit_path(out_dir, report.run_id)
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(".json.partial")
    partial.write_text(report.model_dump_json(indent=2), encoding="utf-8")
    partial.replace(path)
    return path


def read_audits(out_dir: str | Path) -> list[AuditReport]:
    """Every audit report of a results root, oldest run first.

    Raises:
        ResultsError: A report is not readable.
    """
    folder = Path(out_dir) / AUDITS_DIR
    if not folder.is_dir():
        return []
    reports = []
    for path in sorted(folder.glob("*.json")):
        try:
            reports.append(AuditReport.model_validate_json(path.read_text(encoding="utf-8")))
        except (OSError, ValueError) as exc:
            raise ResultsError(f"cannot read audit report {path}: {exc}") from exc
    return reports
