"""Leaderboards and breakdowns of an Arrow table: the one implementation, without pandas.

The deduplicated episode rows stay an Arrow table (``read_episode_table``:
dictionary-encoded strings), the group keys are coded from the dictionaries'
indices, and the statistics come from ``crabray.results.board._aggregate``. What
``crabray leaderboard`` prints (with or without ``--by``) is computed here; the
pandas functions of ``crabray.results.board.leaderboard`` convert a frame to a table,
call these, and convert back. See that module for how benchmark and
infrastructure errors count.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from crabray.core.errors import ResultsError
from crabray.core.result import Attribution, attribution_of
from crabray.results._numpy import to_arrow, to_numpy
from crabray.results.board._aggregate import (
    TRUSTED,
    UNKNOWN_TRUST,
    UNTRUSTED,
    Codes,
    combine,
    pass_columns,
    summary,
    trust_columns,
    verified_successes,
)
from crabray.results.board._columns import (
    BREAKDOWN_INPUT_COLUMNS,
    BREAKDOWN_STATS,
    DEFAULT_BY,
    INT_COLUMNS,
    LEADERBOARD_INPUT_COLUMNS,
    OPTIONAL_INPUT_COLUMNS,
    STAT_COLUMNS,
    TAG,
    TASK_CLUSTER,
    TASK_SAMPLE,
)
from crabray.results.board.stats import DEFAULT_CONFIDENCE


def missing_columns(
    names: Sequence[str], needed: Sequence[str], what: str, reader: str
) -> ResultsError | None:
    """The error of rows lacking some of ``needed`` (named, with how to read them), or None."""
    # ``attribution`` is then derived from termination_reason; a missing ``grader_trusted``
    # leaves every grade's trust unknown.
    missing = [name for name in dict.fromkeys(needed) if name not in names]
    missing = [name for name in missing if name not in OPTIONAL_INPUT_COLUMNS]
    if not missing:
        return None
    return ResultsError(
        f"cannot build {what}: episode rows lack column(s) {missing}; read them with "
        f"{reader}(out, columns=[*LEADERBOARD_INPUT_COLUMNS, 'tags']) or all columns"
    )


def _require(episodes: pa.Table, needed: Sequence[str], what: str) -> None:
    error = missing_columns(episodes.column_names, needed, what, "read_episode_table")
    if error is not None:
        raise error


def dictionary_indices(column: pa.ChunkedArray) -> tuple[pa.Array, np.ndarray]:
    """The column as one dictionary and each row's index into it (-1 for a null).

    A dictionary column's chunks share one dictionary (callers unify them first).
    """
    if not pa.types.is_dictionary(column.type):
        column = pa.chunked_array([pc.dictionary_encode(column.combine_chunks())])
    if column.num_chunks == 0:
        return pa.nulls(0, column.type.value_type), np.empty(0, np.int64)
    return column.chunk(0).dictionary, to_numpy(column, null=-1).astype(np.int64)


def codes(column: pa.ChunkedArray) -> Codes:
    """Integer codes of a column's values, a null being a code of its own."""
    dictionary, indices = dictionary_indices(column)
    size = len(dictionary) + 1
    return np.where(indices < 0, size - 1, indices), size


def attributions(episodes: pa.Table) -> list[Attribution]:
    """Each row's attribution: its ``attribution`` column, or, for rows made without it,
    what ``attribution_of`` says of its termination reason and error type."""
    if "attribution" in episodes.column_names:
        dictionary, indices = dictionary_indices(episodes.column("attribution"))
        if not (indices < 0).any():
            values = [Attribution(value) for value in dictionary.to_pylist()]
            return [values[index] for index in indices]
    reasons = episodes.column("termination_reason").to_pylist()
    types = (
        episodes.column("error_type").to_pylist()
        if "error_type" in episodes.column_names
        else [None] * len(reasons)
    )
    return [attribution_of(r, t) for r, t in zip(reasons, types, strict=True)]


def attributed(episodes: pa.Table, whom: Attribution) -> np.ndarray:
    """True for rows attributed to ``whom``."""
    if "attribution" in episodes.column_names:
        dictionary, indices = dictionary_indices(episodes.column("attribution"))
        if not (indices < 0).any():
            hits = np.array([value == whom.value for value in dictionary.to_pylist()] + [False])
            picked: np.ndarray = hits[indices]
            return picked
    return np.array([value is whom for value in attributions(episodes)], dtype=bool)


def graded(episodes: pa.Table) -> np.ndarray:
    """True for rows with a verdict on the agent: those attributed to it.

    A benchmark's or the infrastructure's fault is counted apart
    (``benchmark_errors``, ``infra_errors``), never in a denominator.
    """
    return attributed(episodes, Attribution.AGENT)


def floats(episodes: pa.Table, name: str) -> np.ndarray:
    """A numeric column as float64 per row (NaN for a null)."""
    return to_numpy(episodes.column(name), null=np.nan).astype(np.float64)


