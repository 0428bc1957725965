"""Appends finished episodes to a run's Parquet dataset, crash-safely.

Each ``write`` commits one steps file and then one episodes file. The episodes
file is the commit marker: an episode row on disk implies its steps are on
disk, so a crash between the two leaves only orphan steps, which readers drop
(they keep steps of kept episode rows only) and the resumed run redoes.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, BinaryIO

import pyarrow as pa
import pyarrow.parquet as pq

from crabray.core.errors import ResultsError
from crabray.core.redact import Redactor
from crabray.core.result import EpisodeRecord
from crabray.results.store._layout import (
    PART_SUFFIX,
    Table,
    atomic_write,
    check_run_id,
    new_part_stem,
    part_files,
    partition_dir,
)
from crabray.results.store.dataset import iter_part_batches
from crabray.results.store.root import ResultsRoot
from crabray.results.store.schema import (
    EPISODES_SCHEMA,
    PARTITION_COLUMN,
    STEP_KEY,
    STEPS_SCHEMA,
    episodes_table,
    file_schema,
    steps_table,
)

logger = logging.getLogger(__name__)

_COMPRESSION = "zstd"
"""The codec of a compacted file, kept for good."""
_PART_COMPRESSION = "snappy"
"""The codec of a part file, written twice a second during a run and merged at its end:
zstd took twice snappy's CPU for a flush's two small files (2.1 against 1.1 ms for 25
episodes, round 7), for 3% fewer bytes."""
_ROW_GROUP_ROWS = 16 * 1024
"""Rows buffered before the merged file of a compaction gets a row group."""
_GATHER_BATCHES = 256


def _write_parquet(path: Path, table: pa.Table) -> None:
    """Commit ``table`` as the Parquet part file ``path`` atomically, without its run id.

    The run is the partition folder's name (``PARTITION_COLUMN``), as hive-partitioned
    readers expect; the column in the file too would make pandas refuse the folder.
    """
    table = table.drop_columns([PARTITION_COLUMN])

    def write(handle: BinaryIO) -> None:
        pq.write_table(table, handle, compression=_PART_COMPRESSION)

    atomic_write(path, write)


class ResultSink:
    """The writer of one run's results under ``out_dir``.

    Safe against being killed at any moment: every file appears whole or not at
    all, and readers deduplicate, so the dataset stays readable. One sink per
    run at a time: two processes may write the same run, but ``compact`` must
    not run while another process writes it.

    Args:
        out_dir: The output directory (``results/`` by default in the CLI): a local
            path or a ``file://`` URL; other fsspec URLs are readable, not writable.
        run_id: The run the rows belong to; every record written must carry it.

    Raises:
        ResultsError: ``run_id`` is not usable as a directory name, or ``out_dir``
            is a URL of a remote store (commits need an atomic local rename).

    Example:
        >>> sink = ResultSink("results", "20261123-075300-3fa2c1")  # doctest: +SKIP
        >>> sink.write([record])  # doctest: +SKIP
    """

    def __init__(self, out_dir: str | Path, run_id: str, redactor: Redactor | None = None) -> None:
        self.out_dir = ResultsRoot.parse(out_dir).local()
        self.run_id = check_run_id(run_id)
        self.redactor = redactor or Redactor()
        """Known secrets, removed from every string of a record before it is written."""

    def _dir(self, table: Table) -> Path:
        return partition_dir(self.out_dir, table, self.run_id)

    def _check(self, records: list[EpisodeRecord]) -> None:
        """Refuse rows that would land in another run's partition or lose their episode."""
        for record in records:
            result = record.result
            if result.run_id != self.run_id:
                raise ResultsError(
                    f"episode {result.episode_id} ({result.agent}/{result.task_id}) belongs to "
                    f"run {result.run_id!r}, but this sink writes run {self.run_id!r}"
                )
            for step in record.steps:
                if step.episode_id != result.episode_id or step.run_id != self.run_id:
                    raise ResultsError(
                        f"step {step.step} of episode {result.episode_id} carries episode_id "
                        f"{step.episode_id!r} and run_id {step.run_id!r}; a step must carry its "
                        "episode's ids or it is dropped on read"
                    )

    def write(self, records: list[EpisodeRecord]) -> None:
        """Commit a batch of finished episodes: their steps first, then their rows.

        An empty batch writes nothing; a batch without steps writes no steps file.

        Args:
            records: Finished episodes of this run, with their steps; known secrets
                in their text are replaced by ``[redacted]`` on disk.

        Raises:
            ResultsError: A record belongs to another run, a step does not carry
                its episode's ids, or a file could not be written.
        """
        if not records:
            return
        self._check(records)
        # Text only: the artifacts (screenshots) are bytes and are written as they are.
        records = (
            [
                record.model_copy(
                    update={
                        "result": self.redactor.model(record.result),
                        "steps": [self.redactor.model(step) for step in record.steps],
                    }
                )
                for record in records
            ]
            if self.redactor
            else records
        )
        for record in records:
            self._write_artifacts(record.artifacts)
        stem = new_part_stem()
        steps = [step for record in records for step in record.steps]
        if steps:
            _write_parquet(self._dir("steps") / f"{stem}{PART_SUFFIX}", steps_table(steps))
        episodes = episodes_table([record.result for record in records])
        _write_parquet(self._dir("episodes") / f"{stem}{PART_SUFFIX}", episodes)
        logger.debug("run %s: wrote %d episodes, %d steps", self.run_id, len(records), len(steps))

    def _write_artifacts(self, artifacts: dict[str, bytes]) -> None:
        """Write an episode's files under the output directory, each atomically.

        Raises:
            ResultsError: A path is absolute or climbs out of the output directory.
        """
        root = self.out_dir.resolve()
        for relative, data in artifacts.items():
            target = (root / relative).resolve()
            if Path(relative).is_absolute() or not target.is_relative_to(root):
                raise ResultsError(f"artifact path {relative!r} leaves the output directory")
            target.parent.mkdir(parents=True, exist_ok=True)

            def write(handle: BinaryIO, data: bytes = data) -> None:
                handle.write(data)

            atomic_write(target, write)

    def compact(self) -> None:
        """Merge the run's part files into one file per table.

        Steps are compacted before episodes. The merged file is committed
        before the parts it replaces are deleted, so a crash in between only
        leaves duplicate rows, which readers (and the next compaction) drop.
        Rows are kept otherwise unchanged, superseded attempts included; the merged
        file holds no run id column (older parts that held one lose it: the run is
        the partition folder's name).

        Raises:
            ResultsError: A part file is unreadable (named in the message), or the
                merged file could not be written.
        """
        self._compact("steps", file_schema(STEPS_SCHEMA), list(STEP_KEY))
        self._compact("episodes", file_schema(EPISODES_SCHEMA), ["episode_id"])

    def _compact(self, table: Table, schema: pa.Schema, identity: list[str]) -> None:
        """Stream the partition's parts into one file, the first row of each identity kept.

        Only the identity keys seen so far are held, never the rows: the
        driver's memory does not grow with the run's length.
        """
        directory = self._dir(table)
        parts = part_files(directory)
        if len(parts) <= 1:
            return
        # Repeats are left by a compaction killed between committing and deleting.
        rows = _first_of_each(iter_part_batches(parts, schema), identity)
        kept = 0

        def write(handle: BinaryIO) -> None:
            nonlocal kept
            with pq.ParquetWriter(handle, schema, compression=_COMPRESSION) as writer:
                for group in _row_groups(rows, schema):
                    writer.write_table(group)
                    kept += group.num_rows

        _write_parquet_stream(directory / f"{new_part_stem()}{PART_SUFFIX}", write)
        for part in parts:
            part.unlink()
        logger.info(
            "run %s: compacted %d %s files into one (%d rows)", self.run_id, len(parts), table, kept
        )


