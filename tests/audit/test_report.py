"""What the audit's report says on the terminal when the infrastructure left verdicts unknown."""

from __future__ import annotations

from crabray.cli.audit import _unjudged
from crabray.cli.terminal import errors
from crabray.results.store.audit import AuditReport, TaskAudit
from crabray.results.store.root import ResultsRoot


def _report(verdicts: dict[str, str]) -> AuditReport:
    return AuditReport(
        run_id="20261205-000000-abcdef",
        suite="tasks/demo",
        repeats=2,
        probes=list(verdicts),
        counted=["do-nothing"],
        tasks=[TaskAudit(task_id="hello-file", verdicts=verdicts)],
        exploitable=0,
        share=0.0,
        low=0.0,
        high=0.0,
    )


def test_an_unknown_verdict_is_said_with_how_to_audit_it_again() -> None:
    with errors.capture() as shown:
        count = _unjudged(
            _report({"oracle": "pass 2/2", "probe-peek": "error"}), ResultsRoot("out")
        )
    assert count == 1
    text = " ".join(shown.get().split())
    assert "1 verdict unknown" in text and "hello-file (probe-peek)" in text
    assert "crabray audit --resume 20261205-000000-abcdef --out out" in text


def test_a_clean_audit_says_nothing_more() -> None:
    with errors.capture() as shown:
        assert (
            _unjudged(_report({"oracle": "pass 2/2", "probe-peek": "clean"}), ResultsRoot("out"))
            == 0
        )
    assert shown.get() == ""