def grader_trust(episodes: pa.Table) -> np.ndarray:
    """Each row's grader trust: ``TRUSTED``, ``UNTRUSTED`` or ``UNKNOWN_TRUST`` (int8).

    A null ``grader_trusted`` (a file from before the column, an episode never
    graded) and rows made without the column are unknown: nobody vouched for
    them, so they are never counted as verified, but neither are they said to
    be untrusted.
    """
    if "grader_trusted" not in episodes.column_names:
        return np.full(episodes.num_rows, UNKNOWN_TRUST, np.int8)
    column = episodes.column("grader_trusted")
    if pa.types.is_null(column.type):  # a frame whose column is all None
        return np.full(episodes.num_rows, UNKNOWN_TRUST, np.int8)
    if not pa.types.is_boolean(column.type):
        column = column.cast(pa.bool_())
    values = to_numpy(column, null=UNKNOWN_TRUST).astype(np.int8)  # 1 true, 0 false, -1 null
    trust: np.ndarray = np.select(
        [values == UNKNOWN_TRUST, values == 1], [UNKNOWN_TRUST, TRUSTED], UNTRUSTED
    ).astype(np.int8)
    return trust


def counted_success(episodes: pa.Table, *, verified_only: bool = False) -> np.ndarray:
    """Each row's success as the board counts it (1.0 or 0.0).

    Every pass; with ``verified_only`` only the verified ones
    (``verified_successes``): an unverified pass counts as a failure, in the
    same denominator.
    """
    success = floats(episodes, "success")
    return verified_successes(success, grader_trust(episodes)) if verified_only else success


def labels(column: pa.ChunkedArray | pa.Array, rows: np.ndarray) -> pa.Array:
    """The values of ``rows`` of a key column, plain values rather than dictionary indices."""
    values = column.take(to_arrow(rows.astype(np.int64)))
    if pa.types.is_dictionary(values.type):
        values = values.cast(values.type.value_type)
    return values.combine_chunks() if isinstance(values, pa.ChunkedArray) else values


def _tasks(episodes: pa.Table, keys: Sequence[str]) -> list[Codes]:
    """Codes of each row's task, the clusters of its group's interval; none (independent
    episodes) when a group is one task: its epochs are then the draws its rate is about."""
    if "task_id" in keys:
        return []
    return [codes(episodes.column(name)) for name in TASK_CLUSTER]


def _stat_array(name: str, values: np.ndarray) -> pa.Array:
    return to_arrow(values.astype(np.int64) if name in INT_COLUMNS else values)


def leaderboard_table(
    episodes: pa.Table,
    by: Sequence[str] = DEFAULT_BY,
    *,
    confidence: float = DEFAULT_CONFIDENCE,
    max_k: int | None = None,
    verified_only: bool = False,
) -> pa.Table:
    """``leaderboard`` of an Arrow table of episode rows, as an Arrow table.

    Args:
        episodes: Deduplicated episode rows (``read_episode_table``) with at
            least ``LEADERBOARD_INPUT_COLUMNS`` and the ``by`` columns; string
            columns may be dictionary-encoded.
        by: Columns that make a row.
        confidence: Coverage of the success-rate interval.
        max_k: Largest k of the pass@k / pass^k columns; every k the data allows when None.
        verified_only: Count only verified passes as successes (``counted_success``);
            ``unverified_passes`` and ``unknown_trust_passes`` still count every pass.

    Returns:
        What ``leaderboard`` returns for the same rows (columns, order, values),
        the ``by`` columns as plain values, counts as int64, the rest float64.

    Raises:
        ResultsError: A needed column is missing.
    """
    keys = list(by)
    _require(episodes, [*LEADERBOARD_INPUT_COLUMNS, *keys], "a leaderboard")
    if episodes.num_rows == 0:
        return _empty(episodes, keys, STAT_COLUMNS)
    episodes = episodes.unify_dictionaries()
    ids, first = combine([codes(episodes.column(name)) for name in keys], episodes.num_rows)
    groups = len(first)
    verdict = graded(episodes)
    passed, trust = floats(episodes, "success"), grader_trust(episodes)
    counted = verified_successes(passed, trust) if verified_only else passed
    cache: dict[str, np.ndarray] = {"success": counted}

    def values(name: str) -> np.ndarray:
        if name not in cache:
            cache[name] = floats(episodes, name)
        return cache[name]

    stats = summary(
        ids,
        groups,
        verdict,
        values,
        confidence,
        full=True,
        tasks=_tasks(episodes, keys),
        benchmark=attributed(episodes, Attribution.BENCHMARK),
    )
    stats.update(trust_columns(ids, groups, verdict, passed, trust))
    passes = pass_columns(
        ids,
        groups,
        verdict,
        [codes(episodes.column(name)) for name in TASK_SAMPLE],
        values("success"),
        max_k,
    )
    columns = {name: labels(episodes.column(name), first) for name in keys}
    columns.update({name: _stat_array(name, stats[name]) for name in STAT_COLUMNS})
    columns.update({name: to_arrow(column) for name, column in (passes or {}).items()})
    table = pa.Table.from_arrays(list(columns.values()), names=list(columns))
    return table.sort_by(
        [
            ("success_rate", "descending"),
            ("mean_score", "descending"),
            *((name, "ascending") for name in keys),
        ]
    )


