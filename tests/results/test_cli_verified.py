"""The grader's trust on the command line: ``crabray leaderboard [--verified-only]`` in
every format, and the block at the end of ``crabray run`` that names unverified passes."""

from __future__ import annotations

import io
import json

import pandas as pd
import pytest
from rich.console import Console

from crabray.cli import outcomes, run
from crabray.cli.options import DEFAULT_ROOT
from crabray.cli.submit import _entrypoint
from tests.conftest import crabray
from tests.results.test_trust import EPISODES, OK, RUN, WHY, _write, terminal_cells


@pytest.fixture
def out(tmp_path, make_record):
    _write(tmp_path, make_record)
    return tmp_path


def _json(out, *options: str) -> dict[str, dict]:
    done = crabray("leaderboard", str(out), "--run", RUN, "-f", "json", *options, check=True)
    return {row["agent"]: row for row in json.loads(done.stdout)}


def test_json_csv_and_md_carry_the_verified_figures(out):
    alpha = _json(out)["alpha"]
    assert (alpha["success_rate"], alpha["verified_success_rate"]) == (0.6, 0.2)
    assert (alpha["unverified_passes"], alpha["unknown_trust_passes"]) == (1, 1)
    csv = crabray("leaderboard", str(out), "--run", RUN, "-f", "csv", check=True).stdout
    row = pd.read_csv(io.StringIO(csv)).set_index("agent").loc["alpha"]
    assert (row["verified_success_rate"], row["unverified_passes"]) == (0.2, 1)
    md = crabray("leaderboard", str(out), "--run", RUN, "-f", "md", check=True).stdout
    header, _, *rows = [line.strip("|").split("|") for line in md.splitlines() if line]
    cells = dict(zip([h.strip() for h in header], [c.strip() for c in rows[0]], strict=True))
    assert cells["agent"] == "bravo"  # rate 1.0 first
    alpha_md = dict(zip([h.strip() for h in header], [c.strip() for c in rows[1]], strict=True))
    assert (alpha_md["verified_success_rate"], alpha_md["unverified_passes"]) == ("0.200", "1")


def test_verified_only_changes_the_success_rate(out):
    strict = _json(out, "--verified-only")
    assert strict["alpha"]["success_rate"] == pytest.approx(0.2)
    assert strict["alpha"]["successes"] == 1 and strict["alpha"]["episodes"] == 5
    assert strict["bravo"]["success_rate"] == 1.0
    table = crabray("leaderboard", str(out), "--run", RUN, "--verified-only", check=True).stdout
    assert "leaderboard (verified passes only)" in table
    # The table is as wide as the terminal (200 columns): every trust column and the cost.
    passes_left_out = {"unverif": "1", "trust?": "1", "cost $": "2.50"}
    # The success rate is the verified rate here: the verified column would repeat it.
    assert terminal_cells(table) == {"success": "0.200", **passes_left_out}
    usual = crabray("leaderboard", str(out), "--run", RUN, check=True).stdout
    assert terminal_cells(usual) == {"success": "0.600", "verif": "0.200", **passes_left_out}


def test_verified_only_in_a_breakdown(out):
    done = crabray(
        "leaderboard", str(out), "--run", RUN, "--by", "task_id", "--verified-only", "-f", "json"
    )
    rows = {(r["agent"], r["task_id"]): r["success_rate"] for r in json.loads(done.stdout)}
    assert rows["alpha", "t-trusted"] == 1.0 and rows["alpha", "t-untrusted"] == 0.0


def test_the_options_are_offered():
    assert "--verified-only" in crabray("leaderboard", "--help", check=True).stdout
    assert "--verified-only" in crabray("run", "--help", check=True).stdout
    assert _entrypoint(DEFAULT_ROOT, verified_only=True).endswith(" --verified-only")
    assert "--verified-only" not in _entrypoint(DEFAULT_ROOT)


def _printed(monkeypatch, out, verified_only: bool) -> str:
    console = Console(file=io.StringIO(), width=200, no_color=True)
    monkeypatch.setattr(outcomes, "console", console)
    run._print_unverified(out, RUN, verified_only)
    return console.file.getvalue()  # type: ignore[attr-defined]


def test_the_run_summary_names_unverified_passes(monkeypatch, out):
    text = _printed(monkeypatch, out, verified_only=False)
    lines = text.splitlines()
    assert lines[0].startswith("1 pass unverified (graded by a path the agent could alter)")
    assert "counted as successes above" in lines[0]
    assert lines[1] == f"  1 x t-untrusted (alpha): {WHY}"
    assert lines[2].startswith("1 pass of unknown trust")
    assert lines[3] == "  1 x t-unknown (alpha)"
    assert "t-fail" not in text and "t-trusted" not in text  # failures and verified passes
    assert "counted as failures above (--verified-only)" in _printed(monkeypatch, out, True)


def test_the_run_summary_escapes_row_text(monkeypatch, tmp_path, make_record):
    """A reason and a task id may hold markup and escape sequences: shown, never obeyed."""
    reason = "[bold red]forged[/] \x1b[2Jcleared\nsecond line"
    rows = [("solo", "[red]t[/red]", 0, OK, False, reason)]
    rows += [("solo", f"more-{i}", 0, OK, False, reason) for i in range(6)]
    _write(tmp_path, make_record, rows)
    text = _printed(monkeypatch, tmp_path, verified_only=False)
    assert text.startswith("7 passes unverified")
    line = text.splitlines()[1]
    assert line.startswith("  7 x [red]t[/red], more-0, more-1, more-2, more-3 and 2 more: ")
    assert line.endswith("[bold red]forged[/] cleared second line")
    assert "\x1b" not in text


def test_nothing_is_said_when_every_pass_is_verified(monkeypatch, tmp_path, make_record):
    _write(tmp_path, make_record, [row for row in EPISODES if row[0] == "bravo"])
    assert _printed(monkeypatch, tmp_path, verified_only=False) == ""
