"""The code blocks of the documentation: which are commands, which are files, which are not run.

The rules (written for authors in docs/guides/development.md, "Documentation"):

- ``sh``, ``bash``, ``shell`` and ``console`` blocks hold commands, one a line; a line ending
  in ``\\`` continues on the next; ``$ `` prompts are dropped (in a ``console`` block only the
  prompted lines are commands, the rest is their output).
- a ``python`` block with a title (```` ```python title="example.py" ````) is a file of that
  name, written before the page's commands run.
- a block whose first line is ``# not run by the docs test: REASON`` is not run; its crabray
  and ``scripts/*.py`` commands are checked with ``--help`` appended instead.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from pathlib import Path

COMMAND_LANGUAGES = {"sh", "bash", "shell", "console"}
NOT_RUN = re.compile(r"^#\s*not run by the docs test:\s*(?P<reason>\S.*)$")
FENCE = re.compile(r"^(?P<indent>\s*)```(?P<info>[^`]*)$")
TITLE = re.compile(r'title="(?P<title>[^"]+)"')


@dataclass(frozen=True)
class Block:
    """One fenced code block of a Markdown file."""

    path: Path
    line: int  # of the opening fence, 1-based
    language: str
    title: str | None
    lines: tuple[str, ...]

    @property
    def not_run_reason(self) -> str | None:
        """The reason given on the block's first line for not running it, if any."""
        first = next((line for line in self.lines if line.strip()), "")
        found = NOT_RUN.match(first.strip())
        return found["reason"] if found else None

    def commands(self) -> list[str]:
        """The commands of a command block, continuation lines joined, comment lines left out."""
        joined: list[str] = []
        pending = ""
        for raw in self.lines:
            line = raw.strip()
            if self.language == "console":
                if not line.startswith("$ ") and not pending:
                    continue
                line = line.removeprefix("$ ")
            if line.endswith("\\"):
                pending += line[:-1] + " "
                continue
            line, pending = pending + line, ""
            if line and not line.startswith("#"):
                joined.append(line)
        return joined


def blocks(path: Path) -> list[Block]:
    """Every fenced block of a Markdown file, indented ones (in list items) included."""
    found: list[Block] = []
    lines = path.read_text().splitlines()
    index = 0
    while index < len(lines):
        opening = FENCE.match(lines[index])
        if opening is None or not opening["info"].strip():
            index += 1
            continue
        info = opening["info"].strip()
        language = info.split()[0]
        title = TITLE.search(info)
        indent = len(opening["indent"])
        body: list[str] = []
        index += 1
        while index < len(lines) and lines[index].strip() != "```":
            body.append(lines[index][indent:])
            index += 1
        start = index - len(body)
        found.append(Block(path, start, language, title["title"] if title else None, tuple(body)))
        index += 1
    return found


def dry_form(command: str) -> str | None:
    """A not-run command's ``--help`` form: crabray commands and scripts/*.py; else None."""
    words = shlex.split(command, comments=True)
    while words and re.fullmatch(r"[A-Z_][A-Z0-9_]*=\S*", words[0]):
        words = words[1:]  # VAR=value before the program
    if not words:
        return None
    program = Path(words[0]).name
    if program == "crabray":
        return shlex.join([*words, "--help"])
    is_script = len(words) > 1 and words[1].startswith("scripts/") and words[1].endswith(".py")
    if program.startswith("python") and is_script:
        return shlex.join([*words, "--help"])
    return None
