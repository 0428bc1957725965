"""Choosing what to run as Inspect and Harbor users do: globs, tags, a limit, -v anywhere."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from crabray.results import read_episodes
from tests.conftest import crabray

LONG_ID = "0b6f1c2e-5d4a-4c3b-9a8f-7e6d5c4b3a21-a-task-id-longer-than-eighty-columns-of-a-terminal"


def write_tagged_suite(folder: Path) -> Path:
    """A suite of four shell tasks, one with an id wider than a terminal, two tagged 'web'."""
    tasks = [("web-login", "web"), ("web-search", "web"), ("files-copy", "files"), (LONG_ID, "x")]
    lines = [
        "from crabray import BenchmarkConfig, EnvironmentConfig, Task",
        "from crabray.actions import SHELL_ACTIONS, path_exists, run_command",
        "ENV = EnvironmentConfig(name='box', action_space=SHELL_ACTIONS, "
        "backend_settings={'isolation': 'none'})",
        "bench = BenchmarkConfig(name='tagged', environments=[ENV], tasks=[",
    ]
    for task_id, tag in tasks:
        lines.append(
            f"    Task(id={task_id!r}, description='touch x', tags=[{tag!r}], "
            "evaluator=path_exists(path='x'), solution=[run_command(command='touch x')]),"
        )
    lines.append("])")
    suite = folder / "tagged.py"
    suite.write_text("\n".join(lines) + "\n")
    return suite


def ids(*args: str) -> list[str]:
    done = crabray("tasks", "list", *args, "--format", "ids", check=True)
    return done.stdout.splitlines()


def test_list_selects_by_glob_tag_and_limit_in_suite_order(tmp_path: Path) -> None:
    suite = str(write_tagged_suite(tmp_path))
    assert ids(suite) == ["web-login", "web-search", "files-copy", LONG_ID]
    assert ids(suite, "--task", "web-*") == ["web-login", "web-search"]
    assert ids(suite, "-t", "files-copy", "-t", "web-s*") == ["web-search", "files-copy"]
    assert ids(suite, "--tag", "files", "--tag", "x") == ["files-copy", LONG_ID]
    assert ids(suite, "--tag", "web", "--limit", "1") == ["web-login"]


def test_list_shows_whole_ids_and_json(tmp_path: Path) -> None:
    suite = str(write_tagged_suite(tmp_path))
    table = crabray("tasks", "list", suite, check=True)
    # The table folds a cell rather than cut it: the whole id is there, in pieces at worst.
    assert "…" not in table.stdout
    assert LONG_ID[:60] in table.stdout.replace("\n", "")
    rows = json.loads(crabray("tasks", "list", suite, "--format", "json", check=True).stdout)
    assert [row["task"] for row in rows][-1] == LONG_ID
    assert rows[0]["tags"] == ["web"]
    assert rows[0]["environments"] == ["box"]


@pytest.mark.parametrize(
    ("option", "value", "said"),
    [
        ("--task", "web-logn", "no task of suite 'tagged' matches 'web-logn'; did you mean"),
        ("--task", "nothing-*", "no task of suite 'tagged' matches 'nothing-*'"),
        ("--tag", "wbe", "no task of suite 'tagged' has tag 'wbe'; did you mean 'web'?"),
    ],
)
def test_a_selection_matching_nothing_is_an_error_naming_it(
    tmp_path: Path, option: str, value: str, said: str
) -> None:
    suite = str(write_tagged_suite(tmp_path))
    for command in (["tasks", "list"], ["tasks", "validate"]):
        done = crabray(*command, suite, option, value)
        assert done.returncode == 2, done.stderr
        assert said in done.stderr
        assert "Traceback" not in done.stderr
    if option == "--task" and value == "web-logn":
        assert "'web-login'" in done.stderr


def test_verbose_is_accepted_after_the_subcommand(tmp_path: Path) -> None:
    suite = str(write_tagged_suite(tmp_path))
    after = crabray("tasks", "validate", suite, "-v")
    assert after.returncode == 0, after.stderr
    assert "4 tasks" in after.stdout
    double = crabray("tasks", "list", suite, "-vv", "--format", "ids")
    assert double.returncode == 0, double.stderr


@pytest.mark.ray
@pytest.mark.slow
def test_run_takes_a_glob_a_tag_and_a_limit(tmp_path: Path) -> None:
    suite = str(write_tagged_suite(tmp_path))
    out = tmp_path / "out"
    done = crabray(
        "run", suite, "-a", "oracle", "--task", "*-*", "--tag", "web", "--limit", "1",
        "--out", str(out), "-v",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    episodes = read_episodes(out)
    assert episodes["task_id"].tolist() == ["web-login"]
    assert episodes["success"].tolist() == [True]
    refused = crabray("run", suite, "-a", "oracle", "--tag", "nope", "--out", str(out))
    assert refused.returncode == 2
    assert "has tag 'nope'" in refused.stderr


HELP_PAGES = [
    [], ["run"], ["tasks", "list"], ["tasks", "validate"], ["tasks", "grade"], ["leaderboard"],
    ["view"], ["runs", "list"], ["cluster", "start-head"], ["cluster", "start-worker"],
]  # fmt: skip


@pytest.mark.parametrize("command", HELP_PAGES, ids=lambda c: " ".join(c) or "crabray")
def test_help_shows_human_metavars(command: list[str]) -> None:
    done = crabray(*command, "--help", check=True)
    for python_type in ("<bool>", "<list[", "<int>", "<str>", "<path>", "<float>"):
        assert python_type not in done.stdout, f"{python_type} in:\n{done.stdout}"


def test_run_help_groups_its_options_in_panels() -> None:
    page = crabray("run", "--help", check=True).stdout
    panels = re.findall(r"╭─ ([A-Z][A-Za-z ]+?) ─", page)
    assert panels == [
        "What to run",
        "Options",
        "What to run",
        "Agents",
        "Limits",
        "Execution",
        "Results",
    ]  # fmt: skip, issue 38: the panels are RunSpec's parts
    agents = page[page.index("╭─ Agents") : page.index("╭─ Limits")]
    limits = page[page.index("╭─ Limits") : page.index("╭─ Execution")]
    assert "--max-steps" in limits and "--max-cost-usd" in limits
    assert "--model" in agents and "MODEL" in agents and "--agent-config" in agents
    assert re.search(r"--limit\s+N", page)
    assert re.search(r"--task\s+-t\s+ID", page)
