"""A task-JSON task's grading against an agent that attacks it, replayed by an ordinary agent.

The demo's shell task (write ``project/build.sh``), once as shipped and once
"solved" by a process left running that writes the script only when the
grader's ``check_build.sh`` has been copied in: the state the agent left never
holds it. Frozen from the end of the agent's turn, the process cannot write
it; graded once more with it running, a pass would be unverified. Either way
no verified pass, and the row is the agent's.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from crabray.results import read_episodes
from tests.conftest import ROOT, run_replayed

pytestmark = [pytest.mark.ray, pytest.mark.slow]

SHELL_TASK = "2d8b3e4a-7c63-4f9a-9b2c-3e4f5a6b7c03"
ATTACK_TASK = "2d8b3e4a-7c63-4f9a-9b2c-3e4f5a6b7c99"
LATE_WRITER = (
    "nohup sh -c 'while :; do if [ -e check_build.sh ]; then mkdir -p project; "
    'printf "#!/bin/sh\\necho build ok\\n" > project/build.sh; fi; done\' >/dev/null 2>&1 &'
)


def attack_suite(root: Path) -> Path:
    """The demo's shell task as shipped, and a copy whose solution is the attack."""
    shell = ROOT / "tasks" / "task_json_demo" / "examples" / "shell"
    honest = root / "examples" / "shell" / SHELL_TASK
    shutil.copytree(shell / SHELL_TASK, honest)
    attack = root / "examples" / "shell" / ATTACK_TASK
    shutil.copytree(honest, attack)
    (attack / f"{SHELL_TASK}.json").unlink()
    task = json.loads((honest / f"{SHELL_TASK}.json").read_text())
    task["id"] = ATTACK_TASK
    task["instruction"] += " (late)"
    task["solution"] = [{"action": "run_command", "arguments": {"command": LATE_WRITER}}]
    (attack / f"{ATTACK_TASK}.json").write_text(json.dumps(task))
    (root / "test_all.json").write_text(json.dumps({"shell": [SHELL_TASK, ATTACK_TASK]}))
    return root


def test_a_process_left_running_forges_no_verified_pass(tmp_path: Path) -> None:
    suite = attack_suite(tmp_path / "suite")
    out = tmp_path / "out"
    done = run_replayed(suite, out, tmp_path)
    assert done.returncode == 0, f"{done.stdout}\n{done.stderr}"
    rows = {r.task_id: r for r in read_episodes(out).itertuples()}
    assert len(rows) == 2, list(rows)
    honest, late = rows[SHELL_TASK], rows[ATTACK_TASK]
    assert (honest.success, honest.grader_trusted) == (True, True), honest.grader_untrusted_reason
    assert late.attribution == "agent" and late.attempt == 0, late.error
    assert not (late.success and late.grader_trusted), "a forged pass said verified"
    if late.success:  # only the thawed grade can see build.sh
        assert "only with the agent's" in late.grader_untrusted_reason
