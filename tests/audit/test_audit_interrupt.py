"""Ctrl-C stops an audit as it stops a run: what finished is saved, the terminal says how
much and the command that goes on, the exit code is 130, and that command finishes it."""

from __future__ import annotations

import re
import shlex
import signal
from pathlib import Path

import pytest

from tests.conftest import write_sleepy_suite
from tests.interrupts.conftest import Driver, crabray_in

pytestmark = [pytest.mark.ray, pytest.mark.slow]


def test_ctrl_c_stops_an_audit_and_the_command_it_prints_finishes_it(tmp_path: Path) -> None:
    suite = write_sleepy_suite(tmp_path / "slow.py", tasks=2, sleep=3.0)
    out = tmp_path / "results"
    driver = Driver(tmp_path, str(suite), "-k", "1", command="audit")
    driver.wait_for_rows(out, 1)
    driver.signal_group(signal.SIGINT)
    code, _, stderr = driver.finish()

    assert code == 130, driver.output()
    assert "Traceback" not in stderr, stderr
    assert re.search(r"interrupted \(SIGINT\): \d+ of 26 episodes are finished and saved", stderr)
    (run_id,) = [path.stem for path in (out / "runs").glob("*.json")]
    found = re.search(r"audit on with: (.+)", stderr)
    assert found, stderr
    command = shlex.split(found.group(1))
    assert command[1:] == ["audit", "--resume", run_id, "--out", "results"]

    resumed = crabray_in(tmp_path, *command[1:])
    assert resumed.returncode in (0, 1), resumed.stdout + resumed.stderr
    assert "exploitable:" in resumed.stdout and "Traceback" not in resumed.stderr
    listed = crabray_in(tmp_path, "runs", "list")
    assert "26/26" in listed.stdout and "finished" in listed.stdout, listed.stdout
