"""The README's demo command, ``bash scripts/demo.sh``, as a new user runs it."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tomllib
from pathlib import Path

import pytest

from crabray.results import read_episodes
from tests.backends.conftest import require_kind
from tests.conftest import ROOT

DEMO = ROOT / "scripts" / "demo.sh"


@pytest.mark.ray
@pytest.mark.slow
def test_the_demo_runs_end_to_end_and_ends_with_the_leaderboard(tmp_path: Path) -> None:
    require_kind("local-bwrap")
    out = tmp_path / "out"
    done = subprocess.run(
        ["bash", str(DEMO)],
        env={**os.environ, "OUT": str(out)},
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    episodes = read_episodes(out)
    solved = episodes.groupby("agent")["success"].sum().to_dict()
    assert solved == {"oracle": 11, "noop": 0}
    lines = [line.split() for line in done.stdout.splitlines()]
    assert ["oracle", "11", "11", "1.000"] in [line[:4] for line in lines]
    assert ["noop", "11", "0", "0.000"] in [line[:4] for line in lines]


def test_without_bubblewrap_a_user_is_told_the_command_to_run(tmp_path: Path) -> None:
    """Not root and no ``bwrap`` on PATH: the script stops at once with the install command."""
    tools = tmp_path / "bin"
    tools.mkdir()
    for name in ("dirname", "bash"):
        found = shutil.which(name)
        assert found is not None
        (tools / name).symlink_to(found)
    (tools / "id").write_text("#!/bin/sh\necho 1000\n")
    (tools / "id").chmod(0o755)
    done = subprocess.run(
        [str(tools / "bash"), str(DEMO)],
        env={"PATH": str(tools), "HOME": str(tmp_path)},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 1
    assert "need bubblewrap (bwrap), which is not installed" in done.stderr
    assert "sudo apt-get install bubblewrap" in done.stderr


SETUP = ROOT / "scripts" / "setup.sh"
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
VENV_TOOL = re.compile(r"\.venv/bin/(?P<tool>[A-Za-z0-9_.-]+)")
SHIPPED_TOOLS = {"python", "python3", "pip", "crabray"}
"""What every install in .venv has: the interpreter, pip and crabray's own command."""


def _name(requirement: str) -> str:
    """A requirement's distribution name, normalised (PEP 503): ``mkdocs-material>=9`` ->
    ``mkdocs-material``; ``crabray[docs]`` -> ``crabray``."""
    found = re.match(r"[A-Za-z0-9._-]+", requirement.strip())
    assert found, requirement
    return re.sub(r"[-_.]+", "-", found.group(0)).lower()


def _extras() -> dict[str, set[str]]:
    """Each extra of pyproject.toml and the distributions it names, its own extras expanded."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    named = project["optional-dependencies"]

    def expand(extra: str) -> set[str]:
        found: set[str] = set()
        for requirement in named[extra]:
            inner = re.match(r"crabray\[([\w,]+)\]", requirement)
            if inner:
                for part in inner.group(1).split(","):
                    found |= expand(part)
            else:
                found.add(_name(requirement))
        return found

    return {extra: expand(extra) for extra in named} | {
        "": {_name(r) for r in project["dependencies"]}
    }


def _setup_extras(kind: str) -> set[str]:
    """The extras ``scripts/setup.sh`` installs for SETUP=kind."""
    found = re.search(rf"^\s*{kind}\) EXTRAS='\.\[([\w,]+)\]'", SETUP.read_text(), re.M)
    assert found, f"scripts/setup.sh has no {kind} install"
    return set(found.group(1).split(","))


def _installs(text: str) -> tuple[set[str], set[str]]:
    """The extras and the plain distributions the install commands in ``text`` install."""
    extras: set[str] = set()
    for found in re.finditer(r"(SETUP=user bash )?scripts/(setup|demo|test)\.sh", text):
        user = found.group(1) is not None or found.group(2) == "demo"
        extras |= _setup_extras("user" if user else "dev")
    for found in re.finditer(r"pip\s+install\s+(?:-e\s+)?'(?:\.|crabray)\[([\w,]+)\]'", text):
        extras |= set(found.group(1).split(","))
    plain = {_name(name) for name in re.findall(r"pip install (?:-U )?([a-z][\w.-]*)\b", text)}
    return extras, plain


def _sections(page: Path) -> list[str]:
    """A page's text cut at its headings (those outside code blocks)."""
    sections, current, fenced = [], [], False
    for line in page.read_text().splitlines():
        if line.lstrip().startswith("```"):
            fenced = not fenced
        if not fenced and re.match(r"#{1,6} ", line):
            sections.append("\n".join(current))
            current = []
        current.append(line)
    return [*sections, "\n".join(current)]


def _installed_tools() -> dict[str, str]:
    """Each program in .venv/bin that a distribution installed, and that distribution."""
    from importlib.metadata import distributions

    tools = {}
    for distribution in distributions():
        for path in distribution.files or []:
            if path.parent.name == "bin" or str(path).startswith("../../../bin/"):
                tools[path.name] = _name(distribution.metadata["Name"])
        for point in distribution.entry_points.select(group="console_scripts"):
            tools[point.name] = _name(distribution.metadata["Name"])
    return tools


def test_every_tool_the_docs_run_from_the_venv_is_installed_where_they_say() -> None:
    """A page that says `.venv/bin/TOOL` has TOOL in the user install (what the demo sets
    up), or says how to install it earlier in the same section: `.venv/bin/mkdocs serve`
    after the demo failed, since mkdocs is in the docs extra only."""
    tools = _installed_tools()
    extras = _extras()
    user = set().union(extras[""], *(extras[extra] for extra in _setup_extras("user")))
    elsewhere = set().union(*extras.values()) - user
    wrong = []
    for page in PAGES:
        if page.name == "changelog.md":
            continue
        for section in _sections(page):
            for use in VENV_TOOL.finditer(section):
                tool = use["tool"]
                if tool in SHIPPED_TOOLS:
                    continue
                installed, plain = _installs(section[: use.start()])
                dist = tools.get(tool)
                if dist is None:  # not installed here: the page must install it itself
                    ok = _name(tool) in plain
                elif dist in user or dist not in elsewhere:
                    continue  # the user install has it (or one of its dependencies does)
                else:
                    ok = any(dist in extras[extra] for extra in installed if extra in extras)
                if not ok:
                    where = page.relative_to(ROOT)
                    wrong.append(f"{where}: `.venv/bin/{tool}` with no install of it before")
    assert not wrong, "\n".join(wrong)


def test_the_tutorial_says_what_the_demo_installs() -> None:
    """Where a page says what scripts/demo.sh's setup installs, it names the user install."""
    assert "SETUP=user bash scripts/setup.sh" in DEMO.read_text()
    user = _setup_extras("user")
    wrong = []
    for page in PAGES:
        for paragraph in re.split(r"\n\s*\n", page.read_text()):
            if "demo.sh" not in paragraph:
                continue
            for found in re.finditer(r"pip\s+install\s+-e\s+'\.\[([\w,]+)\]'", paragraph):
                if set(found.group(1).split(",")) != user:
                    wrong.append(f"{page.relative_to(ROOT)}: {found.group(0)} beside demo.sh")
    assert not wrong, "\n".join(wrong)
