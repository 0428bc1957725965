"""Grade one task against result files its author hands in: no agent, one sandbox run.

``crabray tasks grade`` runs the task's setup, puts each given file at its
sandbox path (the gold file as the result, or the untouched original), lets
the ``noop`` agent end the episode at once, and grades it as a run would. A
benchmark author checks a task this way in seconds: the gold answer must
score 1, the untouched one 0. Works for every suite format.
"""

from __future__ import annotations

import json
import logging
import os
from dataclasses import dataclass, field
from pathlib import Path

from crabray.agents.base import AgentSpec
from crabray.agents.scripted import NoopAgent
from crabray.backends import create_backend
from crabray.backends.base import Backend
from crabray.core import Action
from crabray.core.env import Env
from crabray.core.errors import ActionError, ConfigError
from crabray.core.result import EpisodeRecord
from crabray.episode import EpisodeSettings, run_episode
from crabray.formats import Suite
from crabray.formats.steps import closed_action

logger = logging.getLogger(__name__)

GRADE_RUN_ID = "grade"


@dataclass(frozen=True)
class ResultFile:
    """A file the author hands in: its bytes go to ``sandbox_path`` before grading
    (executable there when it is executable here)."""

    sandbox_path: str
    local_file: Path
    env: str | None = None


def parse_result_file(spec: str) -> ResultFile:
    """``[ENV:]SANDBOX_PATH=LOCAL_FILE`` as a ``ResultFile``.

    Raises:
        ConfigError: No ``=``, an empty side, or a local file that does not exist.
    """
    target, sep, local = spec.partition("=")
    if not sep or not target or not local:
        raise ConfigError(
            f"'{spec}' is not SANDBOX_PATH=LOCAL_FILE (e.g. /home/user/out.csv=gold.csv)",
            field="--result",
        )
    env, colon, path = target.partition(":")
    if not colon or "/" in env:
        env, path = "", target
    file = Path(local)
    if not file.is_file():
        raise ConfigError(f"no file '{local}' to hand in as {path}", field="--result")
    return ResultFile(path, file, env or None)


@dataclass
class Grade:
    """What grading found: the episode's record and a per-evaluator or per-checkpoint view."""

    record: EpisodeRecord
    breakdown: list[tuple[str, str]] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


def grade_task(
    suite: Suite,
    task_id: str,
    results: list[ResultFile],
    *,
    skip_setup: bool = False,
) -> Grade:
    """Run ``task_id``'s setup, hand in ``results``, and grade it without an agent.

    Args:
        suite: The loaded suite.
        task_id: The task to grade.
        results: Files put into the sandbox after the setup, before grading.
        skip_setup: Leave the task's own setup out (only the files are put in).

    Raises:
        ConfigError: No such task, or a result names an environment the task lacks.
    """
    entry = suite.entry(task_id)
    envs = entry.benchmark.task_environments(entry.task)
    names = [env.name for env in envs]
    for result in results:
        if result.env is not None and result.env not in names:
            raise ConfigError(
                f"the task has no environment '{result.env}' (it has {', '.join(names)})",
                field="--result",
            )
    hand_in = [_hand_in(result, names[0]) for result in results]
    setup = [] if skip_setup else list(entry.task.setup)
    task = entry.task.model_copy(update={"setup": [*setup, *hand_in]})
    backends: dict[str, Backend] = {}
    try:
        for env in envs:
            backends[env.name] = create_backend(env)
            backends[env.name].start()
        record = run_episode(
            entry.benchmark,
            task,
            NoopAgent(AgentSpec(name="grade", kind="noop")),
            backends,
            EpisodeSettings(run_id=GRADE_RUN_ID, suite=suite.name, agent="grade"),
        )
    finally:
        for backend in backends.values():
            backend.close()
    scorer = entry.task.scorer.name if entry.task.scorer is not None else None
    warnings = list(entry.task.metadata.get("warnings", []))
    return Grade(record, _breakdown(record, scorer), warnings)


def _hand_in(result: ResultFile, default_env: str) -> Action:
    data = result.local_file.read_bytes()
    env_name = result.env or default_env
    executable = os.access(result.local_file, os.X_OK)

    def put(env: Env) -> str:
        env.put_file(result.sandbox_path, data)
        if executable:  # a program handed in (an installed tool) stays one
            done = env.exec(["chmod", "+x", result.sandbox_path], timeout_sec=30)
            if not done.ok:
                raise ActionError(f"cannot make {result.sandbox_path} executable: {done.stderr}")
        return f"put {result.local_file} at {result.sandbox_path}"

    return closed_action(
        "hand_in_result",
        f"put {result.local_file} at {result.sandbox_path} in '{env_name}'",
        put,
    ).on(env_name)


def _breakdown(record: EpisodeRecord, scorer: str | None) -> list[tuple[str, str]]:
    """Each checkpoint's points, the scorer's score, or each evaluator-graph node passed."""
    result = record.result
    if result.checkpoints:
        return [
            (f"checkpoint {i}", f"{cp.result}/{cp.total}")
            for i, cp in enumerate(result.checkpoints, start=1)
        ]
    if scorer is not None:
        return [(scorer, f"{result.score:g}")]
    graph = json.loads(result.graph_json) if result.graph_json else {"nodes": []}
    passed = set(record.steps[-1].graph_passed) if record.steps else set()
    return [
        (str(label), "passed" if i in passed else "not passed")
        for i, label in enumerate(graph.get("nodes", []))
    ]
