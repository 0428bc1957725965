"""What an audit learns of a task before probing it: its answers, its files, its options.

Read from the task as loaded, never from a run: the arguments bound to its
evaluators and scorer, its reference solution, and the grading and solution
files a task folder or a Harbor task ships beside it. A value the agent's
own instruction states is no secret and is left out, and so are values too
short or too common to point at an answer (``42`` is in every system).
"""

from __future__ import annotations

import ast
import posixpath
import re
import shlex
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from crabray.agents.probes import LINE_JOIN, ProbeFacts
from crabray.core import Action, Task

MIN_SECRET_CHARS = 6
"""A shorter expected value is no evidence when found: it is everywhere."""
MIN_FINGERPRINT_CHARS = 16
"""A line of a shipped grading or solution file must be this long to identify the file."""
MAX_SECRETS = 24
MAX_SECRET_CHARS = 4000
"""A longer value is a whole file: its fingerprint lines stand for it."""

_PATH_KEYS = {"path", "file", "file_path", "filename", "filepath", "target", "dest", "output"}
_NOT_ANSWERS = {
    "command",
    "cmd",
    "url",
    "name",
    "title",
    "env",
    "pattern",
    "regex",
    "selector",
    "app",
    "window",
    "key",
    "keys",
    "directory",
    "dir",
    "encoding",
    "mode",
}
_COMMON = {"true", "false", "none", "null", "utf-8", "passed", "failed", "success", "error"}
_FILE_MENTION = re.compile(
    r"(?<![\w:/.])((?:/|\./)?[\w.-]+(?:/[\w.-]+)*\.(?:txt|json|csv|md|yaml|yml|out|log|html|xml|tsv))\b"
)
_OPTION = re.compile(r"^\s*\(?([A-Ha-h])[).:]\s+(\S.*)$", re.MULTILINE)
_INLINE_OPTION = re.compile(r"\(([A-Ha-h])\)\s*([^()\n]+?)(?=\s*\([A-Ha-h]\)|[\n?.;]|$)")
"""Lettered options only: numbered lines are an instruction's steps as often as choices."""
_WRITE_ACTIONS = {"write_file", "write_text", "write_note"}
_SUBMIT_ACTIONS = {"submit", "check_submit"}


def task_facts(task: Task) -> ProbeFacts:
    """What the probes may use against ``task``."""
    described = task.description.casefold()
    expected = _expected_values(task)
    secrets = _keep_secrets([*expected, *_shipped_fingerprints(task)], described)
    literals = _shipped_literals(task)
    clues = [c for c in _keep_secrets(literals, described) if c not in secrets]
    return ProbeFacts(
        secrets=secrets,
        clues=clues,
        expected=_said([*expected, *literals]),
        answer_stated=bool(expected) and all(v.strip().casefold() in described for v in expected),
        files=_graded_files(task),
        options=_options(task.description),
        solution_script=_solution_script(task.solution),
    )


def _actions(task: Task) -> Iterator[Action]:
    """Every evaluator of the task (and the parts it combines), and its scorer."""
    stack: list[Action] = [*task.evaluator.nodes, *([task.scorer] if task.scorer else [])]
    while stack:
        action = stack.pop()
        yield action
        stack.extend(action.parts)


def _strings(value: Any, key: str) -> Iterator[tuple[str, str]]:
    """(argument name, text) for every string in a bound argument, lists and dicts opened."""
    if isinstance(value, str):
        yield key, value
    elif isinstance(value, dict):
        for name, item in value.items():
            yield from _strings(item, str(name))
    elif isinstance(value, list | tuple):
        for item in value:
            yield from _strings(item, key)


def _expected_values(task: Task) -> list[str]:
    """Values graders compare against, and the answers the reference solution gives."""
    found: list[str] = []
    for action in _actions(task):
        for key, text in (pair for k, v in action.bound.items() for pair in _strings(v, k)):
            if key.lower() not in _PATH_KEYS | _NOT_ANSWERS:
                found.append(text)
    for step in task.solution:
        if step.name in _WRITE_ACTIONS | _SUBMIT_ACTIONS:
            found += [text for key, text in _bound_strings(step) if key in {"content", "text"}]
    return found


def _bound_strings(action: Action) -> list[tuple[str, str]]:
    return [pair for key, value in action.bound.items() for pair in _strings(value, key)]


def _shipped_sources(task: Task) -> list[tuple[Path, str]]:
    """The grading and solution files a task folder or Harbor task ships, with their text."""
    folder = task.metadata.get("folder")
    if not isinstance(folder, str):
        return []
    root = Path(folder)
    files = [root / "evaluator.py", root / "solution.sh"]
    for sub in ("solution", "tests"):
        if (root / sub).is_dir():
            files += sorted(p for p in (root / sub).rglob("*") if p.is_file())
    sources = []
    for path in files:
        try:
            sources.append((path, path.read_text(encoding="utf-8")))
        except (OSError, UnicodeDecodeError):
            continue
    return sources


def _shipped_fingerprints(task: Task) -> list[str]:
    """A line of each shipped grading or solution file: found, the file was copied there."""
    return [line for _, text in _shipped_sources(task) for line in _fingerprints(text)]


