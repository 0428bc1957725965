"""``crabray export``: a results root of several suites, each format read back by its tool.

The root is written as a run writes it (``ResultSink``), with what a real sweep
holds: two suites, a scripted agent and an LLM agent with its conversation and
token usage, repeated epochs, and episodes that are the benchmark's and the
infrastructure's errors. Each export is read by Inspect AI's, Harbor's and
Hugging Face's own readers (``tests/readers.py``), and the numbers they see
are checked against crabray's leaderboard of the same rows. A real run,
exported by the real command, is in ``test_export_run.py``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from crabray.core.result import (
    ConversationMessage,
    EpisodeRecord,
    EpisodeResult,
    StepRecord,
    TerminationReason,
    ToolCallRecord,
    conversation_json,
)
from crabray.results import ResultSink, RunManifest, leaderboard, read_episodes, write_manifest
from tests.conftest import crabray
from tests.results.exported import atif_trajectories, dataset_rows, inspect_logs

pytestmark = pytest.mark.slow  # the first use of each reader installs it (tests/readers.py)

RUN = "20261123-075300-3fa2c1"
START = datetime(2026, 11, 23, 7, 53, tzinfo=UTC)
SCRIPTED_TASKS = 12
"""Tasks of suite alpha the scripted agent ran: enough lines that the LLM's come after the
first part ``datasets`` reads when parts are small."""


def _episode(
    suite: str,
    task: str,
    agent: str,
    reason: TerminationReason,
    *,
    epoch: int = 0,
    model: str | None = None,
    messages: list[ConversationMessage] | None = None,
    calls: Sequence[tuple[str, str, str | None]] = (),
    **fields: object,
) -> EpisodeRecord:
    """One episode of run ``RUN``: ``calls`` are its steps' (action, arguments, error)."""
    result = EpisodeResult(
        run_id=RUN,
        suite=suite,
        task_id=task,
        agent=agent,
        model=model,
        epoch=epoch,
        termination_reason=reason,
        success=reason is TerminationReason.SUCCESS,
        score=1.0 if reason is TerminationReason.SUCCESS else 0.0,
        steps=len(calls),
        description=f"do {task}",
        graph_json=json.dumps({"nodes": [f"done({task})"], "edges": []}),
        conversation_json=conversation_json(messages or [], 1 << 20),
        started_at=START,
        finished_at=START + timedelta(seconds=30),
        **fields,  # type: ignore[arg-type]
    )
    steps = [
        StepRecord(
            episode_id=result.episode_id,
            run_id=RUN,
            task_id=task,
            agent=agent,
            epoch=epoch,
            step=index,
            env="box",
            action=action,
            arguments_json=arguments,
            result="" if error else f"{action} done",
            error=error,
            timestamp=START + timedelta(seconds=index + 1),
        )
        for index, (action, arguments, error) in enumerate(calls)
    ]
    return EpisodeRecord(result=result, steps=steps)


def _conversation(task: str) -> list[ConversationMessage]:
    """An LLM agent's conversation: it writes a file, reads it back, then stops."""
    write = ToolCallRecord(id="c1", name="write_file", arguments='{"path": "a", "content": "x"}')
    read = ToolCallRecord(id="c2", name="read_file", arguments='{"path": "a"}')
    return [
        ConversationMessage(role="system", content="You operate a computer."),
        ConversationMessage(role="user", content=f"do {task}"),
        ConversationMessage(
            role="assistant", tool_calls=[write], model="gpt-test", tokens_in=300, tokens_out=40,
            cost_usd=0.001, latency_sec=1.5,
        ),
        ConversationMessage(role="tool", tool_call_id="c1", content="wrote 1 character"),
        ConversationMessage(
            role="assistant", tool_calls=[read], model="gpt-test", tokens_in=400, tokens_out=30,
            cost_usd=0.002,
        ),
        ConversationMessage(role="tool", tool_call_id="c2", content="x"),
        ConversationMessage(
            role="assistant", content="done", model="gpt-test", tokens_in=500, tokens_out=5,
            cost_usd=0.003,
        ),
    ]  # fmt: skip


