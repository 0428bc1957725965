"""The run lock: one writer per run, released however its holder ends."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from crabray.core.errors import ResultsError
from crabray.results import run_lock
from crabray.results.store.lock import is_locked, lock_path


def test_a_second_writer_is_refused_until_the_first_ends(tmp_path: Path) -> None:
    with run_lock(tmp_path, "20261128-000000-abcdef"):
        assert is_locked(tmp_path, "20261128-000000-abcdef")
        refused = pytest.raises(ResultsError, match="being written by another crabray process")
        with refused as err, run_lock(tmp_path, "20261128-000000-abcdef"):
            pass
        assert f"pid {os.getpid()}" in str(err.value)
        with run_lock(tmp_path, "20261128-000000-other1"):  # another run is not blocked
            pass
    assert not is_locked(tmp_path, "20261128-000000-abcdef")
    with run_lock(tmp_path, "20261128-000000-abcdef"):
        pass


def test_a_killed_holder_leaves_no_lock_behind(tmp_path: Path) -> None:
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time\n"
            "from crabray.results import run_lock\n"
            f"with run_lock({str(tmp_path)!r}, 'r1'):\n"
            "    print('locked', flush=True); time.sleep(300)\n",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert holder.stdout is not None
    assert holder.stdout.readline().strip() == "locked"
    assert is_locked(tmp_path, "r1")
    holder.kill()
    holder.wait()
    assert not is_locked(tmp_path, "r1"), "the kernel released the lock of the dead process"
    with run_lock(tmp_path, "r1"):
        pass


def test_a_store_run_is_locked_on_this_machine_without_its_keys() -> None:
    path = lock_path("s3://KEY:SECRET@bucket/results", "r1")
    assert "SECRET" not in str(path) and path.name == "r1.lock"
    assert path == lock_path("s3://bucket/results", "r1"), "keyed by the store, not the keys"