def _explode_tags(episodes: pa.Table) -> tuple[np.ndarray, pa.Array]:
    """Per (episode, tag) in row then tag order: the episode's row and the tag.

    An episode without tags (an empty or null list) keeps one row, with a null tag.
    """
    tags = episodes.column("tags").combine_chunks()
    count = to_numpy(pc.list_value_length(tags), null=0).astype(np.int64)
    kept = np.maximum(count, 1)
    rows = np.repeat(np.arange(len(count)), kept)
    # Position of each tag among all tags, or -1 for the null tag of an untagged episode.
    position = np.full(len(rows), -1, np.int64)
    flat_start = np.cumsum(count) - count
    within = np.arange(len(rows)) - np.repeat(np.cumsum(kept) - kept, kept)
    has = within < count[rows]
    position[has] = flat_start[rows[has]] + within[has]
    flat = pc.list_flatten(tags)  # null lists hold no values; empty ones none either
    index = to_arrow(position, valid=position >= 0)  # a null index takes a null tag
    return rows, flat.take(index)


def breakdown_table(
    episodes: pa.Table,
    column: str,
    by: Sequence[str] = DEFAULT_BY,
    *,
    confidence: float = DEFAULT_CONFIDENCE,
    verified_only: bool = False,
) -> pa.Table:
    """``breakdown`` of an Arrow table of episode rows, as an Arrow table.

    Args:
        episodes: Deduplicated episode rows (``read_episode_table``) with the
            breakdown's columns, ``column`` (``tags`` for a breakdown by tag)
            and the ``by`` columns.
        column: An episode column, or ``"tag"`` (also ``"tags"``).
        by: The groups to break down.
        confidence: Coverage of the success-rate interval.
        verified_only: Count only verified passes as successes (``counted_success``).

    Returns:
        What ``breakdown`` returns for the same rows (columns, order, values).

    Raises:
        ResultsError: A needed column is missing, or ``column`` is one of ``by``.
    """
    keys = list(by)
    tagged = column in (TAG, "tags")
    source, group = ("tags", TAG) if tagged else (column, column)
    _require(episodes, [*BREAKDOWN_INPUT_COLUMNS, source, *keys], f"a breakdown by {column!r}")
    if group in keys:
        raise ResultsError(f"cannot break down by {column!r}: it is already one of by={keys}")
    if episodes.num_rows == 0:
        return _empty(episodes, [*keys, group], BREAKDOWN_STATS, {TAG: pa.string()})
    episodes = episodes.unify_dictionaries()
    key_codes = [codes(episodes.column(name)) for name in keys]
    owner, _ = combine(key_codes, episodes.num_rows)
    totals = np.bincount(owner).astype(np.float64)
    rows = np.arange(episodes.num_rows)
    values = episodes.column(source)
    if tagged:
        rows, tags = _explode_tags(episodes)
        values = pa.chunked_array([tags])
    row_codes = [(key[rows], size) for key, size in key_codes]
    ids, first = combine([*row_codes, codes(values)], len(rows))
    cache = {"success": counted_success(episodes, verified_only=verified_only)[rows]}

    def numbers(name: str) -> np.ndarray:
        if name not in cache:
            cache[name] = floats(episodes, name)[rows]
        return cache[name]

    tasks = [(values[rows], size) for values, size in _tasks(episodes, [*keys, group])]
    stats = summary(
        ids,
        len(first),
        graded(episodes)[rows],
        numbers,
        confidence,
        full=False,
        tasks=tasks,
        benchmark=attributed(episodes, Attribution.BENCHMARK)[rows],
    )
    every = stats["episodes"] + stats["benchmark_errors"] + stats["infra_errors"]
    stats["share"] = every / totals[owner[rows[first]]]
    columns = {name: labels(episodes.column(name), rows[first]) for name in keys}
    columns[group] = labels(values, first)
    columns.update({name: _stat_array(name, stats[name]) for name in BREAKDOWN_STATS})
    table = pa.Table.from_arrays(list(columns.values()), names=list(columns))
    return table.sort_by([(name, "ascending") for name in [*keys, group]])


def _empty(
    episodes: pa.Table,
    keys: list[str],
    stats: Sequence[str],
    types: dict[str, pa.DataType] | None = None,
) -> pa.Table:
    def key_type(name: str) -> pa.DataType:
        if types and name in types:
            return types[name]
        kind = episodes.schema.field(name).type
        return kind.value_type if pa.types.is_dictionary(kind) else kind

    fields = [pa.field(name, key_type(name)) for name in keys]
    fields += [
        pa.field(name, pa.int64() if name in INT_COLUMNS else pa.float64()) for name in stats
    ]
    return pa.schema(fields).empty_table()