MODEL = ([1.5, 0.25, 0.75], 2, 1, 4.5)
"""The LLM agent's model columns: each call's latency, retries, 429s, seconds waited for the
model limiter (and before retries)."""


def _llm(suite: str, task: str, reason: TerminationReason, **fields: object) -> EpisodeRecord:
    """An episode of the LLM agent 'writer': its conversation, its calls, its usage."""
    return _episode(
        suite, task, "writer", reason, model="gpt-test", messages=_conversation(task),
        calls=[("write_file", '{"path": "a", "content": "x"}', None),
               ("read_file", '{"path": "a"}', None)],
        tokens_in=1200, tokens_out=75, model_calls=3, cost_usd=0.006, wall_time_sec=30.0,
        model_latencies_sec=MODEL[0], model_retries=MODEL[1], model_rate_limited=MODEL[2],
        model_wait_sec=MODEL[3], **fields,
    )  # fmt: skip


def _records() -> list[EpisodeRecord]:
    """Two suites; a scripted agent over two epochs, an LLM agent; errors of each kind."""
    passed, failed = TerminationReason.SUCCESS, TerminationReason.AGENT_COMPLETE
    scripted = [
        _episode("alpha", f"a{task:02d}", "scripted", passed if task % 3 else failed,
                 epoch=epoch, calls=[("run_command", '{"command": "true"}', None)])
        for task in range(SCRIPTED_TASKS)
        for epoch in (0, 1)
    ]  # fmt: skip
    return [
        *scripted,
        _episode("beta", "b-setup", "scripted", TerminationReason.SETUP_ERROR,
                 error="setup.sh exited 1", error_type="SetupError"),
        _episode("beta", "b-ok", "scripted", passed,
                 calls=[("run_command", "not json", "exit status 2")]),
        _llm("alpha", "a00", passed),
        _llm("alpha", "a01", failed),
        _llm("beta", "b-ok", passed),
        _llm("beta", "b-setup", TerminationReason.ENV_ERROR, error="docker engine unreachable",
             error_type="SandboxError"),
    ]  # fmt: skip


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A results root holding one run of two suites, as ``crabray run`` writes it."""
    out = tmp_path_factory.mktemp("results")
    ResultSink(out, RUN).write(_records())
    manifest = RunManifest(
        run_id=RUN, suite="suites/", suite_name="two suites", agents=["scripted", "writer"],
        crabray_version="0", created_at=START,
    )  # fmt: skip
    write_manifest(out, manifest)
    return out


def _export(root: Path, fmt: str, out: Path) -> str:
    done = crabray("export", "latest", "--format", fmt, "--from", str(root), "--out", str(out))
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def test_inspect_reads_one_log_per_suite_and_agent_with_the_leaderboards_numbers(
    root: Path, tmp_path: Path
) -> None:
    said = _export(root, "inspect", tmp_path / "logs")
    assert "wrote 4 Inspect eval logs (30 episodes)" in said
    assert f"inspect view --log-dir {tmp_path / 'logs'}" in said
    logs = {(log["task"], log["solver"]): log for log in inspect_logs(tmp_path / "logs")}
    assert sorted(logs) == [
        ("alpha", "scripted"), ("alpha", "writer"), ("beta", "scripted"), ("beta", "writer")
    ]  # fmt: skip

    # Epochs: Inspect counts them from 1; each task's two episodes are two samples.
    alpha = logs["alpha", "scripted"]
    assert (alpha["model"], alpha["status"], alpha["epochs"], alpha["total"]) == (
        "crabray/scripted", "success", 2, 2 * SCRIPTED_TASKS
    )  # fmt: skip
    assert sorted({(s["id"], s["epoch"]) for s in alpha["samples"]})[:2] == [("a00", 1), ("a00", 2)]
    first = next(s for s in alpha["samples"] if s["id"] == "a01")
    assert first["scores"] == {"success": "C", "score": 1.0}
    assert first["roles"] == ["user", "assistant", "tool"] and first["calls"] == ["run_command"]

    # Every rate is the leaderboard's: errors of the benchmark and of the infrastructure are
    # errored samples, not scored, and in no denominator.
    board = leaderboard(read_episodes(root), by=("agent", "model", "suite"))
    for row in board.to_dict("records"):
        log = logs[row["suite"], row["agent"]]
        assert log["metrics"]["success"]["accuracy"] == pytest.approx(row["success_rate"])
        assert log["metrics"]["score"]["mean"] == pytest.approx(row["mean_score"])
        assert log["completed"] == row["episodes"]
        assert log["total"] == row["episodes"] + row["benchmark_errors"] + row["infra_errors"]
    setup = next(s for s in logs["beta", "scripted"]["samples"] if s["id"] == "b-setup")
    assert setup["scores"] is None and setup["attribution"] == "benchmark"
    assert setup["error"].startswith("benchmark error, not the agent's (not scored): setup_error")
    broken = next(s for s in logs["beta", "scripted"]["samples"] if s["id"] == "b-ok")
    assert broken["tool_results"] == ["exit status 2"] and broken["scores"]["success"] == "C"
    infra = next(s for s in logs["beta", "writer"]["samples"] if s["id"] == "b-setup")
    assert infra["scores"] is None and "docker engine unreachable" in infra["error"]

    # The LLM agent's conversation, its calls and results, and what it cost.
    writer = logs["alpha", "writer"]
    assert writer["model"] == "gpt-test"
    assert writer["usage"] == {"gpt-test": [2400, 150, 2550, pytest.approx(0.012)]}
    solved = next(s for s in writer["samples"] if s["id"] == "a00")
    assert solved["roles"] == [
        "system",
        "user",
        "assistant",
        "tool",
        "assistant",
        "tool",
        "assistant",
    ]
    assert solved["calls"] == ["write_file", "read_file"]
    assert solved["tool_results"] == ["wrote 1 character", "x"]
    assert solved["output"] == "done"
    assert solved["usage"] == {"gpt-test": [1200, 75, 1275, pytest.approx(0.006)]}
    # Its model's calls in the metadata; its waits for the model out of the working time.
    assert solved["model"] == list(MODEL)
    assert solved["times"] == [30.0, 25.5]


def test_harbor_reads_one_trajectory_per_episode(root: Path, tmp_path: Path) -> None:
    said = _export(root, "atif", tmp_path / "atif")
    assert "wrote 30 episodes as ATIF trajectories" in said
    found = atif_trajectories(tmp_path / "atif")
    assert len(found) == 30
    assert all(t["valid"] and not t["errors"] for t in found), [t["errors"] for t in found]
    assert len({t["episode_id"] for t in found}) == 30
    by_trial = {t["trial"]: t for t in found}

    llm = by_trial["a00__writer__0"]
    assert (llm["schema"], llm["agent"], llm["model"]) == ("ATIF-v1.7", "writer", "gpt-test")
    assert llm["sources"] == ["system", "user", "agent", "agent", "agent"]
    assert llm["calls"] == ["write_file", "read_file"]
    assert llm["answered"] == ["c1", "c2"] and llm["observations"] == ["wrote 1 character", "x"]
    assert llm["step_tokens"] == [[300, 40], [400, 30], [500, 5]]
    assert llm["final"] == [1200, 75, pytest.approx(0.006), 5]
    assert (llm["crabray"]["success"], llm["crabray"]["attribution"]) == (True, "agent")
    model = [llm["final_extra"][k] for k in ("model_retries", "model_rate_limited")]
    assert model == [2, 1] and llm["final_extra"]["model_wait_sec"] == 4.5
    assert llm["crabray"]["model_latencies_sec"] == MODEL[0]

    scripted = by_trial["b-ok__scripted__0"]
    assert scripted["sources"] == ["user", "agent"] and scripted["calls"] == ["run_command"]
    assert scripted["observations"] == ["error: exit status 2"]
    setup = by_trial["b-setup__scripted__0"]
    assert setup["sources"] == ["user"] and setup["crabray"]["attribution"] == "benchmark"
    assert setup["crabray"]["error"] == "setup.sh exited 1"


def test_every_episode_column_is_a_field_of_each_jsonl_line(root: Path, tmp_path: Path) -> None:
    """A column added to the episode rows is not dropped from the export unnoticed."""
    out = tmp_path / "run.jsonl"
    _export(root, "jsonl", out)
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    columns = set(EpisodeResult.model_fields) - {"steps", "conversation_json"}
    assert all(columns - set(line) == set() for line in lines), columns - set(lines[0])
    writer = next(line for line in lines if (line["agent"], line["task_id"]) == ("writer", "a00"))
    model = ("model_latencies_sec", "model_retries", "model_rate_limited", "model_wait_sec")
    assert [writer[column] for column in model] == list(MODEL)


def test_datasets_loads_every_episode_whatever_its_part_size(root: Path, tmp_path: Path) -> None:
    out = tmp_path / "run.jsonl"
    said = _export(root, "jsonl", out)
    assert "wrote 30 episodes" in said
    assert len(out.read_text().splitlines()) == 30
    # By default datasets reads 10 MB first; with small parts, every part after the first
    # is cast to the types the first gave: a field null or empty there must not be elsewhere.
    for chunksize in (0, 4096):
        loaded = dataset_rows(out, tmp_path / f"hf-{chunksize}", chunksize)
        rows = {(r["suite"], r["agent"], r["task_id"], r["epoch"]): r for r in loaded["rows"]}
        assert len(rows) == 30
        llm = rows["alpha", "writer", "a00", 0]
        assert llm["roles"] == [
            "system",
            "user",
            "assistant",
            "tool",
            "assistant",
            "tool",
            "assistant",
        ]
        assert llm["calls"] == ["write_file", "read_file"] and llm["tokens"] == [1200, 75]
        assert llm["actions"] == ["write_file", "read_file"]
        infra = rows["beta", "writer", "b-setup", 0]
        assert (infra["attribution"], infra["error"]) == (
            "infrastructure",
            "docker engine unreachable",
        )
        assert rows["alpha", "scripted", "a05", 1]["actions"] == ["run_command"]
        # The model's columns, typed from the first part whatever its size.
        assert llm["model"] == list(MODEL)
        assert rows["alpha", "scripted", "a05", 1]["model"] == [[], 0, 0, 0.0]
    assert {"steps", "messages", "evaluators", "attribution"} <= set(loaded["features"])


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (
            ["export", "20990101-000000-abcdef", "--format", "jsonl"],
            "no run 20990101-000000-abcdef in",
        ),
        (["export", "not/a/run", "--format", "jsonl"], "is not usable as a directory name"),
        (["export", "latest", "--format", "parquet"], "'parquet' is not one of"),
    ],
    ids=["unknown-run", "bad-run-id", "bad-format"],
)
def test_bad_input_is_one_message_and_exit_2(
    root: Path, tmp_path: Path, args: list[str], said: str
) -> None:
    done = crabray(*args, "--from", str(root), "--out", str(tmp_path / "x"))
    assert done.returncode == 2, done.stdout + done.stderr
    assert said in done.stderr and "Traceback" not in done.stderr
    assert not (tmp_path / "x").exists()


def test_a_file_where_a_folder_of_logs_goes_and_two_roots_are_refused(
    root: Path, tmp_path: Path
) -> None:
    taken = tmp_path / "taken"
    taken.write_text("mine")
    done = crabray("export", "latest", "-f", "inspect", "--from", str(root), "--out", str(taken))
    assert done.returncode == 2 and "is a file; --format inspect writes a folder" in done.stderr
    assert taken.read_text() == "mine"
    done = crabray("export", "latest", str(root), "--from", str(tmp_path), "-f", "atif")
    assert done.returncode == 2 and "name two results roots; give one" in done.stderr


def test_a_root_without_runs_says_how_to_make_one(tmp_path: Path) -> None:
    done = crabray("export", "latest", "--format", "inspect", "--from", str(tmp_path / "none"))
    assert done.returncode == 2
    assert "no runs in" in done.stderr and "crabray run tasks/demo" in done.stderr


def test_an_export_loads_neither_ray_nor_the_authoring_model(root: Path, tmp_path: Path) -> None:
    from tests.test_cli_imports import AUTHORING, RAY, loaded_by

    out = tmp_path / "run.jsonl"
    loaded = loaded_by("export", "latest", "-f", "jsonl", "--from", str(root), "--out", str(out))
    assert "crabray.results.export._jsonl" in loaded and out.is_file()
    assert not loaded & {*AUTHORING, *RAY}
