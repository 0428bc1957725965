"""Reading a results dataset: deduplicated episodes, their steps, and what resume needs.

The files on disk are append-only and may hold several rows for one episode:
infrastructure retries (``attempt`` 0, 1, ...) and, after an interrupted
compaction, exact copies. Every reader here resolves that the same way: one
row per episode key ``(run_id, agent, task_id, epoch)``, the highest attempt,
ties broken by the latest ``finished_at``. Steps are returned only for the
episode rows that were kept.
"""

from __future__ import annotations

import logging
import os
import posixpath
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from crabray.core.errors import ResultsError
from crabray.core.result import Attribution, TerminationReason, attribution_of
from crabray.results._numpy import to_arrow, to_numpy
from crabray.results.store._keys import episode_codes, one_row_per, top_rank_tied
from crabray.results.store._layout import PART_SUFFIX, Table, check_run_id
from crabray.results.store._parts import CATEGORICAL_COLUMNS, DICTIONARY, read_file_by_file
from crabray.results.store.root import ResultsRoot
from crabray.results.store.schema import (
    EPISODE_KEY,
    EPISODES_SCHEMA,
    PARTITION_COLUMN,
    STEP_KEY,
    STEPS_SCHEMA,
)

if TYPE_CHECKING:  # pandas is imported by whoever makes a frame, not by importing this
    import pandas as pd
    import pyarrow.dataset as ds  # imported where used: it imports pandas (pyarrow 26)

logger = logging.getLogger(__name__)

EpisodeKey = tuple[str, str, int]
"""``(agent, task_id, epoch)``: an episode within one run."""

INFRA_REASONS = frozenset(reason.value for reason in TerminationReason if reason.is_infra)
UNFINISHED_REASONS = frozenset(reason.value for reason in TerminationReason if not reason.is_final)
"""Reasons of rows that are no verdict on the agent and run again on resume (infra, cancelled)."""
"""Termination reasons that are the infrastructure's failure (the episode is retried)."""

_RANK = ("attempt", "finished_at", "episode_id")
_MAX_LIST_RETRIES = 3


class _PartVanishedError(ResultsError):
    """A listed part file disappeared before it was read (a concurrent compaction)."""

    def __init__(self, path: str) -> None:
        self.path = path
        super().__init__(
            f"{path} vanished while being read; is a compaction of this run running? "
            "Read again when it is done"
        )


def _run_dirs(location: ResultsRoot, table: Table, run_id: str | None) -> list[str]:
    root = location.join(table)
    if run_id is not None:
        return [location.join(table, f"run_id={run_id}")]
    return [
        path
        for path in location.subdirectories(root)
        if posixpath.basename(path).startswith("run_id=")
    ]


def _diagnose(
    files: list[str], schema: pa.Schema, exc: BaseException, filesystem: pafs.FileSystem
) -> Exception:
    """Find which file made a scan fail, so the error can name it."""
    import pyarrow.dataset as ds

    for path in files:
        if filesystem.get_file_info(path).type == pafs.FileType.NotFound:
            return _PartVanishedError(path)
        try:
            ds.dataset(path, schema=schema, format="parquet", filesystem=filesystem).to_table()
        except (pa.ArrowException, OSError) as probe:
            consequence = (
                "its episodes are then run again by a resumed run"
                if schema is EPISODES_SCHEMA
                else "the steps it held are then missing from the report"
            )
            return ResultsError(
                f"{path}: unreadable results part file ({type(probe).__name__}: {probe}). "
                f"Move it out of the dataset directory to read the rest; {consequence}"
            )
    parent = posixpath.dirname(posixpath.dirname(files[0]))
    return ResultsError(f"could not read results files under {parent}: {exc}")


