"""What reaches the terminal: text of agents, suites and tests shows, it never drives it.

A hostile agent or a benchmark's test can put escape sequences in what crabray
shows back (an error message, a task id): the CLI strips them, and escapes rich
markup, while the results on disk keep the text as written.
"""

from __future__ import annotations

import io
import logging
import os
import pty
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from crabray.cli.app import _print_traceback, _SentenceHandler
from crabray.cli.terminal import console, errors, plain_text, safe_text, strip_controls
from crabray.results import read_episodes
from tests.conftest import ROOT, crabray

HOSTILE = "\x1b[2J\x1b[H ALL 4 EPISODES PASSED\x1b]52;c;ZXZpbA==\x07"
"""Clear the screen, home the cursor, claim success, write the clipboard (OSC 52)."""

_FORBIDDEN = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
"""What no shown text may hold: ESC, C0 but tab and newline, DEL, C1, bidi controls."""

HOSTILE_INPUTS = {
    "csi clear and home": ("\x1b[2J\x1b[Hdone", "done"),
    "csi private mode": ("a\x1b[?1049hb\x1b[?25l", "ab"),
    "csi colour": ("\x1b[1;31mred\x1b[0m", "red"),
    "csi 8-bit": ("a\x9b2Jb", "ab"),
    "osc 52 clipboard, bel": ("x\x1b]52;c;ZXZpbA==\x07y", "xy"),
    "osc 8 hyperlink, st": ("\x1b]8;;http://evil/\x1b\\click\x1b]8;;\x1b\\", "click"),
    "osc title, 8-bit st": ("\x9d0;pwned\x9cok", "ok"),
    "osc unterminated": ("ok\x1b]0;title to the end", "ok"),
    "dcs": ("a\x1bPq#0;2;0;0;0#0~~@@\x1b\\b", "ab"),
    "sos pm apc": ("1\x1bXsos\x1b\\2\x1b^pm\x1b\\3\x1b_apc\x1b\\4", "1234"),
    "esc and a character": ("\x1bc\x1b7a\x1b8\x1b(Bb\x1bM", "ab"),
    "lone esc": ("a\x1b", "a"),
    "carriage return": ("PASSED\rFAILED", "PASSED\nFAILED"),
    "crlf": ("one\r\ntwo", "one\ntwo"),
    "backspace and bel": ("FAIL\x08\x08\x08\x08PASS\x07", "FAILPASS"),
    "other c0 and del": ("a\x00b\x0bc\x0cd\x1ce\x7ff", "abcdef"),
    "c1": ("a\x84b\x85c\x8dd\x91e\x9f", "abcde"),
    "bidi override": ("good \u202egnp.exe\u202c", "good gnp.exe"),
    "bidi embeddings and isolates": ("\u202a\u202b\u202d\u2066\u2067\u2068x\u2069", "x"),
}


@pytest.mark.parametrize("hostile", list(HOSTILE_INPUTS), ids=list(HOSTILE_INPUTS))
def test_every_sequence_class_is_stripped(hostile: str) -> None:
    text, expected = HOSTILE_INPUTS[hostile]
    shown = strip_controls(text)
    assert shown == expected
    assert _FORBIDDEN.search(shown) is None
    assert _FORBIDDEN.search(safe_text(text)) is None


@pytest.mark.parametrize(
    "ordinary",
    [
        "hello-file",
        "naïve café, Grüße, Ελληνικά, русский, 日本語, עברית, العربية",
        "emoji 🦀🎉 and a family 👨‍👩‍👧 (zero-width joiners stay)",
        "tabs\tand\nnewlines\n",
        "",
    ],
)
def test_ordinary_text_is_kept(ordinary: str) -> None:
    assert strip_controls(ordinary) == ordinary


def test_safe_text_escapes_markup_so_it_shows_as_written() -> None:
    with console.capture() as shown:
        console.print(
            f"[bold]task:[/] {safe_text('[red]x[/] [link=http://evil]y[/link]' + HOSTILE)}"
        )
    assert shown.get() == "task: [red]x[/] [link=http://evil]y[/link] ALL 4 EPISODES PASSED\n"


