"""``crabray audit``: which tasks of a suite can be passed without doing them.

The oracle and noop play each task k times and every probe
(``crabray.agents.probes``) plays it once, in one ordinary run; the findings
are read from its rows. See ``docs/audit.md``.
"""

from crabray.audit.runner import AuditOptions, audit_report, probe_kinds, run_audit

__all__ = ["AuditOptions", "audit_report", "probe_kinds", "run_audit"]