def read_part_files(
    files: Sequence[str | Path],
    schema: pa.Schema,
    *,
    columns: list[str] | None = None,
    row_filter: ds.Expression | None = None,
    filesystem: pafs.FileSystem | None = None,
    dictionary: bool = False,
) -> pa.Table:
    """Read Parquet part files as one table of ``schema`` (missing columns come back null).

    Args:
        files: The part files to read, all in partitions of one table.
        schema: The table's schema; files are cast to it.
        columns: Columns to read; all of ``schema`` when None.
        row_filter: A pyarrow dataset filter pushed down to the scan.
        filesystem: The file system holding ``files``; the local one when None.
        dictionary: Read ``CATEGORICAL_COLUMNS`` as dictionary arrays, one dictionary
            per column across all files (several times faster than strings to read and
            group by; ``decode_dictionaries`` turns them back).

    Raises:
        ResultsError: A file is not readable Parquet or does not fit ``schema``; the
            message names the file.
    """
    columns = list(schema.names) if columns is None else columns
    if not files:
        return pa.Table.from_batches([], schema).select(columns)  # empty_table() imports pandas
    if filesystem is None:
        filesystem = pafs.LocalFileSystem()
        paths = [os.path.abspath(path) for path in files]
    else:
        paths = [str(path) for path in files]
    if dictionary and row_filter is None:
        table = read_file_by_file(paths, schema, columns, filesystem)
        if table is not None:
            return table
    import pyarrow.dataset as ds

    file_format: ds.FileFormat | str = "parquet"
    partitioning = _partitioning()
    if dictionary:
        encoded = [name for name in columns if name in CATEGORICAL_COLUMNS]
        schema = pa.schema(
            [f.with_type(DICTIONARY) if f.name in encoded else f for f in schema],
            metadata=schema.metadata,
        )
        file_format = ds.ParquetFileFormat(
            read_options=ds.ParquetReadOptions(dictionary_columns=encoded)
        )
        partitioning = _run_partitioning(paths)
    dataset = ds.dataset(
        paths,
        schema=schema,
        format=file_format,
        filesystem=filesystem,
        partitioning=partitioning,
        partition_base_dir=posixpath.dirname(posixpath.dirname(paths[0])),
    )
    try:
        table = dataset.to_table(columns=columns, filter=row_filter)
        return table.unify_dictionaries() if dictionary else table
    except (pa.ArrowException, OSError) as exc:
        error = _diagnose(paths, schema, exc, filesystem)
        raise error from exc


def _partitioning() -> ds.Partitioning:
    import pyarrow.dataset as ds

    return ds.partitioning(pa.schema([(PARTITION_COLUMN, pa.string())]), flavor="hive")


def use_system_allocator() -> None:
    """Make the system allocator this process's Arrow memory pool (for what it allocates next).

    For a process that reads a large dataset and exits (``crabray leaderboard``):
    pyarrow's default pool (mimalloc here) took about three times the CPU on
    these reads. A process-wide choice, made once by the application, not by a
    reader around each read (``pq.ParquetFile`` takes no pool argument).
    """
    pa.set_memory_pool(pa.system_memory_pool())


def _run_partitioning(paths: list[str]) -> ds.Partitioning:
    """Hive partitioning with ``run_id`` as a dictionary of the runs ``paths`` are in."""
    import pyarrow.dataset as ds

    runs = sorted(
        {posixpath.basename(posixpath.dirname(path)).removeprefix("run_id=") for path in paths}
    )
    return ds.partitioning(
        pa.schema([(PARTITION_COLUMN, DICTIONARY)]),
        flavor="hive",
        dictionaries={PARTITION_COLUMN: pa.array(runs, pa.string())},
    )


def decode_dictionaries(table: pa.Table) -> pa.Table:
    """``table`` with its dictionary columns as plain strings again (what the schema says)."""
    for index, column in enumerate(table.columns):
        if pa.types.is_dictionary(column.type):
            table = table.set_column(
                index, table.field(index).with_type(pa.string()), column.cast(pa.string())
            )
    return table