def _write_parquet_stream(path: Path, write: Callable[[BinaryIO], None]) -> None:
    """Commit what ``write`` writes as ``path``; a part it could not read is named as such.

    Raises:
        ResultsError: From reading a part (naming it), or the file could not be written.
    """
    try:
        atomic_write(path, write)
    except ResultsError as exc:
        if isinstance(exc.__cause__, ResultsError):
            raise exc.__cause__ from exc
        raise


def _first_of_each(
    batches: Iterable[pa.RecordBatch], identity: list[str]
) -> Iterable[pa.RecordBatch]:
    """Each batch without the rows whose identity an earlier row already had."""
    seen: set[tuple[Any, ...]] = set()
    for batch in batches:
        keep = []
        for key in zip(*(batch.column(name).to_pylist() for name in identity), strict=True):
            keep.append(key not in seen)
            seen.add(key)
        yield batch if all(keep) else batch.filter(pa.array(keep, pa.bool_()))


def _row_groups(batches: Iterable[pa.RecordBatch], schema: pa.Schema) -> Iterable[pa.Table]:
    """Batches gathered into tables of about ``_ROW_GROUP_ROWS`` rows (parts hold few rows).

    Every ``_GATHER_BATCHES`` batches are copied into one: a batch read from a
    small part file holds buffers much larger than its rows.
    """
    pending: list[pa.RecordBatch] = []
    size = 0
    for batch in batches:
        pending.append(batch)
        size += batch.num_rows
        if size >= _ROW_GROUP_ROWS:
            yield pa.Table.from_batches(pending, schema)
            pending, size = [], 0
        elif len(pending) >= _GATHER_BATCHES:
            pending = [pa.Table.from_batches(pending, schema).combine_chunks().to_batches()[0]]
    if pending:
        yield pa.Table.from_batches(pending, schema)
