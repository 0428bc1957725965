"""Episode keys as integers, and one row per key: the arithmetic deduplication rests on.

Pure functions of Arrow tables (no file is read here): ``crabray.results.store.dataset``
reads the part files, then uses these to keep one row per episode key fast at a
million rows, without comparing the key's strings row by row.
"""

from __future__ import annotations

from typing import Literal

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from crabray.results._numpy import to_numpy
from crabray.results.store.schema import EPISODE_KEY


def one_row_per(table: pa.Table, key: list[str], *, keep: Literal["first", "last"]) -> pa.Table:
    """The first (or last) row of each distinct ``key``, in the table's order.

    Args:
        table: Rows, possibly several per key.
        key: Columns that identify a row.
        keep: Which row of a key survives, by position in ``table``.
    """
    if table.num_rows == 0:
        return table
    positions = pa.array(range(table.num_rows), pa.int64())
    aggregate = "min" if keep == "first" else "max"
    chosen = (
        table.select(key)
        .append_column("__row", positions)
        .group_by(key, use_threads=False)
        .aggregate([("__row", aggregate)])
        .column(f"__row_{aggregate}")
    )
    return table.take(chosen.sort())


def sorted_codes(column: pa.ChunkedArray) -> np.ndarray:
    """Integer codes of ``column``'s values that sort like the values themselves.

    A dictionary column (one dictionary for all chunks, as ``read_part_files``
    makes them) is coded from its indices without touching the strings.
    """
    if pa.types.is_integer(column.type):
        values = to_numpy(column).astype(np.int64)
        low, high = int(values.min(initial=0)), int(values.max(initial=0))
        if high - low <= 4 * len(values):  # epochs: small numbers, no sort needed
            return values - low
        _, codes = np.unique(values, return_inverse=True)
        return codes.astype(np.int64)
    if pa.types.is_dictionary(column.type) and column.num_chunks:
        dictionary = column.chunk(0).dictionary
        indices = to_numpy(column)
    else:
        encoded = pc.dictionary_encode(column).combine_chunks()
        dictionary = encoded.dictionary
        indices = to_numpy(encoded.indices)
    order = to_numpy(pc.array_sort_indices(dictionary))
    rank = np.empty(len(order), np.int64)
    rank[order] = np.arange(len(order))
    ranks: np.ndarray = rank[indices]
    return ranks


def episode_codes(table: pa.Table) -> np.ndarray:
    """One int64 per row identifying its episode key, ordered like the key's columns.

    Per-column codes are combined as mixed-radix numbers; when the product of
    cardinalities could overflow, the partial key is re-densified first.
    """
    key = np.zeros(table.num_rows, np.int64)
    span = 1
    for name in EPISODE_KEY:
        codes = sorted_codes(table.column(name))
        size = int(codes.max()) + 1
        if span * size >= 2**62:
            _, key = np.unique(key, return_inverse=True)
            span = int(key.max()) + 1
        key = key * size + codes
        span *= size
    return key


def top_rank_tied(ranked: pa.Table) -> bool:
    """Whether some key's last two rows (sorted by key, attempt, finished_at) tie on all three."""
    same = None
    for name in ("__key", "attempt", "finished_at"):
        values = ranked.column(name).combine_chunks()
        equal = to_numpy(pc.equal(values[1:], values[:-1]))
        same = equal if same is None else same & equal
    if same is None or not len(same):
        return False
    keys = to_numpy(ranked.column("__key"))
    last_of_key = np.append(keys[1:] != keys[:-1], True)[1:]
    return bool((same & last_of_key).any())
