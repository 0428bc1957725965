"""A task folder's grading against an agent that attacks it, replayed by an ordinary LLM agent.

The agent (the offline model replaying each task's ``solution.sh``) leaves a
process running that writes the answer only once grading has begun (the
scorer writes ``/outputs/trajectory.json`` just before ``eval.py`` runs): the
state it left never holds the answer. Frozen from the end of its turn, the
process cannot write it; graded once more with it running, a pass would be
unverified. Either way no verified pass, and the row is the agent's.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from crabray.results import read_episodes
from tests.backends.docker.dockerd import require_env_image
from tests.conftest import run_replayed
from tests.formats.conftest import write_task_folder

pytestmark = [pytest.mark.ray, pytest.mark.slow]

LATE_WRITER = (
    "nohup sh -c 'while true; do if [ -e /outputs/trajectory.json ]; then "
    "echo hello > /workspace/answer.txt; fi; done' >/dev/null 2>&1 &\n"
)


def test_a_process_left_running_forges_no_verified_pass(tmp_path: Path) -> None:
    require_env_image("task-base")
    suite = tmp_path / "suite"
    write_task_folder(suite / "hello")
    write_task_folder(
        suite / "late-writer",
        files={
            "task.md": "Write the word hello into /workspace/answer.txt (late).\n",
            "solution.sh": LATE_WRITER,
        },
    )
    out = tmp_path / "out"
    done = run_replayed(suite, out, tmp_path)
    assert done.returncode == 0, f"{done.stdout}\n{done.stderr}"
    rows = {r.task_id: r for r in read_episodes(out).itertuples()}
    honest, late = rows["hello"], rows["late-writer"]
    assert (honest.success, honest.grader_trusted) == (True, True), honest.grader_untrusted_reason
    assert late.attribution == "agent" and late.attempt == 0, late.error
    assert not (late.success and late.grader_trusted), "a forged pass said verified"
    if late.score > 0.5:  # only the thawed grade can see hello
        assert late.grader_trusted is False
        assert "only with the agent's" in late.grader_untrusted_reason