def test_the_consoles_strip_what_a_call_site_forgot() -> None:
    """Every string the consoles render is stripped: markup, ``out`` and table cells."""
    from rich.table import Table

    table = Table(title="t")
    table.add_column("agent")
    table.add_row(HOSTILE)
    for terminal in (console, errors):
        with terminal.capture() as shown:
            terminal.print(HOSTILE)
            terminal.out(HOSTILE)
            terminal.print(table)
        assert "\x1b" not in shown.get()
        assert shown.get().count("ALL 4 EPISODES PASSED") == 3


def test_plain_output_is_stripped_on_a_terminal_and_kept_as_written_elsewhere() -> None:
    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    assert plain_text(HOSTILE, Terminal()) == " ALL 4 EPISODES PASSED"
    assert plain_text(HOSTILE, io.StringIO()) == HOSTILE


def test_log_lines_on_the_terminal_are_stripped() -> None:
    record = logging.LogRecord(
        "crabray.x", logging.WARNING, __file__, 1, "agent said %s", (HOSTILE + "[/]",), None
    )
    with errors.capture() as shown:
        _SentenceHandler().handle(record)
    assert shown.get() == "warning: agent said  ALL 4 EPISODES PASSED[/]\n"


def test_a_bugs_traceback_is_stripped(capsys: pytest.CaptureFixture[str]) -> None:
    try:
        raise KeyError(HOSTILE)
    except KeyError as exc:
        _print_traceback(exc)
    said = capsys.readouterr().err
    assert "Traceback (most recent call last)" in said
    assert "ALL 4 EPISODES PASSED" in said
    assert "\x1b" not in said and "\x07" not in said


HOSTILE_TASKS = textwrap.dedent(
    """
    from crabray import BenchmarkConfig, EnvironmentConfig, Task
    from crabray.actions import FILE_ACTIONS, path_exists

    bench = BenchmarkConfig(
        name="hostile",
        environments=[EnvironmentConfig(name="box", action_space=FILE_ACTIONS)],
        tasks=[
            Task(
                id="id\\x1b[2J[/]\\u202egnp",
                description="d",
                evaluator=path_exists(path="x"),
                tags=["tag\\x1b]52;c;ZXZpbA==\\x07"],
            )
        ],
    )
    """
)


def test_tasks_list_and_validate_show_hostile_ids_and_tags_inert(tmp_path: Path) -> None:
    suite = tmp_path / "hostile.py"
    suite.write_text(HOSTILE_TASKS)
    for command in ("list", "validate"):
        done = crabray("tasks", command, str(suite))
        assert done.returncode == 0, done.stdout + done.stderr
        shown = done.stdout + done.stderr
        assert _FORBIDDEN.search(shown) is None, repr(shown)
    listed = crabray("tasks", "list", str(suite), check=True).stdout
    assert "id[/]gnp" in listed and "tag" in listed
    # Ids for a script (--format ids into a pipe) are data: kept as written.
    ids = crabray("tasks", "list", str(suite), "--format", "ids", check=True).stdout
    assert ids == "id\x1b[2J[/]\u202egnp\n"


EXPLODING_SUITE = textwrap.dedent(
    """
    from crabray import BenchmarkConfig, EnvironmentConfig, Task, evaluator
    from crabray.actions import FILE_ACTIONS, write_file

    ENV = EnvironmentConfig(
        name="box", action_space=FILE_ACTIONS, backend_settings={"isolation": "none"}
    )


    @evaluator
    def checks_out() -> bool:
        '''A test whose failure message tries to drive the terminal.'''
        raise RuntimeError(HOSTILE)


    bench = BenchmarkConfig(
        name="exploding",
        environments=[ENV],
        tasks=[
            Task(
                id="ordinary",
                description="write x",
                evaluator=checks_out(),
                solution=[write_file(path="x", content="x")],
            )
        ],
    )
    """
)


