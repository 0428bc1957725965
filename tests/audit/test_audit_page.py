"""The static site's audit page shows what ``crabray audit`` reported, task by task."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import ROOT, crabray

pytestmark = [pytest.mark.ray, pytest.mark.slow]


def test_site_has_the_audit_page(tmp_path: Path) -> None:
    out, site = tmp_path / "out", tmp_path / "site"
    audited = crabray(
        "audit", str(ROOT / "tests" / "audit" / "flawed_suite.py"), "--out", str(out),
        "--task", "flaw-do-nothing", "--task", "clean-reverse", "--probe", "probe-empty",
        "-k", "1",
        env={"FLAWED_SUITE_COUNTER": str(tmp_path / "tally")},
    )  # fmt: skip
    assert audited.returncode == 1, audited.stderr
    crabray("leaderboard", str(out), "--html", str(site), check=True)
    page = (site / "audit.html").read_text(encoding="utf-8")
    assert "1 of 2</strong> tasks exploitable" in page
    assert "passed 1 of 1 episode without acting" in page
    assert "falls</span> flaw-do-nothing</th>" in page
    assert '<tr class="clean"><th scope="row">clean-reverse</th>' in page
    index = (site / "index.html").read_text(encoding="utf-8")
    assert 'href="audit.html"' in index


def test_site_without_an_audit_has_no_audit_page(tmp_path: Path) -> None:
    out, site = tmp_path / "out", tmp_path / "site"
    crabray("run", "tasks/demo", "-a", "noop", "--limit", "1", "--out", str(out), check=True)
    crabray("leaderboard", str(out), "--html", str(site), check=True)
    assert not (site / "audit.html").exists()
    assert 'href="audit.html"' not in (site / "index.html").read_text(encoding="utf-8")
