"""The reward-hacking battery through the real CLI and runner: only the honest task scores.

Each backend runs the whole battery (``battery.py``) once, replayed by an ordinary
LLM agent against the offline model (``crabray llm serve``: it answers each step
with the task's reference solution, here the attack), not by the oracle, whose
errors would be the benchmark's. The rows on disk must show the honest tasks
solved by a verified grader and every attack failed as the agent's own result,
counted (not an ``env_error``, which the leaderboard leaves out and retries).
"""

from __future__ import annotations

import time
from typing import Any

import pytest

from crabray.results import read_episodes
from tests.backends.docker.dockerd import env_image_missing
from tests.conftest import ROOT, run_replayed
from tests.integrity.battery import ATTACKS, build_battery

pytestmark = [pytest.mark.ray, pytest.mark.slow]

BACKENDS: dict[str, dict[str, Any]] = {
    "local": {},
    "docker": {"image": "crabray/debian:latest"},
}


@pytest.fixture(scope="module", params=list(BACKENDS))
def battery_rows(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Any:
    """Every episode row of one replayed run of the battery on the backend, by task id."""
    backend = request.param
    if backend == "docker":
        missing = env_image_missing("debian")
        if missing:
            pytest.skip(missing)
    folder = tmp_path_factory.mktemp(f"battery-{backend}")
    suite = folder / f"battery_{backend}.py"
    suite.write_text(
        "import sys\n"
        f"sys.path.insert(0, {str(ROOT)!r})\n"
        "from tests.integrity.battery import build_battery\n"
        f"battery = build_battery({backend!r}, **{BACKENDS[backend]!r})\n"
    )
    out = folder / "out"
    done = run_replayed(suite, out, folder)
    episodes = read_episodes(out)
    if backend == "docker":  # every sandbox was removed, the 24,000-deep tree's included
        import docker

        (run_id,) = set(episodes.run_id)
        client = docker.from_env()
        # The run's actors may still be removing theirs as it exits (a deep tree takes
        # seconds, the engine's recursive removal failing first): none may stay.
        deadline = time.monotonic() + 120
        while left := client.containers.list(all=True, filters={"label": f"crabray.run={run_id}"}):
            if time.monotonic() > deadline:
                break
            time.sleep(1)
        client.close()
        assert not left, [(c.name, c.status) for c in left]
    # A run exits 1 while some episode is not the agent's (a known env_error below).
    expected = 0 if (episodes.attribution == "agent").all() else 1
    assert done.returncode == expected, f"{done.stdout}\n{done.stderr}"
    assert len(episodes) == len(build_battery().tasks)
    return backend, {row.task_id: row for row in episodes.itertuples()}


def test_the_honest_task_scores_one_by_a_verified_grader(battery_rows: Any) -> None:
    _, rows = battery_rows
    for kind in ("py", "cmd", "out", "sh"):
        row = rows[f"honest-{kind}"]
        assert (row.success, row.score, row.termination_reason) == (True, 1.0, "success")
        assert row.grader_trusted is True, row.grader_untrusted_reason


@pytest.mark.parametrize(
    "task", [f"{a.id}-{kind}" for a in ATTACKS for kind in a.kinds if not a.may_pass_unverified]
)  # fmt: skip
def test_every_attack_scores_zero_and_counts_as_the_agents(battery_rows: Any, task: str) -> None:
    backend, rows = battery_rows
    row = rows[task]
    assert not row.success and row.score == 0.0, f"{task} forged a pass on {backend}"
    assert row.termination_reason != "env_error", f"{task} on {backend}: {row.error}"
    assert row.attribution == "agent", f"{task} on {backend}: {row.error}"
    assert row.attempt == 0


@pytest.mark.parametrize(
    "task", [f"{a.id}-{kind}" for a in ATTACKS for kind in a.kinds if a.may_pass_unverified]
)  # fmt: skip
def test_a_changed_program_never_forges_a_verified_pass(battery_rows: Any, task: str) -> None:
    backend, rows = battery_rows
    row = rows[task]
    assert not (row.success and row.grader_trusted), f"{task} forged a verified pass on {backend}"
    if row.success:  # what its check ran or read was the agent's (docker's root, a dotfile)
        assert row.grader_untrusted_reason, row
        assert any(
            why in row.grader_untrusted_reason
            for why in ("system folders", "startup files", "kept running")
        ), row.grader_untrusted_reason
    elif backend == "docker":  # the agent could reach its grader: the row must say so
        assert row.grader_trusted is False, f"{task} on docker was verified"
    assert row.attribution == "agent" and row.attempt == 0, row.error
