"""The runs of the results root a reporting command reads, and the error when it has none."""

from __future__ import annotations

from pathlib import Path

from crabray.core.errors import CrabrayError
from crabray.results.store.root import ResultsRoot


def no_runs(root: ResultsRoot, command: str) -> CrabrayError:
    """The error of a command that found no runs in OUT: where they are, or how to make one."""
    from crabray.results import nested_roots

    nested = nested_roots(root.path) if root.path is not None else []
    if nested:
        found = ", ".join(str(under) for under in nested)
        return CrabrayError(
            f"no runs in {root.shown} itself, but under it in {found}; "
            f"give one: crabray {command} {nested[-1]}"
        )
    missing = "" if root.path is None or root.path.is_dir() else " (it does not exist)"
    return CrabrayError(
        f"no runs in {root.shown}{missing}: start one with `crabray run tasks/demo --agent oracle` "
        "(or `bash scripts/demo.sh`), or give the results root your runs went to "
        f"(crabray run's --out): crabray {command} PATH"
    )


def resolve_run(root: ResultsRoot, run_id: str | None, command: str) -> str | None:
    """``--run``, with 'latest' replaced by the most recent run's id."""
    if run_id != "latest":
        return run_id
    with root.readable(whole=False) as folder:
        return resolve_run_in(folder, root, run_id, command)


def resolve_run_in(folder: Path, root: ResultsRoot, run_id: str | None, command: str) -> str | None:
    """``resolve_run`` for a command that already reads ``root`` as the local ``folder``
    (a store's copy is not made twice)."""
    from crabray.results import latest_run

    if run_id != "latest":
        return run_id
    found = latest_run(folder)
    if found is None:
        raise no_runs(root, command)
    return found


def shown_root(root: ResultsRoot, folder: Path) -> str:
    """How messages name ``root`` read as the local ``folder``: a store's URI, else the folder."""
    return root.shown if root.is_store else str(folder)