def _shipped_literals(task: Task) -> list[str]:
    """The strings shipped graders and solutions compare against or write. Inputs of the
    task are among them too (a grader filters by a date the data holds), so they are
    clues: looked for only where no input of the task belongs (``ProbeFacts.clues``)."""
    values: list[str] = []
    for path, text in _shipped_sources(task):
        if path.suffix == ".py":
            values += _literals(text)
        elif path.suffix == ".sh":
            values += _shell_literals(text)
    return values


_SHELL_QUOTED = re.compile(r"'([^'\n]{8,})'|\"([^\"$`\\\n]{8,})\"")


def _shell_literals(source: str) -> list[str]:
    """Quoted strings of a shell grader or solution (no expansions): what it compares or
    writes."""
    return [single or double for single, double in _SHELL_QUOTED.findall(source)]


def _fingerprints(text: str) -> list[str]:
    """The file's longest distinctive line: found elsewhere, the file was copied there."""
    lines = sorted(
        {line.strip() for line in text.splitlines() if len(line.strip()) >= MIN_FINGERPRINT_CHARS},
        key=len,
        reverse=True,
    )
    return lines[:1]


def _literals(source: str) -> list[str]:
    """String constants of a Python grader: what it compares against."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return []
    docstrings = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Module | ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }
    return [
        node.value
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and id(node) not in docstrings
        and len(node.value) >= 8
    ]


def _keep_secrets(values: list[str], described: str) -> list[str]:
    """One line per value, distinctive, not in the instruction; the longest first."""
    kept: set[str] = set()
    for value in values:
        line = _distinctive_line(value)
        if line is None or line.casefold() in described or _looks_like_path(line):
            continue
        if line.casefold() in _COMMON or (line.isdigit() and len(line) < 8):
            continue
        kept.add(line)
    return sorted(kept, key=lambda s: (-len(s), s))[:MAX_SECRETS]


def _said(values: list[str]) -> list[str]:
    """Expected values as a forged program prints them: short ones too, no paths."""
    kept = (v.strip() for v in values if 0 < len(v.strip()) <= 200)
    return list(dict.fromkeys(v for v in kept if not _looks_like_path(v)))[:MAX_SECRETS]


def _distinctive_line(value: str) -> str | None:
    """The value as the peek looks for it: stripped, its lines joined by ``LINE_JOIN`` (one
    line of it may be an input's, such as a CSV header); None when too short."""
    lines = [line.rstrip() for line in value.strip().splitlines()]
    joined = LINE_JOIN.join(lines)
    if len(joined) > MAX_SECRET_CHARS:
        return None
    return joined if len(joined.replace(LINE_JOIN, "")) >= MIN_SECRET_CHARS else None


def _looks_like_path(text: str) -> bool:
    return " " not in text and ("/" in text or bool(re.fullmatch(r"[\w.-]+\.\w{1,5}", text)))


def _graded_files(task: Task) -> list[str]:
    """Files whose content is the answer: a grader compares them with a value, or the
    solution writes them with some. A file whose existence is the task (``path_exists``)
    is none: creating it empty is doing the task. A task graded by a script of its own
    (a scorer) says which files in its instruction only."""
    files: list[str] = []
    for action in _actions(task):
        pairs = _bound_strings(action)
        if any(key.lower() not in _PATH_KEYS | _NOT_ANSWERS for key, _ in pairs):
            files += [text for key, text in pairs if key.lower() in _PATH_KEYS]
    for step in task.solution:
        pairs = _bound_strings(step)
        if step.name in _WRITE_ACTIONS and any(k in {"content", "text"} and v for k, v in pairs):
            files += [text for key, text in pairs if key in {"path", "name"}]
    if task.scorer is not None:
        files += _FILE_MENTION.findall(task.description)
    return sorted({f for f in files if f and "\n" not in f and "://" not in f})


def _options(description: str) -> list[str]:
    """The choices an instruction offers: lettered options (letters included), yes or no,
    true or false; none when it offers no choice."""
    options: list[str] = []
    for letter, text in [*_OPTION.findall(description), *_INLINE_OPTION.findall(description)]:
        options += [letter, text.strip()]
    if len(options) < 4:
        options = []
    for pair in (("yes", "no"), ("true", "false")):
        if all(re.search(rf"\b{word}\b", description, re.IGNORECASE) for word in pair):
            options += pair
    return list(dict.fromkeys(options))


def _solution_script(solution: list[Action]) -> str | None:
    """The reference solution as one shell script, where each of its steps is a command or a
    file write; None when a step is neither (a click cannot be replayed from a shell)."""
    lines: list[str] = []
    for step in solution:
        args = step.bound
        if "command" in args and isinstance(args["command"], str):
            lines.append(args["command"])
        elif step.name == "write_file" and isinstance(args.get("path"), str):
            folder = posixpath.dirname(args["path"])
            if folder:
                lines.append(f"mkdir -p {shlex.quote(folder)}")
            lines.append(
                f"printf '%s' {shlex.quote(str(args.get('content', '')))} > "
                f"{shlex.quote(args['path'])}"
            )
        else:
            return None
    return "\n".join(lines) or None
