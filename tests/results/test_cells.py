"""``crabray.results.board.cells``: one rule per column, in the terminal, Markdown and site."""

from __future__ import annotations

from datetime import UTC, datetime

import numpy as np
import pandas as pd
import pytest

from crabray.results import render, to_rich_table
from crabray.results.board.cells import format_cell
from crabray.results.site._html import cell as site_cell


@pytest.mark.parametrize(
    ("column", "value", "text"),
    [
        ("cost_usd", 12.345, "12.35"),
        ("cost_usd", 0.5, "0.50"),
        ("cost_usd", 0.012345, "0.01235"),
        ("cost_usd", 0.00014, "0.00014"),
        ("cost_per_success", 0.0, "0.00"),
        ("mean_steps", 4.25, "4.2"),
        ("mean_steps_a", 3.0, "3.0"),
        ("mean_wall_time_sec", 1.2345, "1.23"),
        ("success_rate", 0.4, "0.400"),
        ("episodes", np.int64(7), "7"),
        ("success", np.bool_(True), "yes"),
        ("success", False, "no"),
        ("finished_at", datetime(2025, 1, 2, 3, 4, 5, tzinfo=UTC), "2025-01-02 03:04:05 UTC"),
        ("tags", ["files", "shell"], "files, shell"),
        ("model", None, ""),
        ("score", float("nan"), ""),
        ("score", pd.NA, ""),
    ],
)
def test_each_column_has_one_rule(column: str, value: object, text: str) -> None:
    assert format_cell(column, value) == text


def test_terminal_markdown_and_site_agree_on_a_small_cost() -> None:
    frame = pd.DataFrame({"agent": ["a"], "episodes": [1], "cost_usd": [0.00014]})
    assert render(frame, "md").splitlines()[2] == "| a | 1 | 0.00014 |"
    terminal = to_rich_table(frame, max_width=None)
    assert list(terminal.columns[-1].cells) == ["0.00014"]
    assert site_cell("cost_usd", 0.00014).text == "$0.00014"