def iter_part_batches(files: Sequence[Path], schema: pa.Schema) -> Iterator[pa.RecordBatch]:
    """The rows of local part files as batches of ``schema``, file by file, in order.

    What ``read_part_files`` reads, holding one batch at a time rather than every
    row: a run's compaction streams through it, so the driver's memory does not
    grow with the run.

    Raises:
        ResultsError: A file is not readable Parquet or does not fit ``schema``; the
            message names the file.
    """
    filesystem = pafs.LocalFileSystem()
    for path in (os.path.abspath(path) for path in files):
        as_written = _as_written(path, schema)
        batches = as_written if as_written is not None else _scanned(path, schema, filesystem)
        while True:
            try:
                batch = next(batches)
            except StopIteration:
                break
            except (pa.ArrowException, OSError) as exc:
                raise _diagnose([path], schema, exc, filesystem) from exc
            yield batch


def _as_written(path: str, schema: pa.Schema) -> Iterator[pa.RecordBatch] | None:
    """The batches of a part file holding exactly ``schema``'s columns, or None to scan it.

    What the sink writes, read with ``pyarrow.parquet``: a run's compaction
    then does not import ``pyarrow.dataset``, nor pandas with it. An older file
    that also holds the partition column (``run_id``) is read without it when
    ``schema`` lacks it (the file schema a compaction writes).
    """
    try:
        part = pq.ParquetFile(path)
    except (pa.ArrowException, OSError):
        return None
    written = [
        (f.name, f.type)
        for f in part.schema_arrow
        if f.name != PARTITION_COLUMN or PARTITION_COLUMN in schema.names
    ]
    if written != [(f.name, f.type) for f in schema]:
        return None
    return (
        pa.RecordBatch.from_arrays(batch.columns, schema=schema)
        for batch in part.iter_batches(columns=list(schema.names), use_threads=False)
    )


def _scanned(path: str, schema: pa.Schema, filesystem: pafs.FileSystem) -> Iterator[pa.RecordBatch]:
    """A part file's batches cast to ``schema`` by a scan (its partition fills ``run_id``
    when ``schema`` has it)."""
    import pyarrow.dataset as ds

    partitioned = PARTITION_COLUMN in schema.names
    dataset = ds.dataset(
        [path],
        schema=schema,
        format="parquet",
        filesystem=filesystem,
        partitioning=_partitioning() if partitioned else None,
        partition_base_dir=posixpath.dirname(posixpath.dirname(path)) if partitioned else None,
    )
    batches = dataset.to_batches(columns=list(schema.names), use_threads=False)
    if "attribution" not in schema.names:
        return iter(batches)
    # A file written before the column existed: its rows get it from the one rule, as
    # every reader gives it, so the compacted file holds it (the column is not nullable).
    return (
        _fill_attribution(pa.Table.from_batches([batch])).combine_chunks().to_batches()[0]
        for batch in batches
        if batch.num_rows
    )


def _read(
    out_dir: str | Path,
    table: Table,
    run_id: str | None,
    columns: list[str],
    row_filter: ds.Expression | None = None,
    dictionary: bool = False,
) -> pa.Table:
    """Read ``columns`` of every committed part of ``table``, re-listing if a part vanishes."""
    schema = EPISODES_SCHEMA if table == "episodes" else STEPS_SCHEMA
    if run_id is not None:
        check_run_id(run_id)
    location = ResultsRoot.parse(out_dir)
    for _ in range(_MAX_LIST_RETRIES):
        files = [
            path
            for directory in _run_dirs(location, table, run_id)
            for path in location.files(directory, PART_SUFFIX)
        ]
        try:
            return read_part_files(
                files,
                schema,
                columns=columns,
                row_filter=row_filter,
                filesystem=location.filesystem,
                dictionary=dictionary,
            )
        except _PartVanishedError as vanished:
            logger.debug("part file %s vanished while reading; listing again", vanished.path)
    raise ResultsError(
        f"the {table} files under {out_dir} kept changing while being read "
        f"({_MAX_LIST_RETRIES} tries); is a compaction running? Read again when it is done"
    )


