"""The leaderboard of an Arrow table: what ``crabray leaderboard`` computes, without pandas.

``leaderboard`` takes a pandas frame; at a million episodes, making that frame
(and importing pandas for it) cost more than the statistics themselves. Here
the deduplicated episode rows stay an Arrow table (``read_episode_table``:
dictionary-encoded strings, rows in the files' order), the group keys are
coded from the dictionaries' indices, and the statistics come from the same
arithmetic as ``leaderboard``'s (``crabray.results._aggregate``): same
columns, same order, same numbers, as an Arrow table that ``render`` and
``to_rich_table`` take as they take a frame.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from crabray.core.errors import ResultsError
from crabray.results._aggregate import Codes, combine, pass_columns, summary
from crabray.results._numpy import to_arrow, to_numpy
from crabray.results.dataset import INFRA_REASONS
from crabray.results.leaderboard import (
    _INT_COLUMNS,
    _TASK_SAMPLE,
    DEFAULT_BY,
    LEADERBOARD_INPUT_COLUMNS,
    STAT_COLUMNS,
)
from crabray.results.stats import DEFAULT_CONFIDENCE


def _dictionary(column: pa.ChunkedArray) -> tuple[pa.Array, np.ndarray]:
    """The column as one dictionary and each row's index into it (-1 for a null).

    A dictionary column's chunks share one dictionary (``leaderboard_table``
    unifies them first).
    """
    if not pa.types.is_dictionary(column.type):
        column = pa.chunked_array([pc.dictionary_encode(column.combine_chunks())])
    if column.num_chunks == 0:
        return pa.array([], column.type.value_type), np.empty(0, np.int64)
    return column.chunk(0).dictionary, to_numpy(column, null=-1).astype(np.int64)


def _codes(column: pa.ChunkedArray) -> Codes:
    """Integer codes of a column's values, a null being a code of its own."""
    dictionary, indices = _dictionary(column)
    size = len(dictionary) + 1
    return np.where(indices < 0, size - 1, indices), size


def _graded(episodes: pa.Table) -> np.ndarray:
    """True for rows with a verdict on the agent (not an infrastructure failure)."""
    dictionary, indices = _dictionary(episodes.column("termination_reason"))
    infra = np.array([value in INFRA_REASONS for value in dictionary.to_pylist()] + [False])
    return ~infra[indices]  # index -1 (a null) reads the trailing False: graded


def _labels(column: pa.ChunkedArray, rows: np.ndarray) -> pa.Array:
    """The values of ``rows`` of a key column, plain strings rather than dictionary indices."""
    values = column.take(to_arrow(rows.astype(np.int64)))
    if pa.types.is_dictionary(values.type):
        values = values.cast(values.type.value_type)
    return values.combine_chunks()


def leaderboard_table(
    episodes: pa.Table,
    by: Sequence[str] = DEFAULT_BY,
    *,
    confidence: float = DEFAULT_CONFIDENCE,
    max_k: int | None = None,
) -> pa.Table:
    """``leaderboard`` of an Arrow table of episode rows, as an Arrow table.

    Args:
        episodes: Deduplicated episode rows (``read_episode_table``) with at
            least ``LEADERBOARD_INPUT_COLUMNS`` and the ``by`` columns; string
            columns may be dictionary-encoded.
        by: Columns that make a row.
        confidence: Coverage of the success-rate interval.
        max_k: Largest k of the pass@k / pass^k columns; every k the data allows when None.

    Returns:
        What ``leaderboard`` returns for the same rows (columns, order, values),
        the ``by`` columns as plain strings, counts as int64, the rest float64.

    Raises:
        ResultsError: A needed column is missing.
    """
    keys = list(by)
    needed = list(dict.fromkeys([*LEADERBOARD_INPUT_COLUMNS, *keys]))
    missing = [name for name in needed if name not in episodes.column_names]
    if missing:
        raise ResultsError(
            f"cannot build a leaderboard: episode rows lack column(s) {missing}; read them "
            "with read_episode_table(out, columns=[*LEADERBOARD_INPUT_COLUMNS, ...])"
        )
    if episodes.num_rows == 0:
        return _empty(episodes, keys)
    episodes = episodes.unify_dictionaries()
    ids, first = combine([_codes(episodes.column(name)) for name in keys], episodes.num_rows)
    groups = len(first)
    graded = _graded(episodes)
    floats: dict[str, np.ndarray] = {}

    def values(name: str) -> np.ndarray:
        if name not in floats:
            column = episodes.column(name)
            floats[name] = to_numpy(column).astype(np.float64)
        return floats[name]

    stats = summary(ids, groups, graded, values, confidence, full=True)
    passes = pass_columns(
        ids,
        groups,
        graded,
        [_codes(episodes.column(name)) for name in _TASK_SAMPLE],
        values("success"),
        max_k,
    )
    columns: dict[str, pa.Array] = {name: _labels(episodes.column(name), first) for name in keys}
    for name in STAT_COLUMNS:
        ints = name in _INT_COLUMNS
        columns[name] = to_arrow(stats[name].astype(np.int64) if ints else stats[name])
    for name, column in (passes or {}).items():
        columns[name] = to_arrow(column)
    table = pa.Table.from_arrays(list(columns.values()), names=list(columns))
    return table.sort_by(
        [
            ("success_rate", "descending"),
            ("mean_score", "descending"),
            *((name, "ascending") for name in keys),
        ]
    )


def _empty(episodes: pa.Table, keys: list[str]) -> pa.Table:
    def key_type(name: str) -> pa.DataType:
        kind = episodes.schema.field(name).type
        return kind.value_type if pa.types.is_dictionary(kind) else kind

    fields = [pa.field(name, key_type(name)) for name in keys]
    fields += [
        pa.field(name, pa.int64() if name in _INT_COLUMNS else pa.float64())
        for name in STAT_COLUMNS
    ]
    return pa.schema(fields).empty_table()
