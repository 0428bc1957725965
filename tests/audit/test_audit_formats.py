"""``crabray audit`` on suites loaded as shipped, on docker: Harbor tasks with seeded flaws,
and the shipped docker, task-folder and task-JSON demos, which must be clean."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.backends.docker.dockerd import require_env_image
from tests.conftest import ROOT, crabray

pytestmark = [pytest.mark.ray, pytest.mark.slow]

HARBOR_FLAWED = ROOT / "tests" / "audit" / "harbor_flawed"


def _findings(done: object) -> dict[str, set[tuple[str, str]]]:
    tasks = json.loads(done.stdout)  # type: ignore[attr-defined]
    return {t["task_id"]: {(f["probe"], f["kind"]) for f in t["findings"]} for t in tasks}


def test_harbor_tasks_flaws_are_named(tmp_path: Path) -> None:
    require_env_image("debian")
    done = crabray(
        "audit", str(HARBOR_FLAWED), "--base-image", "crabray/debian:latest", "-k", "2",
        "--out", str(tmp_path / "out"), "--format", "json",
        timeout=1200,
    )  # fmt: skip
    assert done.returncode == 1, done.stderr
    found = _findings(done)
    assert found["clean-checksum"] == set()
    assert found["flaw-do-nothing"] == {("noop", "do-nothing")}
    # Its verifier greps as root in the container: a replaced grep passes it (unverified).
    assert found["flaw-answer-visible"] - {("probe-fake-tools", "grader-trust")} == {
        ("probe-peek", "answer-visible")
    }
    assert ("probe-tamper-scripts", "grader-trust") in found["flaw-grader-runs-agent-code"]
    assert {kind for _, kind in found["flaw-grader-runs-agent-code"]} == {"grader-trust"}
    tasks = {t["task_id"]: t for t in json.loads(done.stdout)}
    (peek,) = [f for f in tasks["flaw-answer-visible"]["findings"] if f["probe"] == "probe-peek"]
    assert "tok-5521-violet-harbor" in peek["evidence"] and "/opt/release" in peek["evidence"]


@pytest.mark.parametrize(
    ("suite", "args"),
    [
        ("tasks/docker_demo", []),
        ("tasks/task_folder_demo", []),
        ("tasks/task_json_demo", []),
    ],
)
def test_shipped_docker_demos_audit_clean(tmp_path: Path, suite: str, args: list[str]) -> None:
    """The shipped demos fall to no probe (CI runs these audits)."""
    require_env_image("debian")
    done = crabray(
        "audit", suite, "-k", "1", "--out", str(tmp_path / "out"), "--format", "json", *args,
        timeout=1500,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert all(not flaws for flaws in _findings(done).values())
