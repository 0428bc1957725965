"""An export read back by each tool's own reader, summarised as JSON for the tests to assert on.

Each program runs in the tool's venv (``tests/readers.py``) and prints what the
reader saw: no crabray code, no schema of ours, is involved in the reading.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.readers import DATASETS, HARBOR, INSPECT, read_back

INSPECT_PROGRAM = """
import json, sys
from inspect_ai.log import list_eval_logs, read_eval_log

def usage(found):
    return {name: [u.input_tokens, u.output_tokens, u.total_tokens, u.total_cost]
            for name, u in found.items()}

logs = []
for info in list_eval_logs(sys.argv[1], recursive=False):
    log = read_eval_log(info)
    logs.append({
        "file": info.name.rsplit("/", 1)[-1],
        "task": log.eval.task,
        "model": log.eval.model,
        "solver": log.eval.solver,
        "run_id": log.eval.metadata["crabray_run_id"],
        "status": log.status,
        "epochs": log.eval.config.epochs,
        "total": log.results.total_samples,
        "completed": log.results.completed_samples,
        "metrics": {s.name: {m: v.value for m, v in s.metrics.items()}
                    for s in log.results.scores},
        "usage": usage(log.stats.model_usage),
        "samples": [{
            "id": s.id,
            "epoch": s.epoch,
            "input": s.input,
            "scores": {k: v.value for k, v in (s.scores or {}).items()} if s.scores else None,
            "error": s.error.message if s.error else None,
            "roles": [m.role for m in s.messages],
            "calls": [c.function for m in s.messages if m.role == "assistant"
                      for c in (m.tool_calls or [])],
            "tool_results": [m.text for m in s.messages if m.role == "tool"],
            "output": s.output.completion,
            "usage": usage(s.model_usage),
            "attribution": s.metadata["attribution"],
            "times": [s.total_time, s.working_time],
            "model": [s.metadata[k] for k in ("model_latencies_sec", "model_retries",
                                              "model_rate_limited", "model_wait_sec")],
        } for s in log.samples],
    })
print(json.dumps(logs))
"""

ATIF_PROGRAM = """
import json, pathlib, sys
from harbor.models.trajectories import Trajectory
from harbor.utils.trajectory_validator import TrajectoryValidator

found = []
for path in sorted(pathlib.Path(sys.argv[1]).glob("*/agent/trajectory.json")):
    trajectory = Trajectory.model_validate_json(path.read_text())
    validator = TrajectoryValidator()
    valid = validator.validate(str(path))
    final = trajectory.final_metrics
    found.append({
        "trial": path.parent.parent.name,
        "valid": valid,
        "errors": validator.get_errors(),
        "schema": trajectory.schema_version,
        "agent": trajectory.agent.name,
        "model": trajectory.agent.model_name,
        "episode_id": trajectory.trajectory_id,
        "sources": [step.source for step in trajectory.steps],
        "calls": [c.function_name for step in trajectory.steps for c in (step.tool_calls or [])],
        "answered": [r.source_call_id for step in trajectory.steps if step.observation
                     for r in step.observation.results],
        "observations": [r.content for step in trajectory.steps if step.observation
                         for r in step.observation.results],
        "step_tokens": [[step.metrics.prompt_tokens, step.metrics.completion_tokens]
                        for step in trajectory.steps if step.metrics],
        "final": [final.total_prompt_tokens, final.total_completion_tokens,
                  final.total_cost_usd, final.total_steps],
        "final_extra": final.extra,
        "crabray": trajectory.extra["crabray"],
    })
print(json.dumps(found))
"""

DATASETS_PROGRAM = """
import json, sys
from datasets import load_dataset

path, cache, chunk = sys.argv[1], sys.argv[2], int(sys.argv[3])
options = {"chunksize": chunk} if chunk else {}
rows = load_dataset("json", data_files=path, split="train", cache_dir=cache, **options)
print(json.dumps({
    "features": sorted(rows.features),
    "rows": [{
        "episode_id": row["episode_id"],
        "suite": row["suite"],
        "agent": row["agent"],
        "task_id": row["task_id"],
        "epoch": row["epoch"],
        "attribution": row["attribution"],
        "success": row["success"],
        "error": row["error"],
        "tokens": [row["tokens_in"], row["tokens_out"]],
        "actions": [step["action"] for step in row["steps"]],
        "roles": [message["role"] for message in row["messages"]],
        "calls": [call["name"] for message in row["messages"] for call in message["tool_calls"]],
        "model": [row["model_latencies_sec"], row["model_retries"], row["model_rate_limited"],
                  row["model_wait_sec"]],
    } for row in rows],
}))
"""


def inspect_logs(folder: Path) -> list[dict[str, Any]]:
    """Every eval log ``inspect_ai.log.list_eval_logs`` finds in ``folder``, as read."""
    logs: list[dict[str, Any]] = read_back(INSPECT, INSPECT_PROGRAM, str(folder))
    return logs


def atif_trajectories(folder: Path) -> list[dict[str, Any]]:
    """Every trajectory under ``folder``, as Harbor's ``Trajectory`` model reads it."""
    found: list[dict[str, Any]] = read_back(HARBOR, ATIF_PROGRAM, str(folder))
    return found


def dataset_rows(path: Path, cache: Path, chunksize: int = 0) -> dict[str, Any]:
    """The JSON Lines file as ``datasets.load_dataset("json", ...)`` loads it (``chunksize``
    bytes a part when given: each part after the first is cast to the first's types)."""
    loaded: dict[str, Any] = read_back(
        DATASETS, DATASETS_PROGRAM, str(path), str(cache), str(chunksize)
    )
    return loaded
