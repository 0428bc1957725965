"""Reading part files file by file with ``pyarrow.parquet``, without ``pyarrow.dataset``.

``pyarrow.dataset`` imports pandas (pyarrow 26), which costs ``crabray
leaderboard`` more than its work at a million episodes. The part files the sink
writes hold every column but the run id with its schema type and are read here
as they are, the run id coming from the partition folder's name (``run_id=<RUN>``);
an older file lacking a column (or holding a narrower type) is completed to the
schema here too. ``crabray.results.store.dataset`` falls back to its dataset scan
only when a file cannot be read this way (the scan names the file).
"""

from __future__ import annotations

import posixpath

import numpy as np
import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from crabray.results._numpy import strings, to_arrow
from crabray.results.store.schema import PARTITION_COLUMN

DICTIONARY = pa.dictionary(pa.int32(), pa.string())
CATEGORICAL_COLUMNS = frozenset(
    (
        "run_id",
        "suite",
        "task_id",
        "agent",
        "model",
        "termination_reason",
        "node",
        "error_type",
        "attribution",
    )
)
"""String columns with few distinct values: read as Arrow dictionaries, so a million rows
are a million integers and a few hundred strings until (and unless) they are decoded."""


def read_file_by_file(
    paths: list[str], schema: pa.Schema, columns: list[str], filesystem: pafs.FileSystem
) -> pa.Table | None:
    """``columns`` of part files, string columns as dictionaries, or None to scan instead.

    ``read_part_files``' dictionary read, file by file with ``pyarrow.parquet``:
    ``pyarrow.dataset`` is not imported, nor pandas with it. ``run_id`` is the
    file's partition (read from an older file that holds it only when the file
    is in no ``run_id=`` folder); another column a file lacks comes back null,
    one of another type is cast to the schema's. None when a cast fails or a
    file cannot be read: the dataset scan then casts what it can and names the
    file it cannot read.
    """
    tables = []
    try:
        for path in paths:
            wanted = [n for n in columns if n != PARTITION_COLUMN or _partition(path) is None]
            part = _open_part(path, filesystem, wanted)
            present = [name for name in wanted if part.schema_arrow.get_field_index(name) >= 0]
            read = part.read(columns=present)
            tables.append(
                pa.Table.from_arrays(
                    [_as_schema(read, name, schema, path) for name in columns], names=columns
                )
            )
        return pa.concat_tables(tables).unify_dictionaries()
    except (pa.ArrowException, OSError):
        return None


def _open_part(path: str, filesystem: pafs.FileSystem, columns: list[str]) -> pq.ParquetFile:
    """A part file, its ``CATEGORICAL_COLUMNS`` among ``columns`` to be read as dictionaries."""
    local = isinstance(filesystem, pafs.LocalFileSystem)
    encoded = [name for name in columns if name in CATEGORICAL_COLUMNS]
    try:
        source = path if local else filesystem.open_input_file(path)
        return pq.ParquetFile(source, read_dictionary=encoded, pre_buffer=True)
    except KeyError:  # the file lacks one of them: encode the ones it has
        source = path if local else filesystem.open_input_file(path)
        found = pq.ParquetFile(source).schema_arrow.names
        source = path if local else filesystem.open_input_file(path)
        kept = [name for name in encoded if name in found]
        return pq.ParquetFile(source, read_dictionary=kept, pre_buffer=True)


def _as_schema(part: pa.Table, name: str, schema: pa.Schema, path: str) -> pa.ChunkedArray:
    """Column ``name`` of one file's rows as the read returns it (a dictionary for strings)."""
    kind = DICTIONARY if name in CATEGORICAL_COLUMNS else schema.field(name).type
    if name in part.column_names:
        column = part.column(name)
        return column if column.type == kind else column.cast(kind)
    run = _partition(path) if name == PARTITION_COLUMN else None
    if run is not None:  # the partition directory names the run
        indices = to_arrow(np.zeros(part.num_rows, np.int32))
        return pa.chunked_array([pa.DictionaryArray.from_arrays(indices, strings([run]))])
    return pa.chunked_array([pa.nulls(part.num_rows, kind)])


def _partition(path: str) -> str | None:
    """The run a part file's folder names (``run_id=<RUN>``), or None outside such a folder."""
    folder = posixpath.basename(posixpath.dirname(path))
    return folder.removeprefix("run_id=") if folder.startswith("run_id=") else None
