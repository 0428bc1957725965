"""Run manifests and run ids."""

from __future__ import annotations

import re
from datetime import UTC, datetime

import pytest

from crabray.core.errors import ResultsError
from crabray.results import RunManifest, list_runs, new_run_id, read_manifest, write_manifest


def _manifest(run_id: str) -> RunManifest:
    return RunManifest(
        run_id=run_id,
        suite="tasks/demo",
        suite_name="demo",
        agents=["scripted", "gpt"],
        options={"epochs": 2, "max_steps": 15, "backend": {"kind": "docker"}},
        crabray_version="0.1.0",
    )


def test_new_run_id_is_utc_time_and_six_hex_digits():
    before = datetime.now(UTC).replace(microsecond=0)
    run_id = new_run_id()
    after = datetime.now(UTC)
    match = re.fullmatch(r"(\d{8}-\d{6})-([0-9a-f]{6})", run_id)
    assert match, run_id
    stamp = datetime.strptime(match.group(1), "%Y%m%d-%H%M%S").replace(tzinfo=UTC)
    assert before <= stamp <= after
    assert len({new_run_id() for _ in range(50)}) == 50


def test_manifest_round_trip_and_listing(tmp_path):
    first, second = _manifest("20261123-075300-aaaaaa"), _manifest("20261124-010203-bbbbbb")
    path = write_manifest(tmp_path, second)
    write_manifest(tmp_path, first)
    assert path == tmp_path / "runs" / "20261124-010203-bbbbbb.json"
    assert read_manifest(tmp_path, first.run_id) == first
    assert read_manifest(tmp_path, second.run_id).options["backend"] == {"kind": "docker"}
    assert list_runs(tmp_path) == [first.run_id, second.run_id]
    assert not list((tmp_path / "runs").glob(".tmp-*"))


def test_rewriting_a_manifest_replaces_it(tmp_path):
    manifest = _manifest("r1")
    write_manifest(tmp_path, manifest)
    write_manifest(tmp_path, manifest.model_copy(update={"agents": ["only"]}))
    assert read_manifest(tmp_path, "r1").agents == ["only"]


def test_missing_run_names_the_runs_that_exist(tmp_path):
    with pytest.raises(ResultsError, match="runs there: none"):
        read_manifest(tmp_path, "r9")
    write_manifest(tmp_path, _manifest("r1"))
    write_manifest(tmp_path, _manifest("r2"))
    with pytest.raises(ResultsError, match=r"no run 'r9'.*runs there: r1, r2"):
        read_manifest(tmp_path, "r9")


def test_list_runs_of_absent_dir_is_empty(tmp_path):
    assert list_runs(tmp_path / "absent") == []


def test_invalid_manifest_names_the_file(tmp_path):
    (tmp_path / "runs").mkdir()
    (tmp_path / "runs" / "r1.json").write_text('{"run_id": "r1"')
    with pytest.raises(ResultsError, match=r"r1\.json: not a valid run manifest"):
        read_manifest(tmp_path, "r1")
    write_manifest(tmp_path, _manifest("r2"))
    (tmp_path / "runs" / "r2.json").rename(tmp_path / "runs" / "r3.json")
    with pytest.raises(ResultsError, match="manifest says run_id 'r2'"):
        read_manifest(tmp_path, "r3")


def test_manifest_refuses_unusable_run_id():
    with pytest.raises(ValueError, match="run id"):
        _manifest("../up")
