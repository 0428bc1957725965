"""The terminal the ``crabray`` command owns: one console for results, one for messages.

Agents, suites, tests and the commands they run write whatever they like, and
crabray shows some of it back: error messages, task ids, agent names, log
lines. Raw, such text could drive the terminal (clear the screen and print a
fake "all passed", move the cursor, write the clipboard with OSC 52, make a
hyperlink lie about its target, reorder a line with bidi overrides), and as
rich markup it could restyle or hide the output around it. ``safe_text`` makes
such text inert; both consoles also strip control sequences from every string
they render, so a call site that forgets still cannot drive the terminal.
What is stored (Parquet rows, logs, ``--format csv`` into a file) keeps the
text as written: only what is shown is stripped.
"""

from __future__ import annotations

import re
import sys
from typing import TYPE_CHECKING, TextIO

from rich.console import Console
from rich.markup import escape

if TYPE_CHECKING:
    from rich.console import HighlighterType, JustifyMethod, OverflowMethod
    from rich.style import Style
    from rich.text import Text

_SEQUENCE = re.compile(
    r"""
      (?:\x1b\[|\x9b) [0-?]* [ -/]* [@-~]                         # CSI: cursor, erase, colours
    | (?:\x1b\]|\x9d) [^\x07\x1b\x9c]* (?:\x07|\x1b\\|\x9c)?      # OSC (title, link, clipboard)
    | (?:\x1b[PX^_]|[\x90\x98\x9e\x9f]) [^\x1b\x9c]* (?:\x1b\\|\x9c)?  # DCS, SOS, PM, APC
    | \x1b [ -/]* [0-~]                                         # any other ESC + final byte
    """,
    re.VERBOSE,
)
"""ANSI/VT escape sequences, whole, so that no parameter of one is left as text.

A string without its terminator (an OSC cut short) runs to the end of the text,
as a terminal would swallow it. What is left of a malformed sequence is plain
text once its ESC is gone (the translate below removes any lone ESC).
"""

_BIDI = (*range(0x202A, 0x202F), *range(0x2066, 0x206A))
"""Bidi embeddings, overrides and isolates (LRE..RLO, LRI..PDI): they reorder what
follows them on screen, so a line can read differently from what it holds."""

_DROPPED: dict[int, str | None] = {
    **{code: None for code in (*range(0x00, 0x20), 0x7F, *range(0x80, 0xA0), *_BIDI)},
    ord("\t"): "\t",
    ord("\n"): "\n",
    ord("\r"): "\n",  # a lone CR would let the text after it overwrite the line
}
"""C0 controls but tab and newline, DEL, C1 controls and bidi controls: removed."""

_UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
"""Any character ``strip_controls`` changes: text without one is returned as it is."""


def strip_controls(text: str) -> str:
    """``text`` with nothing left that a terminal acts on rather than shows.

    Escape sequences (CSI, OSC to BEL or ST, DCS/SOS/PM/APC strings, ESC and a
    character, and their 8-bit C1 forms) go whole; then every C0 control but tab
    and newline, DEL, C1 controls and bidi overrides and isolates go. A carriage
    return becomes a newline (``\\r\\n`` one newline): what followed it stays
    visible on a line of its own instead of overwriting the line it ended.
    Letters of every script and emoji are kept. Markup is not escaped: this is
    for plain output (see ``safe_text`` for rich's).
    """
    if _UNSAFE.search(text) is None:  # the usual case: one scan, no copy
        return text
    return _SEQUENCE.sub("", text).replace("\r\n", "\n").translate(_DROPPED)


def safe_text(text: object) -> str:
    """``text`` (an agent's, a suite's, a test's or a results row's) ready for a rich
    markup string: stripped of control sequences (``strip_controls``), markup escaped.

    Every text the CLI did not write itself goes through this before it is
    printed, so that it shows as written and never drives or restyles the terminal.
    """
    return escape(strip_controls(str(text)))


def plain_text(text: str, stream: TextIO | None = None) -> str:
    """``text`` for a plain write to ``stream`` (stdout by default): stripped of control
    sequences when it is a terminal, as written when it is a file or a pipe.

    Output such as ``--format md``/``csv`` or ``tasks list --format ids`` is data
    when redirected (a file keeps the text as written) and a display on a terminal.
    """
    out = sys.stdout if stream is None else stream
    return strip_controls(text) if out.isatty() else text


class _Console(Console):
    """A rich console that strips control sequences from every string it renders.

    Markup, tables, progress messages and ``out`` all turn strings into text here
    (``render_str``), so an agent's text that a call site printed without
    ``safe_text`` shows its characters, never its escape sequences. Markup must
    still be escaped at the call site: only there is it known which part is ours.
    """

    def render_str(
        self,
        text: str,
        *,
        style: str | Style = "",
        justify: JustifyMethod | None = None,
        overflow: OverflowMethod | None = None,
        emoji: bool | None = None,
        markup: bool | None = None,
        highlight: bool | None = None,
        highlighter: HighlighterType | None = None,
    ) -> Text:
        return super().render_str(
            strip_controls(text),
            style=style,
            justify=justify,
            overflow=overflow,
            emoji=emoji,
            markup=markup,
            highlight=highlight,
            highlighter=highlighter,
        )


console: Console = _Console()
"""Standard output: tables, results, the commands to type next."""
errors: Console = _Console(stderr=True)
"""Standard error: progress, warnings and errors, kept apart from output a script may parse."""


def print_copyable(line: str) -> None:
    """A line a user copies (a command): one line whatever the width, no colours."""
    console.print(line, soft_wrap=True, highlight=False)
