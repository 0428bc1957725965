"""The site's audit page: each ``crabray audit`` of the results root, task by task.

It reads the reports ``crabray audit`` wrote under ``OUT/audits/``
(``crabray.results.store.audit``): nothing is recomputed here, so the page
says what the command printed.
"""

from __future__ import annotations

from pathlib import Path

from crabray.results.site._html import render
from crabray.results.store.audit import FINDING_CLASSES, AuditReport, read_audits

AUDIT_PAGE = "audit.html"


def audit_reports(out_dir: Path) -> list[AuditReport]:
    """The audits of a results root, newest first."""
    return list(reversed(read_audits(out_dir)))


def render_audit(reports: list[AuditReport], title: str) -> str:
    """The audit page: per audit, its figure, the verdicts table and each finding."""
    return render(
        "audit.html",
        title=title,
        reports=reports,
        classes=FINDING_CLASSES,
        live=None,
        version="",
    )
