"""The format's ``summary.json``: the task's own fields plus a ``results`` object.

Built by the driver from the episode record (the ``Suite.record_files`` hook)
and written with the episode's artifacts at
``summaries/<run_id>/<agent>/<task_id>/summary.json`` (``summary.<epoch>.json``
for epochs after the first) under the output directory; a retried attempt
overwrites the earlier one.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

from crabray.core.result import EpisodeRecord, TerminationReason
from crabray.formats.suite import SuiteEntry

SUMMARIES_DIR = "summaries"

_STATES = {
    TerminationReason.SUCCESS: "success",
    TerminationReason.AGENT_COMPLETE: "success",
    TerminationReason.AGENT_FAIL: "fail",
    TerminationReason.MAX_STEPS: "max_steps_error",
    TerminationReason.TIMEOUT: "timeout",
    TerminationReason.SETUP_ERROR: "setup_error",
    TerminationReason.EVALUATOR_ERROR: "eval_error",
}
"""The format's run states; any other termination reason keeps its own name."""


def summary_path(record: EpisodeRecord) -> str:
    """Where the episode's summary goes, relative to the output directory."""
    result = record.result
    agent = re.sub(r"[^\w.-]", "_", result.agent)
    name = "summary.json" if result.epoch == 0 else f"summary.{result.epoch}.json"
    return f"{SUMMARIES_DIR}/{result.run_id}/{agent}/{result.task_id}/{name}"


def summary(raw: dict[str, Any], record: EpisodeRecord) -> dict[str, Any]:
    """The summary of one episode: the task file's fields and the ``results`` object."""
    result = record.result
    reason = result.termination_reason
    messages = []
    for step in record.steps:
        if step.agent_message:
            messages.append({"role": "assistant", "step": step.step, "content": step.agent_message})
        messages.append(
            {
                "role": "tool",
                "step": step.step,
                "action": step.action,
                "arguments": json.loads(step.arguments_json),
                "content": step.result,
                "error": step.error,
            }
        )
    eval_error = result.error if reason is TerminationReason.EVALUATOR_ERROR else None
    fields = {k: v for k, v in raw.items() if not k.startswith("_")}
    return {
        **fields,
        "results": {
            "score": result.score,
            "eval_error": eval_error,
            "state": _STATES.get(reason, reason.value),
            "termination_reason": reason.value,
            "error": result.error,
            "messages": messages,
            "total_tokens": result.tokens_in + result.tokens_out,
            "total_timing": result.wall_time_sec,
            "steps": result.steps,
            "run_id": result.run_id,
            "episode_id": result.episode_id,
            "agent": result.agent,
            "model": result.model,
            "epoch": result.epoch,
            "attempt": result.attempt,
            "warnings": raw.get("_warnings", []),
        },
    }


def summary_files(
    raws: dict[str, dict[str, Any]],
) -> Callable[[SuiteEntry, EpisodeRecord], dict[str, bytes]]:
    """The suite's ``record_files`` hook over the raw task files, by task id."""

    def files(entry: SuiteEntry, record: EpisodeRecord) -> dict[str, bytes]:
        raw = raws.get(entry.task.id, {})
        text = json.dumps(summary(raw, record), indent=2, default=str, ensure_ascii=False)
        return {summary_path(record): text.encode("utf-8")}

    return files
