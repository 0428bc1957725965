"""A run's budget (issue 37): ``--max-cost-usd`` and ``--max-tokens`` over the whole run.

Once a budget is reached no new episode starts, the run ends ``stopped`` with
exit code 3 and the command that goes on; a resume with a higher budget
finishes it, with no row lost or doubled.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from crabray.core.errors import ConfigError
from crabray.results import ResultSink, run_spending
from crabray.run.budget import RunBudget, Spending
from tests.conftest import ROOT, serve_mock_llm
from tests.interrupts.conftest import cli_env, crabray_in, finished_rows
from tests.results.conftest import build_record

TASKS = 5

SUITE = """
from crabray import BenchmarkConfig, EnvironmentConfig, Task
from crabray.actions import FILE_ACTIONS, file_equals, write_file

bench = BenchmarkConfig(
    name="spend",
    environments=[EnvironmentConfig(name="box", action_space=FILE_ACTIONS)],
    tasks=[
        Task(
            id=f"note-{i}",
            description=f"Write {i} to note.txt",
            evaluator=file_equals(path="note.txt", content=str(i)),
            solution=[write_file(path="note.txt", content=str(i))],
        )
        for i in range(TASKS)
    ],
)
""".replace("TASKS", str(TASKS))

AGENTS = """
[[agents]]
name = "pricey"
kind = "openai"
model = "crabray-mock"
base_url = "{url}"
price_in_per_mtok = 1000000.0
price_out_per_mtok = 1000000.0
"""
"""A dollar a token: any episode costs more than the budgets below."""


def test_spending_counts_every_attempt_once(tmp_path: Path) -> None:
    """A failed attempt spent its tokens too; a copy of a row (an interrupted compaction)
    is not counted twice."""
    first = build_record("t", run_id="r1", attempt=0, cost_usd=0.25, tokens_in=10, tokens_out=5)
    second = build_record("t", run_id="r1", attempt=1, cost_usd=0.5, tokens_in=20, tokens_out=1)
    sink = ResultSink(tmp_path, "r1")
    sink.write([first])
    sink.write([second])
    ResultSink(tmp_path, "r1").write([first])  # the same episode_id again
    assert run_spending(tmp_path, "r1") == (pytest.approx(0.75), 36)
    budget = RunBudget.of_run(tmp_path, "r1", max_cost_usd=0.75, max_tokens=None)
    assert budget.reached is not None
    with pytest.raises(ConfigError, match=r"no budget left \(\$0\.7500 spent of a \$0\.75"):
        budget.check_room("r1")


def test_a_budget_is_reached_once_and_tells_the_scheduler_once(tmp_path: Path) -> None:
    budget = RunBudget(None, 30, Spending(tokens=10))
    drained: list[bool] = []
    budget.on_reached = lambda: drained.append(True)
    budget.charge([build_record("a", tokens_in=5, tokens_out=5)])
    assert budget.reached is None and not drained
    budget.charge([build_record("b", tokens_in=10, tokens_out=0)])
    budget.charge([build_record("c", tokens_in=10, tokens_out=0)])
    assert drained == [True]
    assert budget.reached is not None
    assert budget.reached.describe() == "40 tokens used of a 30-token budget"


@pytest.fixture
def priced_agents(tmp_path: Path) -> Iterator[Path]:
    suite = tmp_path / "spend.py"
    suite.write_text(SUITE)
    with serve_mock_llm(str(suite), ROOT, cli_env(), tmp_path / "serve.log") as url:
        agents = tmp_path / "agents.toml"
        agents.write_text(AGENTS.format(url=url))
        yield agents


@pytest.mark.ray
@pytest.mark.slow
def test_a_run_stopped_by_its_budget_resumes_to_completion_with_a_higher_one(
    tmp_path: Path, priced_agents: Path
) -> None:
    out = tmp_path / "results"
    suite = str(tmp_path / "spend.py")
    run = crabray_in(
        tmp_path, "run", suite, "--agent-config", str(priced_agents), "-a", "pricey",
        "--concurrency", "1", "--max-cost-usd", "1",
    )  # fmt: skip
    assert run.returncode == 3, run.stdout + run.stderr
    assert "Traceback" not in run.stderr
    stopped = len(finished_rows(out))
    assert 1 <= stopped < TASKS
    assert "stopped by its budget: $" in run.stdout and "spent of a $1 budget" in run.stdout
    assert f"{stopped} of {TASKS} episodes are finished and saved" in run.stdout
    (run_id,) = [path.stem for path in (out / "runs").glob("*.json")]
    spent, _ = run_spending(out, run_id)
    higher = f"--resume {run_id} --max-cost-usd {math.ceil((spent + 1) * 100) / 100:.2f}"
    assert "go on with as much again: " in run.stdout and higher in run.stdout, run.stdout
    listed = crabray_in(tmp_path, "runs", "list")
    assert f"{stopped}/{TASKS}" in listed.stdout and "stopped" in listed.stdout, listed.stdout

    again = crabray_in(tmp_path, "run", "--resume", "latest")
    assert again.returncode == 2, again.stdout + again.stderr
    assert "no budget left" in again.stderr and "--max-cost-usd" in again.stderr
    assert "Traceback" not in again.stderr

    done = crabray_in(tmp_path, "run", "--resume", "latest", "--max-cost-usd", "1000000000")
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"{stopped} episodes were already finished" in done.stdout
    keys = Counter((r["agent"], r["task_id"], r["epoch"]) for r in finished_rows(out))
    assert len(keys) == TASKS and set(keys.values()) == {1}, "no row lost or doubled"
    listed = crabray_in(tmp_path, "runs", "list")
    assert f"{TASKS}/{TASKS}" in listed.stdout and "finished" in listed.stdout

    later = crabray_in(tmp_path, "run", "--resume", "latest")
    assert later.returncode == 0, "the raised budget is the run's now: " + later.stderr
