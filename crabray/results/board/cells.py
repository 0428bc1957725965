"""How a value reads in a table cell: one rule per column for the terminal, Markdown and site.

``crabray leaderboard`` (terminal and ``md``) and the leaderboard site show
the same frames; they format every cell here, so a number reads the same in
both. The rules, by column name:

- cost (``cost_usd``, ``cost_per_success``, any ``cost*`` column), in US
  dollars: cents from $1 up; below $1, four significant digits with trailing
  zeros dropped (at least cents), so that $0.00014 reads ``0.00014``, not 0;
- step counts (``*steps*``): one decimal;
- durations (``*_sec``): two decimals;
- any other float (rates, scores, intervals): three decimals;
- booleans ``yes``/``no``; times in UTC; lists joined by commas; a missing
  value (None, NaN, NaT, pandas' NA) blank.
"""

from __future__ import annotations

import math
import sys
from datetime import datetime
from typing import Any

import numpy as np

_SIGNIFICANT_USD = 4


def plain(value: Any) -> Any:
    """A numpy scalar as the Python value it holds (``numpy.bool_`` is not a ``bool``)."""
    return value.item() if isinstance(value, np.generic) else value


def is_missing(value: Any) -> bool:
    """Whether a cell holds no value (None, NaN, NaT or pandas' NA)."""
    if value is None:
        return True
    if isinstance(value, float):
        return math.isnan(value)
    # pandas' NA and NaT exist only once pandas is loaded (an Arrow table's cells never hold them).
    pandas = sys.modules.get("pandas")
    return pandas is not None and (value is pandas.NA or value is pandas.NaT)


def usd(value: float) -> str:
    """Dollars without a sign: cents from $1 up, four significant digits below.

    Example:
        >>> [usd(v) for v in (12.345, 0.5, 0.012345, 0.00014, 0.0)]
        ['12.35', '0.50', '0.01235', '0.00014', '0.00']
    """
    if value == 0 or abs(value) >= 1 or not math.isfinite(value):
        return f"{value:.2f}"
    decimals = _SIGNIFICANT_USD - 1 - math.floor(math.log10(abs(value)))
    text = f"{value:.{decimals}f}".rstrip("0")
    whole, _, fraction = text.partition(".")
    return f"{whole}.{fraction.ljust(2, '0')}"


def format_float(column: str, value: float) -> str:
    """A float of ``column`` rounded by that column's rule (see the module docstring)."""
    if column.startswith("cost"):
        return usd(value)
    if "steps" in column:
        return f"{value:.1f}"
    if column.endswith("_sec"):
        return f"{value:.2f}"
    return f"{value:.3f}"


def format_cell(column: str, value: Any) -> str:
    """``value`` of ``column`` as a person reads it in a table (see the module docstring)."""
    value = plain(value)
    if is_missing(value):
        return ""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return format_float(column, value)
    if isinstance(value, datetime):
        return value.strftime("%Y-%m-%d %H:%M:%S UTC")
    if isinstance(value, (list, tuple)):
        return ", ".join(str(item) for item in value)
    return str(value)
