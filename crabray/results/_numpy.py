"""numpy views of Arrow arrays, and Arrow arrays of numpy ones, without pyarrow's pandas shim.

pyarrow (26) imports pandas the first time an array goes to or comes from numpy
(``Array.to_numpy``, ``pa.array``) or ``pyarrow.dataset`` is imported: at
a million episodes, importing pandas cost ``crabray leaderboard`` more than
computing the leaderboard. The leaderboard's read path (``dataset``,
``_keys``, ``arrow_board``) converts its fixed-width columns here instead, from
the arrays' buffers; anything else (strings, lists) goes through pyarrow.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
import pyarrow as pa


def _dtype(kind: pa.DataType) -> np.dtype | None:
    """The numpy dtype of a fixed-width Arrow type read as raw values, or None."""
    if pa.types.is_timestamp(kind) or pa.types.is_date64(kind) or pa.types.is_duration(kind):
        return np.dtype(np.int64)
    if pa.types.is_integer(kind) or pa.types.is_floating(kind):
        letter = (
            "f" if pa.types.is_floating(kind) else "i" if pa.types.is_signed_integer(kind) else "u"
        )
        return np.dtype(f"{letter}{kind.bit_width // 8}")
    return None


def _bits(buffer: pa.Buffer, offset: int, length: int) -> np.ndarray:
    bits = np.unpackbits(np.frombuffer(buffer, np.uint8), bitorder="little")
    return bits[offset : offset + length].astype(bool)


def _chunk(array: pa.Array, null: float | int | None) -> np.ndarray:
    if pa.types.is_dictionary(array.type):
        return _chunk(array.indices, null)
    dtype = _dtype(array.type)
    if (dtype is None and not pa.types.is_boolean(array.type)) or (
        array.null_count and null is None
    ):
        return np.asarray(array.to_numpy(zero_copy_only=False))
    validity, data = array.buffers()[:2]
    if pa.types.is_boolean(array.type):
        values = _bits(data, array.offset, len(array))
    else:
        values = np.frombuffer(data, dtype, count=array.offset + len(array))[array.offset :]
    if array.null_count and null is not None:
        values = np.where(_bits(validity, array.offset, len(array)), values, null)
    return values


def to_numpy(column: pa.Array | pa.ChunkedArray, null: float | int | None = None) -> np.ndarray:
    """The values of a column (a dictionary column's indices) as one numpy array.

    Args:
        column: The column; fixed-width and boolean types are read from their buffers.
        null: The value of null slots; with None, a column with nulls (or of another
            type) is converted by pyarrow itself.
    """
    chunks = column.chunks if isinstance(column, pa.ChunkedArray) else [column]
    if not chunks:
        return np.empty(0, _dtype(column.type) or np.int64)
    parts = [_chunk(chunk, null) for chunk in chunks]
    return parts[0] if len(parts) == 1 else np.concatenate(parts)


def _validity(valid: np.ndarray | None) -> pa.Buffer | None:
    return None if valid is None else pa.py_buffer(np.packbits(valid, bitorder="little"))


def to_arrow(values: np.ndarray, valid: np.ndarray | None = None) -> pa.Array:
    """A numpy array of booleans, integers or floats as an Arrow array.

    Args:
        values: The values.
        valid: False where the Arrow array holds a null; no nulls when None.
    """
    nulls = 0 if valid is None else int(len(valid) - np.count_nonzero(valid))
    if values.dtype == bool:
        packed = np.packbits(values, bitorder="little")
        buffers = [_validity(valid), pa.py_buffer(packed)]
        return pa.Array.from_buffers(pa.bool_(), len(values), buffers, null_count=nulls)
    values = np.ascontiguousarray(values)
    kind = pa.from_numpy_dtype(values.dtype)
    buffers = [_validity(valid), pa.py_buffer(values)]
    return pa.Array.from_buffers(kind, len(values), buffers, null_count=nulls)


def strings(values: Sequence[str | None]) -> pa.Array:
    """Python strings (None for a null) as an Arrow string array (``pa.array`` imports pandas).

    Raises:
        TypeError: A value is neither a string nor None.
    """
    try:
        data = [b"" if value is None else value.encode() for value in values]
    except AttributeError:
        wrong = next(value for value in values if not isinstance(value, str | None))
        raise TypeError(f"expected a string, got {type(wrong).__name__} {wrong!r}") from None
    offsets = np.zeros(len(data) + 1, np.int32)
    np.cumsum([len(value) for value in data], out=offsets[1:])
    valid = _valid(values)
    nulls = 0 if valid is None else int(len(valid) - np.count_nonzero(valid))
    buffers = [_validity(valid), pa.py_buffer(offsets), pa.py_buffer(b"".join(data))]
    return pa.Array.from_buffers(pa.string(), len(data), buffers, null_count=nulls)


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_UNITS = {"s": timedelta(seconds=1), "ms": timedelta(milliseconds=1)}
_UNITS |= {"us": timedelta(microseconds=1)}


def _timestamps(values: Sequence[datetime | None], kind: pa.TimestampType) -> pa.Array:
    """Datetimes as ``kind`` (naive ones taken to be UTC, Arrow's rule)."""
    if kind.unit not in _UNITS:
        raise TypeError(f"timestamps in {kind.unit} are not built here")
    unit = _UNITS[kind.unit]
    counts = np.array(
        [0 if value is None else (_utc(value) - _EPOCH) // unit for value in values], np.int64
    )
    return to_arrow(counts, _valid(values)).view(kind)


def _utc(value: datetime) -> datetime:
    if not isinstance(value, datetime):
        raise TypeError(f"expected a datetime, got {type(value).__name__} {value!r}")
    return value if value.tzinfo else value.replace(tzinfo=UTC)


def from_pylist(values: Sequence[Any], kind: pa.DataType) -> pa.Array:
    """Python values as an Arrow array of ``kind``, without ``pa.array`` (it imports pandas).

    The types of the results schema: strings, integers, floats, booleans,
    timestamps, and lists and structs of them (structs from dicts); None is a null.

    Raises:
        TypeError, ValueError, OverflowError: A value does not fit ``kind``.
    """
    if pa.types.is_string(kind):
        return strings(values)
    if pa.types.is_timestamp(kind):
        return _timestamps(values, kind)
    mask = _valid(values)
    if pa.types.is_list(kind):
        items = [item for value in values if value is not None for item in value]
        offsets = np.zeros(len(values) + 1, np.int32)
        np.cumsum([len(value) if value is not None else 0 for value in values], out=offsets[1:])
        child = from_pylist(items, kind.value_type)
        return pa.ListArray.from_arrays(to_arrow(offsets), child, type=kind, mask=_mask(mask))
    if pa.types.is_struct(kind):
        fields = [kind.field(index) for index in range(kind.num_fields)]
        children = [
            from_pylist([None if v is None else v[f.name] for v in values], f.type) for f in fields
        ]
        return pa.StructArray.from_arrays(children, fields=fields, mask=_mask(mask))
    dtype = _dtype(kind)
    if dtype is None and not pa.types.is_boolean(kind):
        raise TypeError(f"Arrow type {kind} is not built here")
    filled = [value if value is not None else 0 for value in values]
    numbers = np.array(filled, bool if dtype is None else dtype)
    if dtype is not None and dtype.kind in "iu" and any(isinstance(v, float) for v in filled):
        raise TypeError(f"expected integers for {kind}, got floats")
    return to_arrow(numbers, mask)


def _valid(values: Sequence[Any]) -> np.ndarray | None:
    """False where a value is None; None when none is (the common case, checked first)."""
    if not any(value is None for value in values):
        return None
    return np.array([value is not None for value in values], bool)


def _mask(valid: np.ndarray | None) -> pa.Array | None:
    """``mask`` for ``from_arrays``: True where a value is null."""
    return None if valid is None else to_arrow(~valid)
