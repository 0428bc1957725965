"""A submitted run's results reach the submitting machine as its episodes finish (issue 26).

A head hosting ``local=2`` is started with ``crabray cluster start-head`` in a
home of its own; the "laptop" is another folder that submits to its Job
Submission API. While a followed run goes on, the episodes already finished
are copied into ``./results`` here; when it ends the copy is exact.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator

import pytest

from crabray.results import list_runs, read_episodes
from tests.cluster.conftest import CrabrayHead, crabray_head, ray_start_head
from tests.conftest import serve_mock_llm

pytestmark = [pytest.mark.ray, pytest.mark.slow]

SUITE = textwrap.dedent(
    """
    from crabray import BenchmarkConfig, EnvironmentConfig, Task
    from crabray.actions import FILE_ACTIONS, SHELL_ACTIONS, path_exists, run_command, write_file

    BOX = EnvironmentConfig(name="box", action_space=[*FILE_ACTIONS, *SHELL_ACTIONS])
    bench = BenchmarkConfig(
        name="paced",
        environments=[BOX],
        tasks=[
            Task(
                id="quick",
                description="write done.txt",
                evaluator=path_exists(path="done.txt"),
                solution=[write_file(path="done.txt", content="x")],
            ),
            Task(
                id="slow",
                description="wait, then write done.txt",
                evaluator=path_exists(path="done.txt"),
                solution=[
                    run_command(command="sleep 40", timeout_sec=60),
                    write_file(path="done.txt", content="x"),
                ],
            ),
        ],
    )
    """
)


@pytest.fixture(scope="module")
def head(tmp_path_factory: pytest.TempPathFactory) -> Iterator[CrabrayHead]:
    """A head hosting two local sandboxes, in a home of its own; the laptop's folder."""
    with crabray_head(tmp_path_factory.mktemp("jobs"), "paced.py", SUITE) as it:
        yield it


@pytest.mark.timeout(400)
def test_finished_episodes_are_copied_here_while_the_run_goes_on(head: CrabrayHead) -> None:
    results = head.laptop / "results"
    run = subprocess.Popen(
        [
            sys.executable, "-m", "crabray", "run", "paced.py", "--agent", "oracle",
            "--concurrency", "2", "--address", head.jobs, "--sync-every", "2",
        ],
        cwd=head.laptop, env=head.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    try:
        seen_during_run: list[str] = []
        deadline = time.monotonic() + 300
        while run.poll() is None and time.monotonic() < deadline:
            if results.is_dir() and list_runs(results):
                seen_during_run = sorted(read_episodes(results).task_id)
                if seen_during_run:
                    break
            time.sleep(0.5)
        still_running = run.poll() is None
        stdout, stderr = run.communicate(timeout=300)
    finally:
        run.kill()
    assert run.returncode == 0, stdout + stderr
    assert still_running and seen_during_run == ["quick"], (
        "the quick episode's row reached ./results here while the slow one still ran",
        seen_during_run,
        stderr,
    )
    assert "finished episodes are copied into results here every 2 s" in stderr
    assert "copied into results" in stderr.splitlines()[-1]
    assert "crabray view results --run" in stderr.splitlines()[-1]
    assert "crabray view" not in stdout, "the head's own paths are not offered to this machine"
    episodes = read_episodes(results)
    assert sorted(episodes.task_id) == ["quick", "slow"], "the last copy brings the rest"
    assert episodes.success.all()


@pytest.mark.timeout(300)
def test_following_a_detached_run_copies_its_results_here(head: CrabrayHead) -> None:
    submitted = head.cli(
        "run", "paced.py", "--agent", "oracle", "--task", "quick", "--address", head.jobs,
        "--detach", "--out", "elsewhere-results",
    )  # fmt: skip
    assert submitted.returncode == 0, submitted.stdout + submitted.stderr
    run_id = submitted.stdout.split("run id:")[1].split()[0]
    followed = head.cli("runs", "follow", run_id, "--address", head.jobs)
    assert followed.returncode == 0, followed.stdout + followed.stderr
    assert f"results of run {run_id} copied into elsewhere-results" in followed.stderr
    episodes = read_episodes(head.laptop / "elsewhere-results", run_id)
    assert list(episodes.task_id) == ["quick"]


@pytest.fixture
def mock_llm(head: CrabrayHead) -> Iterator[str]:
    """``crabray llm serve paced.py`` on a free port: a model that replays the solutions."""
    with serve_mock_llm("paced.py", head.laptop, head.env, head.laptop / "serve.log") as url:
        yield url


@pytest.mark.timeout(300)
def test_model_on_the_command_line_reaches_a_submitted_run(
    head: CrabrayHead, mock_llm: str
) -> None:
    """``--model`` goes to the run on the head: its rows, copied here, carry that model;
    one no selected agent would use is refused here, before anything is shipped."""
    agents = head.laptop / "agents.toml"
    agents.write_text(
        '[[agents]]\nname = "mock-llm"\nkind = "openai"\nmodel = "file-model"\n'
        f'base_url = "{mock_llm}"\n'
    )
    run = ["run", "paced.py", "--task", "quick", "--address", head.jobs, "--out", "llm-results"]
    done = head.cli(*run, "--agent-config", "agents.toml", "-a", "mock-llm", "-m", "cli-model")
    assert done.returncode == 0, done.stdout + done.stderr
    episodes = read_episodes(head.laptop / "llm-results")
    assert list(episodes.model) == ["cli-model"]
    assert episodes.success.all()
    refused = head.cli(*run, "-a", "oracle", "-m", "cli-model")
    assert refused.returncode == 2
    assert "--model: no selected agent uses a model (oracle" in refused.stderr
    assert "submitted" not in refused.stderr


@pytest.mark.timeout(300)
def test_a_cluster_started_later_on_the_head_machine_does_not_get_its_runs(
    head: CrabrayHead,
) -> None:
    """Ray's job supervisor gives a submitted run the cluster last started in the head's
    Ray folder (``ray_current_cluster``); a plain ``ray start --head`` run afterwards on
    the head's machine, in Ray's shared folder, must not receive the head's runs (they
    failed there, for want of their files or of the head's token)."""
    # A user's own open head: no token (whatever an earlier test left in os.environ).
    mine = {k: v for k, v in head.env.items() if k != "RAY_AUTH_TOKEN"}
    mine |= {"HOME": str(head.laptop), "RAY_AUTH_MODE": "disabled"}
    with ray_start_head(mine, shared_folder=True):
        done = head.cli(
            "run", "paced.py", "--agent", "oracle", "--task", "quick", "--address", head.jobs,
            "--out", "after-interloper",
        )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert list(read_episodes(head.laptop / "after-interloper").task_id) == ["quick"]
