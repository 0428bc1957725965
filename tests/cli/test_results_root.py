"""Runs are found without typing paths: one results root, read by every command by default."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from rich.console import Console

from crabray.cli import outcomes
from crabray.core.result import Attribution
from crabray.results import latest_run, nested_roots
from crabray.results.store.root import ResultsRoot
from crabray.run.outcomes import Cause
from tests.conftest import ROOT


def crabray_in(cwd: Path, *args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    """Run the CLI as a user would from ``cwd``, where ``results/`` is the default root."""
    env = {**os.environ, "COLUMNS": "200", "NO_COLOR": "1", "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, "-m", "crabray", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=cwd,
        env=env,
    )


def test_commands_say_what_to_do_when_there_are_no_runs(tmp_path: Path) -> None:
    for command in (["view", "--port", "0"], ["leaderboard"], ["runs", "list"]):
        done = crabray_in(tmp_path, *command, timeout=60)
        assert done.returncode == 2, done.stdout
        assert "no runs in results (it does not exist)" in done.stderr
        assert "crabray run tasks/demo --agent oracle" in done.stderr
    (tmp_path / "results").mkdir()
    done = crabray_in(tmp_path, "view", "--run", "latest", "--port", "0", timeout=60)
    assert done.returncode == 2 and "no runs in results:" in done.stderr


@pytest.mark.ray
@pytest.mark.slow
def test_a_run_is_found_by_every_command_with_no_path(tmp_path: Path) -> None:
    suite = str(ROOT / "tasks" / "demo")
    ran = crabray_in(tmp_path, "run", suite, "-a", "oracle", "-a", "noop", "-t", "hello-file")
    assert ran.returncode == 0, ran.stderr
    run_id = latest_run(tmp_path / "results")
    assert run_id is not None
    assert f"crabray leaderboard --run {run_id}" in ran.stdout
    assert "crabray view --run latest" in ran.stdout
    assert "crabray leaderboard --html site" in ran.stdout

    board = crabray_in(tmp_path, "leaderboard", "--run", "latest", "--format", "json")
    assert board.returncode == 0, board.stderr
    rows = {row["agent"]: row for row in json.loads(board.stdout)}
    assert (rows["oracle"]["success_rate"], rows["noop"]["success_rate"]) == (1.0, 0.0)
    listed = crabray_in(tmp_path, "runs", "list")
    assert listed.returncode == 0 and run_id in listed.stdout
    site = crabray_in(tmp_path, "leaderboard", "--html", "site")
    assert site.returncode == 0, site.stderr
    assert (tmp_path / "site" / "index.html").is_file()

    again = crabray_in(tmp_path, "run", suite, "-a", "oracle", "-a", "noop", "-t", "hello-file")
    assert again.returncode == 0, again.stderr
    assert latest_run(tmp_path / "results") != run_id
    compared = crabray_in(tmp_path, "leaderboard", "--compare", run_id, "latest", "-f", "json")
    assert compared.returncode == 0, compared.stderr
    assert {row["change"] for row in json.loads(compared.stdout)} == {"same"}
    same = crabray_in(tmp_path, "leaderboard", "--compare", "latest", "latest")
    assert same.returncode == 2 and "two different runs" in same.stderr

    view = subprocess.Popen(
        [sys.executable, "-m", "crabray", "view", "--run", "latest", "--port", "0"],
        cwd=tmp_path,
        env={**os.environ, "NO_COLOR": "1", "PYTHONPATH": str(ROOT)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert view.stdout is not None
        first = view.stdout.readline()
        assert first.startswith("serving results at http://127.0.0.1:"), first
    finally:
        view.terminate()
        view.wait(timeout=30)


def test_runs_one_level_down_are_named(tmp_path: Path) -> None:
    """An older layout (results/demo-<time>/) is pointed to, not reported as nothing."""
    nested = tmp_path / "results" / "demo-20261124-000000" / "runs"
    nested.mkdir(parents=True)
    (nested / "20261124-000000-abcdef.json").write_text("{}")
    assert nested_roots(tmp_path / "results") == [nested.parent]
    done = crabray_in(tmp_path, "leaderboard", timeout=60)
    assert done.returncode == 2
    assert "no runs in results itself, but under it in results/demo-20261124-000000" in done.stderr
    assert "crabray leaderboard results/demo-20261124-000000" in done.stderr


def test_a_root_given_with_keys_is_named_without_them(tmp_path: Path) -> None:
    done = crabray_in(
        tmp_path, "export", "latest", "s3://KEY:SECRET@bucket/runs", "--from", "results",
        "--format", "jsonl", timeout=60,
    )  # fmt: skip
    assert done.returncode == 2, done.stdout
    assert "OUT s3://bucket/runs and --from results name two results roots" in done.stderr
    assert "SECRET" not in done.stdout + done.stderr


def test_packing_a_run_of_a_store_says_to_read_it_in_place(tmp_path: Path) -> None:
    done = crabray_in(tmp_path, "runs", "pack", "R1", "--from", "s3://bucket/runs", timeout=60)
    assert done.returncode == 2, done.stdout
    assert "s3://bucket/runs is a store: read its runs where they are" in done.stderr


def _printed_causes(monkeypatch: pytest.MonkeyPatch, root: ResultsRoot) -> str:
    """What the end of a run with one benchmark error prints, its results in ``root``."""
    console = Console(file=io.StringIO(), width=300, no_color=True)
    monkeypatch.setattr(outcomes, "console", console)
    cause = Cause(
        attribution=Attribution.BENCHMARK,
        termination_reason="setup_failed",
        episodes=1,
        first_agent="oracle",
        first_task="t1",
    )
    assert outcomes.print_causes([cause], root, "R1", "crabray", None) == 1
    return console.file.getvalue()  # type: ignore[attr-defined]


def test_the_commands_printed_at_a_runs_end_name_a_root_only_when_not_the_default(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    printed = _printed_causes(monkeypatch, ResultsRoot("results"))
    assert "crabray leaderboard --run R1 --by termination_reason" in printed
    assert "crabray view --run R1" in printed
    printed = _printed_causes(monkeypatch, ResultsRoot("s3://KEY:SECRET@bucket/runs"))
    assert "crabray leaderboard s3://bucket/runs --run R1" in printed
    assert "SECRET" not in printed
