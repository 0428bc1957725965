"""``crabray leaderboard`` as a user runs it: formats that parse back, --by, --compare."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from crabray.core.result import TerminationReason
from crabray.results import LEADERBOARD_COLUMNS, ResultSink
from tests.conftest import ROOT, crabray

OK, FAIL = TerminationReason.SUCCESS, TerminationReason.AGENT_FAIL


@pytest.fixture
def out(tmp_path, make_record) -> Path:
    """Run r1: alpha and bravo, two epochs of t1 and t2; run r2: alpha again, t2 fixed."""
    outcomes = {
        ("r1", "alpha"): {"t1": [OK, OK], "t2": [FAIL, FAIL]},
        ("r1", "bravo"): {"t1": [OK, FAIL], "t2": [FAIL, FAIL]},
        ("r2", "alpha"): {"t1": [OK, OK], "t2": [OK, OK]},
    }
    tags = {"t1": ["terminal", "easy"], "t2": ["files"]}
    for (run, agent), tasks in outcomes.items():
        records = [
            make_record(
                task,
                run_id=run,
                agent=agent,
                model="m",
                epoch=epoch,
                reason=reason,
                tags=tags[task],
                cost_usd=0.25,
            )
            for task, reasons in tasks.items()
            for epoch, reason in enumerate(reasons)
        ]
        ResultSink(tmp_path, run).write(records)
    return tmp_path


def test_json_and_csv_parse_back(out):
    rows = json.loads(
        crabray("leaderboard", str(out), "--run", "r1", "-f", "json", check=True).stdout
    )
    assert [row["agent"] for row in rows] == ["alpha", "bravo"]
    assert list(rows[0])[: len(LEADERBOARD_COLUMNS)] == list(LEADERBOARD_COLUMNS)
    assert rows[0]["success_rate"] == 0.5 and rows[1]["success_rate"] == 0.25
    assert rows[0]["pass@2"] == 0.5 and rows[1]["pass@2"] == 0.5
    assert rows[1]["pass^2"] == 0.0
    assert rows[0]["cost_per_success"] == pytest.approx(0.5)
    csv = crabray("leaderboard", str(out), "--run", "r1", "--format", "csv", check=True).stdout
    parsed = pd.read_csv(io.StringIO(csv))
    assert list(parsed["agent"]) == ["alpha", "bravo"]
    assert parsed["success_ci_low"].between(0, 1).all()


def test_markdown_and_terminal_table(out):
    md = crabray("leaderboard", str(out), "-f", "md", check=True).stdout.rstrip().splitlines()
    assert md[0] == "### leaderboard · suite tasks/demo"
    assert md[2] == "per task the latest run's episodes: runs: r2 (no manifest), r1 (no manifest)"
    assert md[4].startswith("| agent | model | episodes | successes | success_rate |")
    assert len(md) == 4 + 2 + 2  # alpha (its tasks as r2 re-ran them: r1's replaced) and bravo
    assert md[6].startswith("| alpha | m | 4 | 4 | 1.000 |")
    table = _at_width(80, "leaderboard", str(out))
    assert "leaderboard" in table and "95% CI" in table and "pass@2" in table
    assert max(len(line.rstrip()) for line in table.splitlines()) <= 80


def test_per_suite(out):
    rows = json.loads(crabray("leaderboard", str(out), "--per-suite", "-f", "json").stdout)
    assert {row["suite"] for row in rows} == {"tasks/demo"}


def test_by_tag(out):
    done = crabray("leaderboard", str(out), "--run", "r1", "--by", "tag", "-f", "json", check=True)
    rows = {(row["agent"], row["tag"]): row for row in json.loads(done.stdout)}
    assert set(rows) == {
        (agent, tag) for agent in ("alpha", "bravo") for tag in ("easy", "files", "terminal")
    }
    assert rows["alpha", "terminal"]["success_rate"] == 1.0
    assert rows["bravo", "easy"]["success_rate"] == 0.5
    assert rows["bravo", "files"]["share"] == 0.5
    table = crabray("leaderboard", str(out), "--by", "tag", check=True).stdout
    assert "success by tag" in table and "terminal" in table


def test_by_termination_reason_and_bad_column(out):
    done = crabray("leaderboard", str(out), "--by", "termination_reason", "-f", "csv", check=True)
    parsed = pd.read_csv(io.StringIO(done.stdout))
    assert set(parsed["termination_reason"]) == {"success", "agent_fail"}
    bad = crabray("leaderboard", str(out), "--by", "colour")
    assert bad.returncode == 2
    assert "--by must be an episode column or 'tag', not 'colour'" in bad.stderr


def test_compare(out):
    done = crabray("leaderboard", str(out), "--compare", "r1", "r2", "-f", "json", check=True)
    rows = {(row["agent"], row["task_id"]): row["change"] for row in json.loads(done.stdout)}
    assert rows == {
        ("alpha", "t1"): "same",
        ("alpha", "t2"): "fixed",
        ("bravo", "t1"): "only_a",
        ("bravo", "t2"): "only_a",
    }
    assert done.stderr.startswith("r1 -> r2: 2 tasks in both, success 0.500 -> 1.000; fixed 1")
    table = crabray("leaderboard", str(out), "--compare", "r1", "r2", check=True).stdout
    assert "fixed" in table and "r1 -> r2" in table


def test_option_mistakes_are_one_line_errors(out):
    both = crabray("leaderboard", str(out), "--compare", "r1", "r2", "--run", "r1")
    assert both.returncode == 2 and "--compare names its two runs" in both.stderr
    missing = crabray("leaderboard", str(out), "--compare", "r1", "r9")
    assert missing.returncode == 2 and "no episodes in" in missing.stderr and "r9" in missing.stderr
    fmt = crabray("leaderboard", str(out), "--format", "xml")
    assert fmt.returncode == 2 and "--format must be" in fmt.stderr


def test_help_lists_the_options():
    text = crabray("leaderboard", "--help", check=True).stdout
    for option in ("--run", "--format", "--by", "--compare", "--per-suite", "fsspec"):
        assert option in text, option


def test_terminal_table_of_only_infrastructure_failures(tmp_path) -> None:
    """Every episode lost to the infrastructure: no verdict, but the table still renders."""
    from rich.console import Console

    from crabray.core.result import EpisodeRecord, EpisodeResult, TerminationReason
    from crabray.results import ResultSink, leaderboard, read_episodes, to_rich_table

    lost = [
        EpisodeRecord(
            result=EpisodeResult(
                run_id="r",
                suite="s",
                task_id=f"t{i}",
                agent="a",
                termination_reason=TerminationReason.ENV_ERROR,
            )
        )
        for i in range(3)
    ]
    ResultSink(tmp_path, "r").write(lost)
    table = leaderboard(read_episodes(tmp_path))
    console = Console(width=80, record=True)
    console.print(to_rich_table(table))
    text = console.export_text()
    assert "infra" in text
    assert " 3 " in text or text.rstrip().endswith("3")


@pytest.mark.parametrize(
    "options", [["--per-suite"], ["--by", "tag"], ["--compare", "r1", "r2"]], ids=str
)
def test_terminal_leaderboard_never_imports_pandas(out, options):
    """The leaderboard, a breakdown and a comparison stay on Arrow: pandas would cost more."""
    program = (
        "import sys; from crabray.cli import app\n"
        "try:\n    app(sys.argv[1:])\nexcept SystemExit as exit:\n    assert not exit.code\n"
        "print('pandas loaded' if 'pandas' in sys.modules else 'no pandas')"
    )
    command = [sys.executable, "-c", program, "leaderboard", str(out), *options]
    done = subprocess.run(command, capture_output=True, text=True, timeout=300, check=True)
    assert "alpha" in done.stdout
    assert done.stdout.rstrip().endswith("no pandas")


def test_part_files_lacking_a_column_are_read_without_pandas(out):
    """An older part file (no node column) is read file by file, not scanned; so is one that
    holds run_id as a column (older still)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    for part in (out / "episodes" / "run_id=r1").glob("*.parquet"):
        pq.write_table(pq.read_table(part).drop_columns(["node"]), part)
    for part in (out / "episodes" / "run_id=r2").glob("*.parquet"):
        table = pq.read_table(part)
        pq.write_table(table.append_column("run_id", pa.array(["r2"] * table.num_rows)), part)
    program = (
        "import sys; from crabray.results import read_episode_table\n"
        "rows = read_episode_table(sys.argv[1], columns=['run_id', 'agent', 'node'])\n"
        "print(sorted(set(rows.column('run_id').to_pylist())), rows.num_rows)\n"
        "print('pandas loaded' if 'pandas' in sys.modules else 'no pandas')"
    )
    command = [sys.executable, "-c", program, str(out)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=300, check=True)
    assert done.stdout.splitlines() == ["['r1', 'r2'] 12", "no pandas"]


