"""``ResultsRoot``: what a results root given as text is, decided in one place."""

from __future__ import annotations

from pathlib import Path

import pytest

from crabray.core.errors import ResultsError
from crabray.results import ResultsRoot


def test_a_folder_is_local_and_shown_as_given(tmp_path: Path) -> None:
    root = ResultsRoot.parse(tmp_path)
    assert not root.is_url and not root.is_store
    assert root.path == tmp_path == root.local()
    assert root.shown == str(tmp_path)


def test_a_file_url_is_a_url_but_a_local_folder(tmp_path: Path) -> None:
    root = ResultsRoot.parse(f"file://{tmp_path}/my%20runs")
    assert root.is_url and not root.is_store
    assert root.local() == tmp_path / "my runs"


def test_a_store_hides_its_keys_and_refuses_a_direct_write() -> None:
    root = ResultsRoot.parse("s3://KEY:SECRET@bucket/prefix")
    assert root.is_store and root.path is None
    assert root.shown == "s3://bucket/prefix"
    with pytest.raises(ResultsError, match="s3://bucket/prefix") as caught:
        root.local()
    assert "SECRET" not in str(caught.value)


def test_reading_a_folder_reads_it_in_place(tmp_path: Path) -> None:
    with ResultsRoot.parse(str(tmp_path)).readable(whole=True) as folder:
        assert folder == tmp_path


def test_staging_a_folder_writes_it_in_place(tmp_path: Path) -> None:
    with ResultsRoot.parse(tmp_path).staged() as folder:
        assert folder == tmp_path
