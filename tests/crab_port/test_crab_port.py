"""A CRAB benchmark file ported by changing its imports: validated, then run end to end.

The fixture (``template/``) is written in the style of CRAB's
``benchmarks/template.py`` and ``environments/template.py``: an environment with a
reset action, a second benchmark that shares task id "0" and runs three copies of
that environment, evaluators reading ``env.trajectory`` (of the root environment, and
a local evaluator of the sandbox environment), and CRAB's root actions (``submit``,
``check_submit``, ``complete``, ``wait``).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from crabray.results import read_episodes, read_steps
from tests.conftest import ROOT, crabray

SUITE = ROOT / "tests" / "crab_port" / "template"
TASKS = {"template_benchmark/0", "1", "multienv_template_benchmark/0", "answer", "trail"}


def test_the_ported_file_validates_with_shared_ids_qualified() -> None:
    done = crabray("tasks", "validate", str(SUITE), check=True)
    assert "5 tasks" in done.stdout
    listed = crabray("tasks", "list", str(SUITE), check=True)
    for task_id in TASKS:
        assert task_id in listed.stdout


@pytest.mark.ray
@pytest.mark.slow
def test_oracle_solves_every_task_and_noop_none(tmp_path: Path) -> None:
    out = tmp_path / "out"
    done = crabray("run", str(SUITE), "--agent", "oracle", "--agent", "noop", "--out", str(out))
    assert done.returncode == 0, done.stderr
    episodes = read_episodes(out)
    assert set(episodes.task_id) == TASKS
    oracle = episodes[episodes.agent == "oracle"]
    assert oracle.set_index("task_id").score.to_dict() == dict.fromkeys(TASKS, 1.0)
    assert set(oracle.termination_reason) == {"success"}
    noop = episodes[episodes.agent == "noop"]
    assert noop.set_index("task_id").score.to_dict() == dict.fromkeys(TASKS, 0.0)
    assert set(noop.termination_reason) == {"agent_complete"}
    steps = read_steps(out)
    multienv = steps[(steps.agent == "oracle") & (steps.task_id == "multienv_template_benchmark/0")]
    assert list(multienv.action) == [
        "testenv0-set_state",
        "testenv1-set_state",
        "testenv2-set_state",
        "_submit",
    ]
    assert multienv.error.isna().all()
    trail = steps[(steps.agent == "oracle") & (steps.task_id == "trail")]
    assert list(trail.graph_passed_nodes) == [1, 2]