def _at_width(columns: int, *args: str) -> str:
    """``crabray ARGS``'s standard output in a terminal ``columns`` characters wide."""
    env = {**os.environ, "COLUMNS": str(columns), "NO_COLOR": "1"}
    command = [sys.executable, "-m", "crabray", *args]
    done = subprocess.run(command, capture_output=True, text=True, timeout=300, env=env, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    return done.stdout


def _header(table: str) -> list[str]:
    return next(line for line in table.splitlines() if line.split()[:1] == ["agent"]).split()


def test_an_llm_agents_cost_and_tokens_are_shown_beside_a_long_model_name(tmp_path, make_record):
    """An LLM agent with a dated model name (issue 39): cost at 80 columns, tokens at 160.

    The model's name took the room cost needed: the table showed neither cost nor
    tokens, and at 160 columns it still built an 80-column table.
    """
    usage = {"tokens_in": 781, "tokens_out": 60, "model_calls": 1, "cost_usd": 0.0025575}
    records = [
        make_record(
            task,
            run_id="r",
            agent="mock-llm",
            model="gpt-4o-2024-08-06",
            grader_trusted=True,
            score=1.0,
            **usage,
        )
        for task in ("hello-file", "count-lines")
    ]
    ResultSink(tmp_path, "r").write(records)
    for columns in (80, 160):
        table = _at_width(columns, "leaderboard", str(tmp_path))
        assert max(len(line.rstrip()) for line in table.splitlines()) <= columns
        header = _header(table)
        assert "gpt-4o-2024-08-06" in table
        assert {"n", "success", "cost"} <= set(header), (columns, table)
        assert "0.0051" in table, table  # the two episodes' cost
    assert {"tok", "in", "out"} <= set(_header(table)), table
    assert "1562" in table and "120" in table