def _check_columns(columns: list[str] | None, schema: pa.Schema, table: Table) -> list[str]:
    if columns is None:
        return list(schema.names)
    unknown = [name for name in columns if name not in schema.names]
    if unknown:
        raise ResultsError(
            f"unknown {table} column(s) {unknown}; known columns: {', '.join(schema.names)}"
        )
    return list(columns)


def _to_frame(table: pa.Table) -> pd.DataFrame:
    """A pandas frame of ``table``, with list columns as Python lists.

    ``tags`` is converted by Arrow straight to lists: converting pandas' numpy
    arrays afterwards costs twice as long at a million rows.
    """
    if "tags" not in table.column_names:
        whole: pd.DataFrame = table.to_pandas()
        return whole
    frame: pd.DataFrame = table.drop_columns(["tags"]).to_pandas()
    frame.insert(table.column_names.index("tags"), "tags", table.column("tags").to_pylist())
    return frame


def _kept_episodes(
    out_dir: str | Path,
    run_id: str | None,
    columns: list[str],
    *,
    dictionary: bool = False,
    ordered: bool = True,
) -> pa.Table:
    """Episode rows after deduplication, with ``columns`` (in that order).

    Fast path for large datasets: episode keys become int64 codes (sorted like
    the key columns), rows whose key is unique are kept as they are, and only
    rows that share a key are ranked by attempt, finished_at and episode_id.
    ``episode_id``, a long string per row, is read only when it is asked for or
    two rows of a key tie on attempt and finished_at (copies left by an
    interrupted compaction); ``dictionary`` is ``read_part_files``'. Rows come
    sorted by episode key when ``ordered``, else in the files' order (a filter
    rather than a gather: a third of the time at a million rows).
    """
    rank = [name for name in _RANK if name != "episode_id" or name in columns]
    evidence = _ATTRIBUTION_EVIDENCE if "attribution" in columns else ()
    needed = list(dict.fromkeys([*EPISODE_KEY, *rank, *columns, *evidence]))
    table = _read(out_dir, "episodes", run_id, needed, dictionary=dictionary)
    if evidence:
        table = _fill_attribution(table)
    if table.num_rows == 0:
        return table.select(columns)
    key = episode_codes(table)
    if int(key.max()) > 4 * len(key):  # sparse combinations: count over dense codes
        _, key = np.unique(key, return_inverse=True)
    repeated = np.bincount(key)[key] > 1
    keep = np.flatnonzero(~repeated)
    if repeated.any():
        rows = np.flatnonzero(repeated)
        ranked = (
            table.select(rank)
            .take(to_arrow(rows))
            .append_column("__key", to_arrow(key[rows]))
            .append_column("__row", to_arrow(rows))
            .sort_by([("__key", "ascending"), *((name, "ascending") for name in rank)])
        )
        if "episode_id" not in rank and top_rank_tied(ranked):
            with_ids = _kept_episodes(
                out_dir, run_id, [*columns, "episode_id"], dictionary=dictionary, ordered=ordered
            )
            return with_ids.drop_columns(["episode_id"])
        # Sorted by key then rank, the last row of each key is the one to keep.
        keys = to_numpy(ranked.column("__key"))
        last = np.append(keys[1:] != keys[:-1], True)
        keep = np.concatenate([keep, to_numpy(ranked.column("__row"))[last]])
    table = table.select(columns)  # the key and rank columns are not copied below
    if not ordered:
        mask = np.zeros(table.num_rows, bool)
        mask[keep] = True
        return table.filter(to_arrow(mask))
    keep = keep[np.argsort(key[keep], kind="stable")]
    return table.take(to_arrow(keep))


_ATTRIBUTION_EVIDENCE = ("termination_reason", "error_type")


