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
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, TextIO

from rich.cells import cell_len
from rich.console import Console, Group, RenderableType
from rich.markup import escape
from rich.table import Table
from rich.text import Text

if TYPE_CHECKING:
    from rich.console import HighlighterType, JustifyMethod, OverflowMethod
    from rich.style import Style

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


@dataclass(frozen=True)
class Column:
    """A column of a listing (``tasks list``, ``runs list``) that must read at 80 columns."""

    header: str
    whole: bool = False
    """Never wrapped between words (an id, a count, a state): folded only when the
    terminal is narrower than the value itself, never cut."""
    drop: int = 0
    """0: always shown; else left out when the terminal is too narrow, highest first."""


_TABLE_FRAME = 3
"""Columns a framed rich table spends per column (padding either side, a border)."""


def fitted_table(
    title: str, columns: Sequence[Column], rows: Sequence[Sequence[str]], width: int
) -> RenderableType:
    """A framed table of ``rows`` (rich markup, made safe) that reads in ``width`` columns.

    Every column gets at least its header's width and its longest word (a whole
    column: its longest value), so nothing is cut and no header is broken;
    columns that do not fit even so are left out, highest ``drop`` first, and
    the room left is shared by the columns whose values are wider (which wrap
    at spaces). A title wider than the table goes on a line of its own above
    it, folded rather than cut.
    """
    plain = [[Text.from_markup(cell).plain for cell in row] for row in rows]
    cap = max(width - 2 * _TABLE_FRAME, 10)
    widest = [
        min(cap, max([len(column.header), *(cell_len(row[i]) for row in plain)]))
        for i, column in enumerate(columns)
    ]
    words = [
        max([len(column.header), *(cell_len(w) for row in plain for w in row[i].split())])
        for i, column in enumerate(columns)
    ]
    least = [widest[i] if column.whole else min(cap, words[i]) for i, column in enumerate(columns)]
    kept = list(range(len(columns)))
    while sum(least[i] + _TABLE_FRAME for i in kept) + 1 > width:
        droppable = [i for i in kept if columns[i].drop]
        if not droppable:
            break
        kept.remove(max(droppable, key=lambda i: (columns[i].drop, i)))
    room = width - _TABLE_FRAME * len(kept) - 1
    floors = [len(columns[i].header) if not columns[i].whole else least[i] for i in kept]
    fitted = _narrowed([least[i] for i in kept], floors, room)
    shares = _share(room, fitted, [widest[i] for i in kept])
    table = Table()
    for index, share in zip(kept, shares, strict=True):
        table.add_column(columns[index].header, width=share, overflow="fold")
    for row in rows:
        table.add_row(*(row[index] for index in kept))
    table_width = sum(shares) + _TABLE_FRAME * len(kept) + 1
    if len(Text.from_markup(title)) <= table_width:
        table.title = title
        return table
    return Group(Text.from_markup(title, overflow="fold"), table)


def _narrowed(widths: list[int], floors: list[int], room: int) -> list[int]:
    """``widths`` narrowed, widest first, until they fit ``room`` or reach their floors: the
    last resort of a terminal too narrow for every kept column's longest word (the
    words of a narrowed column fold; whole columns' floors are their values)."""
    widths = list(widths)
    while sum(widths) > room:
        above = [i for i in range(len(widths)) if widths[i] > floors[i]]
        if not above:
            break
        widths[max(above, key=lambda i: widths[i] - floors[i])] -= 1
    return widths


def _share(room: int, least: list[int], widest: list[int]) -> list[int]:
    """Each column's width: its least, then the ``room`` left shared out (never past a
    column's widest value), the columns that want least first: a short value (a date) is
    made whole before a long one (a list of agents) takes what remains and wraps."""
    widths = list(least)
    spare = room - sum(widths)
    wanting = sorted(range(len(widths)), key=lambda i: widest[i] - widths[i])
    for place, index in enumerate(wanting):
        fair = max(spare, 0) // (len(wanting) - place)
        more = min(max(widest[index] - widths[index], 0), fair)
        widths[index] += more
        spare -= more
    return widths
