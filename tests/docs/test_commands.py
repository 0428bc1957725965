"""Every command shown in README.md and under docs/ works, as a reader would type it.

Each page's commands run in order in a scratch folder of their own that holds the
repository's files (suites, envs, .venv, mkdocs.yml) but a results root of its own, on one
shared local Ray cluster (RAY_ADDRESS), so a page's `crabray run` does not start Ray anew.
Blocks marked not runnable here (a cluster, an API key, minutes of work) have their crabray
commands checked with ``--help``. The rules are in tests/docs/markdown.py.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from crabray.cli import app
from crabray.results import list_runs
from tests.conftest import ROOT
from tests.docs.markdown import COMMAND_LANGUAGES, Block, blocks, dry_form

pytestmark = [pytest.mark.ray, pytest.mark.slow]

PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
# What a scratch folder leaves out of the repository: results and sites are the pages' own.
NOT_SHARED = {".git", "results", "site", "docs-site", ".pytest_cache", ".mypy_cache"}
COMMAND_TIMEOUT_SEC = 300


def _checked(block: Block) -> list[str]:
    """What the test runs of a block: its commands, or the --help forms of a not-run block's."""
    if block.language not in COMMAND_LANGUAGES:
        return []
    if block.not_run_reason is None:
        return block.commands()
    return [dry for dry in map(dry_form, block.commands()) if dry is not None]


def _pages_with_commands() -> list[Path]:
    return [page for page in PAGES if any(_checked(block) for block in blocks(page))]


@pytest.fixture(scope="module")
def ray_address() -> Iterator[str]:
    """One local Ray cluster every page's runs join: a head and a node hosting 4 local slots."""
    from ray.cluster_utils import Cluster

    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1})
    cluster.add_node(num_cpus=2, resources={"crabray_local": 4}, labels={"crabray-local": "yes"})
    cluster.wait_for_nodes()
    try:
        yield cluster.address
    finally:
        cluster.shutdown()


def _scratch(tmp_path: Path) -> Path:
    """A folder that looks like the repository to a command, with nothing of its results."""
    scratch = tmp_path / "repo"
    scratch.mkdir()
    for entry in ROOT.iterdir():
        if entry.name not in NOT_SHARED:
            (scratch / entry.name).symlink_to(entry)
    return scratch


def _substitute(command: str, scratch: Path) -> str:
    """RUN_ID: the latest run; RUN_A and RUN_B: the two latest runs, the older first."""
    if not re.search(r"\bRUN_(ID|A|B)\b", command):
        return command
    runs = list_runs(scratch / "results")  # oldest first, as `--run latest` reads them
    needed = 2 if re.search(r"\bRUN_[AB]\b", command) else 1
    assert len(runs) >= needed, f"`{command}` names runs the page has not made before it"
    values = {"RUN_ID": runs[-1], "RUN_A": runs[-2 if needed == 2 else -1], "RUN_B": runs[-1]}
    return re.sub(r"\bRUN_(ID|A|B)\b", lambda found: values[found[0]], command)


def _shell(command: str, scratch: Path, env: dict[str, str], where: str) -> None:
    done = subprocess.run(
        ["bash", "-c", command],
        cwd=scratch,
        env=env,
        capture_output=True,
        text=True,
        timeout=COMMAND_TIMEOUT_SEC,
        check=False,
    )
    assert done.returncode == 0, (
        f"{where}: `{command}` exited {done.returncode}\n"
        f"stdout:\n{done.stdout[-3000:]}\nstderr:\n{done.stderr[-3000:]}"
    )


def _help(command: str, where: str) -> None:
    """A --help form: crabray's in this process (it checks the command and its option names)."""
    words = shlex.split(command)
    while words and "=" in words[0] and not words[0].startswith("-"):
        words = words[1:]  # VAR=value before the program
    if Path(words[0]).name != "crabray":
        return None
    done = CliRunner().invoke(app, words[1:])
    assert done.exit_code == 0, f"{where}: `{command}` exited {done.exit_code}\n{done.output}"


def _where(block: Block) -> str:
    return f"{block.path.relative_to(ROOT)}:{block.line}"


@pytest.mark.parametrize(
    "page", _pages_with_commands(), ids=lambda page: str(page.relative_to(ROOT))
)
def test_every_command_of_the_page_works(page: Path, ray_address: str, tmp_path: Path) -> None:
    scratch = _scratch(tmp_path)
    env = {
        **os.environ,
        "PATH": f"{ROOT / '.venv' / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}",
        "RAY_ADDRESS": ray_address,
        "CRABRAY_NODES_FILE": str(tmp_path / "nodes.json"),
        "NO_COLOR": "1",
        "COLUMNS": "100",
        "NO_MKDOCS_2_WARNING": "1",
    }
    page_blocks = blocks(page)
    for block in page_blocks:
        if block.language == "python" and block.title:
            (scratch / block.title).write_text("\n".join(block.lines) + "\n")
    for block in page_blocks:
        reason = block.not_run_reason
        where = _where(block) if reason is None else f"{_where(block)} (not run: {reason}; --help)"
        for command in _checked(block):
            if reason is not None and Path(shlex.split(command)[0]).name == "crabray":
                _help(command, where)
            else:
                _shell(_substitute(command, scratch), scratch, env, where)