def _fill_attribution(table: pa.Table) -> pa.Table:
    """``table`` with ``attribution`` set on rows written before the column existed.

    Such rows read it as null; ``attribution_of`` gives it from their termination
    reason and error type, as it gave it to every newer row when it was written.
    """
    index = table.column_names.index("attribution")
    column = table.column(index)
    if column.null_count == 0:
        return table
    given, reasons, types = (
        table.column(name).to_pylist() for name in ("attribution", *_ATTRIBUTION_EVIDENCE)
    )
    known: dict[tuple[str, str | None], str] = {}
    filled = []
    for value, reason, error_type in zip(given, reasons, types, strict=True):
        if value is None:
            pair = (reason, error_type)
            if pair not in known:
                known[pair] = attribution_of(reason, error_type).value
            value = known[pair]
        filled.append(value)
    array = pa.array(filled, pa.string())
    if pa.types.is_dictionary(column.type):
        array = array.dictionary_encode().cast(column.type)
    return table.set_column(index, table.field(index).with_type(array.type), array)


def read_episodes(
    out_dir: str | Path,
    run_id: str | None = None,
    columns: list[str] | None = None,
    *,
    categorical: bool = False,
) -> pd.DataFrame:
    """One row per episode: the latest attempt of each (run, agent, task, epoch).

    Args:
        out_dir: The output directory holding ``episodes/``.
        run_id: Read only this run; every run when None.
        columns: Columns to return (only these are read, plus the key); all when None.
        categorical: The form ``leaderboard`` reads fastest (several times faster to
            read and to group at a million rows): ``CATEGORICAL_COLUMNS`` as pandas
            categoricals rather than strings, and rows in the files' order.

    Returns:
        A frame in the ``EPISODES_SCHEMA`` column order (or ``columns`` order), sorted
        by episode key (unless ``categorical``); empty, with those columns, when nothing
        has been written.

    Raises:
        ResultsError: An unknown column, a bad run id, or an unreadable part file
            (named in the message).

    Example:
        >>> read_episodes("results", columns=["task_id", "success"])  # doctest: +SKIP
    """
    wanted = _check_columns(columns, EPISODES_SCHEMA, "episodes")
    kept = _kept_episodes(out_dir, run_id, wanted, dictionary=True, ordered=not categorical)
    return _to_frame(kept if categorical else decode_dictionaries(kept))


def read_episode_table(
    out_dir: str | Path,
    run_id: str | None = None,
    columns: list[str] | None = None,
    *,
    ordered: bool = False,
) -> pa.Table:
    """``read_episodes(..., categorical=True)`` as an Arrow table: no pandas frame is made.

    What ``leaderboard_table`` (``crabray leaderboard``) reads: one row per
    episode, ``CATEGORICAL_COLUMNS`` as Arrow dictionaries, rows in the files'
    order (sorted by episode key, as ``read_episodes`` sorts them, when
    ``ordered``); empty, with those columns, when nothing has been written.

    Raises:
        ResultsError: An unknown column, a bad run id, or an unreadable part file
            (named in the message).
    """
    wanted = _check_columns(columns, EPISODES_SCHEMA, "episodes")
    return _kept_episodes(out_dir, run_id, wanted, dictionary=True, ordered=ordered)


def read_steps(
    out_dir: str | Path, run_id: str | None = None, columns: list[str] | None = None
) -> pd.DataFrame:
    """The steps of the kept episode rows, ordered by episode, step and call.

    Steps of superseded attempts and orphan steps (written just before a crash,
    whose episode row never was) are left out.

    Args:
        out_dir: The output directory holding ``steps/`` and ``episodes/``.
        run_id: Read only this run; every run when None.
        columns: Columns to return; all when None.

    Raises:
        ResultsError: An unknown column, a bad run id, or an unreadable part file.
    """
    wanted = _check_columns(columns, STEPS_SCHEMA, "steps")
    kept = _kept_episodes(out_dir, run_id, ["episode_id"], dictionary=True).column("episode_id")
    needed = list(dict.fromkeys([*STEP_KEY, *wanted]))
    import pyarrow.dataset as ds

    steps = _read(out_dir, "steps", run_id, needed, ds.field("episode_id").isin(kept))
    if steps.num_rows:
        steps = steps.sort_by([(name, "ascending") for name in STEP_KEY])
        steps = one_row_per(steps, list(STEP_KEY), keep="first")
    return _to_frame(steps.select(wanted))