def _on_a_terminal(*args: str) -> str:
    """What ``crabray ARGS`` writes to standard output when it is a terminal (a pty)."""
    main, side = pty.openpty()
    with subprocess.Popen(
        [sys.executable, "-m", "crabray", *args],
        stdout=side,
        stderr=subprocess.DEVNULL,
        cwd=ROOT,
        env={**os.environ, "COLUMNS": "200", "NO_COLOR": "1"},
    ) as proc:
        os.close(side)
        chunks = []
        while True:
            try:
                chunk = os.read(main, 65536)
            except OSError:  # EIO: the command ended and closed its side
                break
            if not chunk:
                break
            chunks.append(chunk)
        assert proc.wait(timeout=120) == 0
    os.close(main)
    return b"".join(chunks).decode()


@pytest.mark.ray
@pytest.mark.slow
def test_a_run_shows_an_evaluators_escapes_inert_and_stores_them_as_written(
    tmp_path: Path,
) -> None:
    suite = tmp_path / "exploding.py"
    suite.write_text(f"HOSTILE = {HOSTILE!r}\n" + EXPLODING_SUITE)
    out = tmp_path / "out"
    done = crabray("run", str(suite), "--agent", "oracle", "--out", str(out))
    assert done.returncode == 1, done.stdout + done.stderr  # a benchmark error
    for shown in (done.stdout, done.stderr):
        assert "\x1b" not in shown and "\x07" not in shown, repr(shown)
        assert _FORBIDDEN.search(shown) is None, repr(shown)
    assert "ALL 4 EPISODES PASSED" in done.stdout  # the message shows, inert
    # The results keep the message as the test wrote it.
    (error,) = read_episodes(out)["error"].tolist()
    assert HOSTILE in error

    # The error as a leaderboard's row key: a table on the terminal, inert.
    board = crabray("leaderboard", str(out), "--by", "error", check=True)
    assert "\x1b" not in board.stdout + board.stderr
    assert "ALL 4 EPISODES PASSED" in board.stdout
    # Markdown into a pipe is data, kept as written; on a terminal it is stripped.
    piped = crabray("leaderboard", str(out), "--by", "error", "--format", "md", check=True)
    assert HOSTILE in piped.stdout
    on_terminal = _on_a_terminal("leaderboard", str(out), "--by", "error", "--format", "md")
    assert "ALL 4 EPISODES PASSED" in on_terminal
    assert "\x1b" not in on_terminal and "\x07" not in on_terminal


def _at_80_columns(*args: str) -> str:
    """``crabray ARGS``'s output in an 80-column terminal's width."""
    env = {**os.environ, "COLUMNS": "80", "NO_COLOR": "1"}
    command = [sys.executable, "-m", "crabray", *args]
    done = subprocess.run(command, capture_output=True, text=True, timeout=300, cwd=ROOT, env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def _readable(text: str, *whole: str) -> None:
    """Within 80 columns, nothing cut (no ellipsis), and each of ``whole`` on one line."""
    assert max(len(line) for line in text.splitlines()) <= 80, text
    assert "…" not in text, text
    for word in whole:
        assert any(word in line for line in text.splitlines()), f"{word!r} cut:\n{text}"


def test_tasks_list_is_readable_at_80_columns() -> None:
    """Issue 39: the table was cut at the right edge (tags), its headers broken."""
    text = _at_80_columns("tasks", "list", "tasks/demo")
    _readable(text, "script-then-answer", "environments", "evaluators", "workstation")
    header = next(line for line in text.splitlines() if " task " in line)
    assert "tags" in header, text
    assert "multienv" in text, "the tags of the last task are shown"


def test_runs_list_is_readable_at_80_columns(tmp_path: Path) -> None:
    """Issue 39: the state was cut ("interrup…") beside a long suite name and many agents."""
    from crabray.results import RunManifest, RunState, write_manifest

    run_id = "20261205-162521-9d255a"
    manifest = RunManifest(
        run_id=run_id,
        suite="tasks/task_folder_demo",
        suite_name="task_folder_demo",
        agents=["oracle", "noop", "gpt-4o-planner", "qwen-local"],
        crabray_version="0.1.0",
        planned=24,
        state=RunState.INTERRUPTED,
    )
    write_manifest(tmp_path, manifest)
    text = _at_80_columns("runs", "list", str(tmp_path))
    _readable(text, run_id, "interrupted", "0/24", "gpt-4o-planner")
