"""The results root a reporting command reads: a folder or a store, and its runs."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from crabray.core.errors import CrabrayError


def no_runs(out: str | Path, command: str) -> CrabrayError:
    """The error of a command that found no runs in OUT: where they are, or how to make one."""
    from crabray.results import nested_roots, shown_uri

    if "://" in str(out):
        out = shown_uri(str(out))  # never a key given in the URI
    nested = nested_roots(out) if "://" not in str(out) else []
    if nested:
        found = ", ".join(str(root) for root in nested)
        return CrabrayError(
            f"no runs in {out} itself, but under it in {found}; "
            f"give one: crabray {command} {nested[-1]}"
        )
    missing = "" if "://" in str(out) or Path(out).is_dir() else " (it does not exist)"
    return CrabrayError(
        f"no runs in {out}{missing}: start one with `crabray run tasks/demo --agent oracle` "
        "(or `bash scripts/demo.sh`), or give the results root your runs went to "
        f"(crabray run's --out): crabray {command} PATH"
    )


def resolve_run(out: str | Path, run_id: str | None, command: str) -> str | None:
    """``--run``, with 'latest' replaced by the most recent run's id."""
    from crabray.results import latest_run

    if run_id != "latest":
        return run_id
    with readable_root(str(out), whole=False) as root:
        found = latest_run(root)
    if found is None:
        raise no_runs(out, command)
    return found


def shown_root(out_arg: str, out: Path) -> str:
    """How messages name the results root: a store's URI (keys removed), else the folder."""
    from crabray.results import is_remote, shown_uri

    return shown_uri(out_arg) if is_remote(out_arg) else str(out)


@contextmanager
def readable_root(out: str, *, whole: bool) -> Iterator[Path]:
    """OUT as a local results root: itself, or a temporary copy of the store it names.

    ``whole`` copies every run's files (the viewer and the site read them); else
    only the run manifests are copied (``runs list``).
    """
    from crabray.results import is_remote, local_path
    from crabray.results.store.remote import store_copy

    if not is_remote(out):
        yield local_path(out)
        return
    with store_copy(out, whole=whole) as copy:
        yield copy