def finished_keys(out_dir: str | Path, run_id: str) -> set[EpisodeKey]:
    """The ``(agent, task_id, epoch)`` episodes of a run that need no more attempts.

    An episode is finished when its kept row is not attributed to the
    infrastructure (an ``env_error`` after its retries, a model API that could
    not be reached, an episode the run's interrupt stopped: ``cancelled``): a
    resumed run skips exactly these and tries the others again.

    Raises:
        ResultsError: A bad run id or an unreadable part file.
    """
    rows = _key_rows(out_dir, run_id, "attribution")
    infrastructure = Attribution.INFRASTRUCTURE.value
    return {(agent, task, epoch) for agent, task, epoch, whom in rows if whom != infrastructure}


def attempts_so_far(out_dir: str | Path, run_id: str) -> dict[EpisodeKey, int]:
    """The highest attempt number on disk per ``(agent, task_id, epoch)`` of a run.

    A resumed run gives a retried episode ``attempt = attempts_so_far[key] + 1``
    so that its row supersedes the failed one.

    Raises:
        ResultsError: A bad run id or an unreadable part file.
    """
    return {
        (agent, task, epoch): attempt
        for agent, task, epoch, attempt in _key_rows(out_dir, run_id, "attempt")
    }


def run_spending(out_dir: str | Path, run_id: str) -> tuple[float, int]:
    """What a run's episodes have cost so far: USD and model tokens (prompt and completion).

    Every attempt counts once (``read_every_attempt``): an attempt that failed, or
    that an interrupt stopped, spent its tokens all the same.

    Raises:
        ResultsError: A bad run id or an unreadable part file.
    """
    table = read_every_attempt(out_dir, run_id, ["cost_usd", "tokens_in", "tokens_out"])
    cost = sum(usd or 0.0 for usd in table.column("cost_usd").to_pylist())
    tokens = sum(
        (tokens_in or 0) + (tokens_out or 0)
        for tokens_in, tokens_out in zip(
            table.column("tokens_in").to_pylist(),
            table.column("tokens_out").to_pylist(),
            strict=True,
        )
    )
    return cost, tokens


def _key_rows(out_dir: str | Path, run_id: str, column: str) -> list[tuple[Any, ...]]:
    """``(agent, task_id, epoch, column)`` of a run's kept episode rows, as Python values.

    Read as Arrow, not as a pandas frame: a run resumed (or just made, with
    nothing on disk) then does not import pandas for this check.
    """
    table = read_episode_table(out_dir, run_id, ["agent", "task_id", "epoch", column])
    return list(zip(*(table.column(name).to_pylist() for name in table.column_names), strict=True))


def read_every_attempt(out_dir: str | Path, run_id: str, columns: list[str]) -> pa.Table:
    """``columns`` of every attempt of a run's episodes (not only each episode's kept row),
    once per ``episode_id``: what the run spent and met, failed attempts included.

    Raises:
        ResultsError: An unknown column, a bad run id or an unreadable part file.
    """
    wanted = _check_columns(
        list(dict.fromkeys(["episode_id", *columns])), EPISODES_SCHEMA, "episodes"
    )
    table = _read(out_dir, "episodes", run_id, wanted)
    ids = table.column("episode_id").to_pylist()
    first = {episode_id: index for index, episode_id in reversed(list(enumerate(ids)))}
    if len(first) < len(ids):  # copies left by an interrupted compaction
        table = table.take(sorted(first.values()))
    return table.select(columns)
