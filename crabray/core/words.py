"""Counts in words: ``1 episode``, ``2 episodes``, ``1 pass``, ``3 passes``.

One helper for every count crabray says (the CLI's lines, errors and log
messages of every layer), so that none says "1 episodes" again.
"""

from __future__ import annotations


def plural(count: int, one: str, many: str | None = None) -> str:
    """The word for ``count`` things: ``one`` for exactly 1, else ``many``.

    Args:
        count: How many.
        one: The singular (``episode``, ``was``).
        many: The plural, when it is not ``one`` + ``s`` (``passes``, ``were``).

    Example:
        >>> f"{plural(1, 'episode')} {plural(1, 'was', 'were')} skipped"
        'episode was skipped'
    """
    if count == 1:
        return one
    return one + "s" if many is None else many


def counted(count: int, one: str, many: str | None = None) -> str:
    """``count`` and its noun: ``counted(1, "episode")`` is ``1 episode``, 2 ``2 episodes``.

    Args:
        count: How many.
        one: The singular noun (``benchmark error``: the last word takes the ending).
        many: The plural, when it is not ``one`` + ``s`` (``passes``, ``sandboxes``).
    """
    return f"{count} {plural(count, one, many)}"


def did_you_mean(word: str, candidates: list[str]) -> str:
    """``; did you mean 'docker'?``: the candidates closest to a misspelt ``word``.

    Nothing when none is close (``difflib``'s ratio of at least 0.6).

    Example:
        >>> did_you_mean("dockr", ["docker", "local", "ssh", "vm"])
        "; did you mean 'docker'?"
    """
    import difflib

    close = difflib.get_close_matches(word, candidates, n=3)
    if not close:
        return ""
    return "; did you mean " + " or ".join(repr(c) for c in close) + "?"
