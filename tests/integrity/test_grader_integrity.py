"""The reward-hacking battery through the real CLI and runner: only the honest task scores.

Each backend runs the whole battery (``battery.py``) once with the oracle agent,
whose solution for every attack task is the attack; the rows on disk must show
the honest tasks solved and every attack failed as the agent's own result,
counted (not an ``env_error``, which the leaderboard leaves out and retries).
"""

from __future__ import annotations

from typing import Any

import pytest

from crabray.results import read_episodes
from tests.backends.docker.dockerd import env_image_missing
from tests.conftest import ROOT, crabray
from tests.integrity.battery import ATTACKS, build_battery

pytestmark = [pytest.mark.ray, pytest.mark.slow]

BACKENDS: dict[str, dict[str, Any]] = {
    "local": {},
    "docker": {"image": "crabray/debian:latest"},
}


@pytest.fixture(scope="module", params=list(BACKENDS))
def battery_rows(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Any:
    """Every episode row of one oracle run of the battery on the backend, by task id."""
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
    done = crabray(
        "run", str(suite), "--agent", "oracle", "--out", str(out), "--max-attempts", "1",
        timeout=900,
    )  # fmt: skip
    episodes = read_episodes(out)
    # A run exits 1 while some episode is not the agent's (a known env_error below).
    expected = 0 if (episodes.attribution == "agent").all() else 1
    assert done.returncode == expected, f"{done.stdout}\n{done.stderr}"
    assert len(episodes) == len(build_battery().tasks)
    return backend, {row.task_id: row for row in episodes.itertuples()}


def test_the_honest_task_scores_one_by_a_trusted_grader(battery_rows: Any) -> None:
    _, rows = battery_rows
    for kind in ("py", "cmd"):
        row = rows[f"honest-{kind}"]
        assert (row.success, row.score, row.termination_reason) == (True, 1.0, "success")
        assert row.grader_trusted is True


@pytest.mark.parametrize("kind", ["py", "cmd"])
@pytest.mark.parametrize("attack", [a.id for a in ATTACKS])
def test_every_attack_scores_zero_and_counts(battery_rows: Any, attack: str, kind: str) -> None:
    backend, rows = battery_rows
    task = f"{attack}-{kind}"
    row = rows[task]
    assert not row.success and row.score == 0.0, f"{task} forged a pass on {backend}"
    assert row.termination_reason != "env_error", f"{task} on {backend}: {row.error}"
    assert row.attempt == 0
