"""Shipped task-JSON evaluation functions over Jupyter notebooks (``.ipynb`` JSON).

Notebooks are read as plain JSON (nbformat 4): no Jupyter needed. A cell's
``source`` and a stream's ``text`` may be a string or a list of lines, as
the format allows. The agent's notebook missing or not JSON scores 0; the
task's expected notebook must be valid.
"""

from __future__ import annotations

import json
from typing import Any

from crabray.formats.task_json._evaluation import read_result
from crabray.formats.task_json._registry import LocalPath, TaskContext, evaluation_function

INSTALL_NOISE = (
    "Requirement already satisfied",
    "Successfully installed",
    "Collecting ",
    "Downloading ",
    "Installing collected packages",
    "Using cached ",
    "[notice]",
    "WARNING: Running pip",
)
"""Lines of package-installer output left out when outputs are compared."""


class NotebookError(ValueError):
    """A file is not a notebook."""


def parse_notebook(data: bytes | str) -> list[dict[str, Any]]:
    """The cells of a notebook file.

    Raises:
        NotebookError: It is not JSON, or has no list of cells.
    """
    try:
        document = json.loads(data)
    except (ValueError, UnicodeDecodeError) as exc:
        raise NotebookError(f"not a notebook: {exc}") from exc
    cells = document.get("cells") if isinstance(document, dict) else None
    if not isinstance(cells, list) or not all(isinstance(c, dict) for c in cells):
        raise NotebookError("not a notebook: no list of cells")
    return cells


def _text(value: Any) -> str:
    return "".join(value) if isinstance(value, list) else str(value or "")


def _source(cell: dict[str, Any]) -> str:
    return _text(cell.get("source")).strip()


def _quiet(text: str) -> str:
    lines = [line for line in text.splitlines() if not line.lstrip().startswith(INSTALL_NOISE)]
    return "\n".join(lines).strip()


def text_outputs(cell: dict[str, Any], *, drop_noise: bool = True) -> list[str]:
    """A code cell's stdout streams and plain-text results, install noise left out."""
    texts = []
    for output in cell.get("outputs") or []:
        if output.get("name") == "stdout":
            text = _quiet(_text(output.get("text"))) if drop_noise else _text(output.get("text"))
            if text.strip():
                texts.append(text.strip())
        elif "text/plain" in (output.get("data") or {}):
            texts.append(_text(output["data"]["text/plain"]).strip())
    return texts


def _load_pair(
    ctx: TaskContext, local_expected: str, vm_result: str
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]] | None:
    expected = parse_notebook(ctx.read_local(local_expected))
    data = read_result(ctx, vm_result)
    if data is None:
        return None
    try:
        return parse_notebook(data), expected
    except NotebookError:
        return None


def cells_equal(result: list[dict[str, Any]], expected: list[dict[str, Any]]) -> bool:
    """Same number of cells, same types, same sources (surrounding blanks ignored)."""
    return len(result) == len(expected) and all(
        r.get("cell_type") == e.get("cell_type") and _source(r) == _source(e)
        for r, e in zip(result, expected, strict=True)
    )


def outputs_equal(result: list[dict[str, Any]], expected: list[dict[str, Any]]) -> bool:
    """Same cell types, and every code cell has the same text outputs (install noise ignored)."""
    if len(result) != len(expected):
        return False
    for r, e in zip(result, expected, strict=True):
        if r.get("cell_type") != e.get("cell_type"):
            return False
        if r.get("cell_type") == "code" and text_outputs(r) != text_outputs(e):
            return False
    return True


def _sanitized(cells: list[dict[str, Any]]) -> list[tuple[Any, str, str]]:
    return [
        (
            c.get("cell_type"),
            _source(c),
            "\n".join(text_outputs(c, drop_noise=False)) if c.get("cell_type") == "code" else "",
        )
        for c in cells
    ]


def _indices(expected: list[int] | dict[str, Any] | None) -> list[int]:
    indices = expected.get("expected", []) if isinstance(expected, dict) else expected
    return sorted(indices or [])


@evaluation_function
def compare_notebook_cells(ctx: TaskContext, local_expected: LocalPath, vm_result: str) -> float:
    """1 when the sandbox notebook has the expected cells: types and sources."""
    pair = _load_pair(ctx, local_expected, vm_result)
    return float(pair is not None and cells_equal(*pair))


@evaluation_function
def compare_notebook_outputs(ctx: TaskContext, local_expected: LocalPath, vm_result: str) -> float:
    """1 when every code cell of the sandbox notebook printed what the expected one did,
    ignoring package-installer noise (``pip`` output)."""
    pair = _load_pair(ctx, local_expected, vm_result)
    return float(pair is not None and outputs_equal(*pair))


@evaluation_function
def compare_ipynb_files(ctx: TaskContext, local_expected: LocalPath, vm_result: str) -> float:
    """1 when both notebooks have the same cells, sources and text outputs; metadata and
    execution counts are ignored."""
    pair = _load_pair(ctx, local_expected, vm_result)
    return float(pair is not None and _sanitized(pair[0]) == _sanitized(pair[1]))


@evaluation_function
def is_jupyter_cell_executed(
    ctx: TaskContext,
    vm_result: str,
    expected: list[int] | dict[str, Any] | None = None,
    cell_type: str = "code",
    version: int = 4,
) -> float:
    """1 when exactly the cells listed in ``expected`` (indices; none by default) have
    not been executed: every other cell of ``cell_type`` has an execution count.
    ``version`` (the notebook format version) is accepted as the GUI-OS repository's is."""
    data = read_result(ctx, vm_result)
    try:
        cells = parse_notebook(data) if data is not None else None
    except NotebookError:
        cells = None
    if cells is None:
        return 0.0
    unexecuted = [
        i
        for i, c in enumerate(cells)
        if c.get("cell_type") == cell_type and not c.get("execution_count")
    ]
    return float(unexecuted == _indices(expected))


@evaluation_function
def are_jupyter_outputs_cleared(
    ctx: TaskContext,
    vm_result: str,
    expected: list[int] | dict[str, Any] | None = None,
    cell_type: str = "code",
    version: int = 4,
) -> float:
    """1 when exactly the cells listed in ``expected`` (indices; none by default) still
    have outputs: every other cell of ``cell_type`` was cleared. ``version`` is accepted
    as the GUI-OS repository's is."""
    data = read_result(ctx, vm_result)
    try:
        cells = parse_notebook(data) if data is not None else None
    except NotebookError:
        cells = None
    if cells is None:
        return 0.0
    with_output = [
        i
        for i, c in enumerate(cells)
        if c.get("cell_type") == cell_type
        and any(("text" in o or "data" in o or "ename" in o) for o in c.get("outputs") or [])
    ]
    return float(with_output == _indices(expected))
