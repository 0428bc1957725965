"""Copying a run while it goes on: only what changed travels, and the copy ends exact.

The files are laid out as a results root holds a run (its manifest, a
partition per table, its artifacts); the transfer never reads their content.
"""

from __future__ import annotations

import io
import os
import tarfile
import time
from pathlib import Path

from crabray.results import apply_changes, new_run_id, pack_changes

RUN = new_run_id()


def _write(root: Path, name: str, content: str, age_sec: float = 0.0) -> None:
    path = root / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(content)
    if age_sec:
        then = time.time() - age_sec
        os.utime(path, (then, then))


def _names(data: bytes) -> list[str]:
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as archive:
        return sorted(archive.getnames())


def test_a_later_copy_carries_only_new_files_and_removes_what_the_head_compacted(
    tmp_path: Path,
) -> None:
    head, here = tmp_path / "head", tmp_path / "here"
    _write(head, f"runs/{RUN}.json", '{"state": "running"}', age_sec=60)
    _write(head, f"episodes/run_id={RUN}/part-1.parquet", "one", age_sec=60)
    _write(head, f"screenshots/{RUN}/a.png", "png", age_sec=60)
    first, data = pack_changes(head, RUN, since=None)
    assert apply_changes(data, here, RUN, first) == []
    assert (here / f"episodes/run_id={RUN}/part-1.parquet").read_text() == "one"

    _write(head, f"episodes/run_id={RUN}/part-2.parquet", "two")
    _write(head, f"runs/{RUN}.json", '{"state": "finished"}', age_sec=60)
    second, data = pack_changes(head, RUN, since=first.taken_at)
    assert _names(data) == [f"episodes/run_id={RUN}/part-2.parquet", f"runs/{RUN}.json"], (
        "the old part and the screenshot do not travel again; the manifest always does"
    )
    assert apply_changes(data, here, RUN, second) == []
    assert (here / f"runs/{RUN}.json").read_text() == '{"state": "finished"}'
    assert (here / f"screenshots/{RUN}/a.png").read_text() == "png"

    # The head compacts: two parts become one; the copy here follows exactly.
    for name in ("part-1", "part-2"):
        (head / f"episodes/run_id={RUN}/{name}.parquet").unlink()
    _write(head, f"episodes/run_id={RUN}/compacted.parquet", "one+two")
    third, data = pack_changes(head, RUN, since=second.taken_at)
    assert apply_changes(data, here, RUN, third) == []
    parts = sorted(p.name for p in (here / f"episodes/run_id={RUN}").iterdir())
    assert parts == ["compacted.parquet"], "no duplicate rows from the parts compacted away"
    assert not list(here.glob(".incoming-*")), "nothing of the unpacking is left behind"


def test_a_file_no_copy_brought_is_named_for_a_full_copy(tmp_path: Path) -> None:
    head, here = tmp_path / "head", tmp_path / "here"
    _write(head, f"runs/{RUN}.json", "{}")
    _write(head, f"episodes/run_id={RUN}/part-1.parquet", "one", age_sec=600)
    listing, data = pack_changes(head, RUN, since=time.time() - 60)
    assert apply_changes(data, here, RUN, listing) == [f"episodes/run_id={RUN}/part-1.parquet"]
    listing, data = pack_changes(head, RUN, since=None)
    assert apply_changes(data, here, RUN, listing) == []
