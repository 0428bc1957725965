"""What an episode page opens with: the verdict, whose doing it is, and the cause.

Someone opens a failed episode to learn why it failed. The page answers on its first
screen, before the transcript: the outcome (``pass``, ``fail`` or ``error``), whose
doing it is (the row's ``attribution``: agent, benchmark or infrastructure) and the
cause, in as many of these parts as the row has:

- the error (its type and message);
- the evaluator that did not pass and on which state: the evaluators of the graph that
  were next to pass (their prerequisites passed, they did not) after the agent's last
  step, or the score a task's scorer gave;
- the setup's last lines, when the setup failed;
- the last step's output: its action and the tail of what it returned (or its error).

Long texts keep their last lines (where a failure usually is) and say how many came
before; the steps further down the page hold them whole.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from crabray.core.result import TerminationReason
from crabray.results.board.cells import is_missing
from crabray.results.board.trust import UNTRUSTED, row_trust, trust_text
from crabray.results.site._graph import Graph

logger = logging.getLogger(__name__)

PASS, FAIL, ERROR = "pass", "fail", "error"
"""The outcomes the site shows and filters by."""
ERROR_REASONS = frozenset(
    {
        TerminationReason.SETUP_ERROR,
        TerminationReason.ACTION_ERROR,
        TerminationReason.AGENT_ERROR,
        TerminationReason.ENV_ERROR,
        TerminationReason.SANDBOX_ERROR,
        TerminationReason.EVALUATOR_ERROR,
        TerminationReason.CANCELLED,
    }
)
"""Ways of ending that are an error rather than a graded failure (whoever caused it)."""
ATTRIBUTION_TEXT = {
    "agent": "the agent's doing: counted in its success rate",
    "benchmark": "the benchmark's doing, not the agent's: not scored, not retried",
    "infrastructure": "the infrastructure's doing, not the agent's: not scored, "
    "retried where a retry can help",
}
"""What each attribution means for the episode's score, as its page says it."""
TAIL_LINES = 10
"""Of a long text in the cause (an output, the setup's), the last this many lines: as
many as its box shows without scrolling, so the very last line is on the first screen."""
TAIL_CHARS = 2000
"""...and of those, at most the last this many characters."""
MESSAGE_CHARS = 300
"""Of the agent's message on its last step, the first this many characters."""
SCORER_NODE = "graded_by_scorer"
"""The label of ``crabray.core.task.graded_by_scorer``, the one node of a scorer-graded task's
graph (results read only the result model of core, so the label is written here)."""


def outcome_of(reason: str, success: bool, attribution: str) -> str:
    """``pass``, ``fail`` or ``error``: what the episode list filters by and a page's badge says.

    An episode is an error when it ended on one (setup, action, agent, sandbox,
    evaluator, infrastructure, an interrupt) or is not the agent's doing; its
    attribution then says whether it counts against the agent.
    """
    if attribution != "agent" or reason in ERROR_REASONS:
        return ERROR
    return PASS if success else FAIL


def graded_by_scorer(graph: Graph | None) -> bool:
    """Whether the graph is only the stand-in node of a task graded by its scorer.

    Such a node never passes: "0 of 1 evaluators passed" would contradict a
    solved episode, so the page shows the scorer's score instead of the graph.
    """
    return graph is not None and graph.labels == [SCORER_NODE]


def verdict(row: pd.Series, attribution: str, by_scorer: bool) -> dict[str, str]:
    """The line that says how the episode ended: solved or not, its score, what ended it.

    Success and score are the grade; the termination reason only says what stopped the
    episode (``agent_complete`` is the agent saying it is done, right or not).
    """
    reason = str(row["termination_reason"])
    if attribution != "agent":
        return {
            "css": "warn",
            "text": f"{attribution} error, not the agent's (not scored); ended by {reason}",
        }
    solved = bool(row["success"])
    graded = "graded by the task's scorer after the agent finished, " if by_scorer else ""
    return {
        "css": "ok" if solved else "bad",
        "text": f"{'solved' if solved else 'not solved'} ({graded}score "
        f"{float(row['score']):.2f}); ended by {reason}",
    }


def grade(row: pd.Series, attribution: str) -> dict[str, str] | None:
    """The line that says whether the grade is verified, and why not (None when the
    episode has no grade on the agent): what the leaderboard counted it as."""
    if attribution != "agent":
        return None
    trust = row_trust(_value(row, "grader_trusted"))
    reason = _value(row, "grader_untrusted_reason")
    text = trust_text(trust, None if is_missing(reason) else str(reason))
    return {"css": "warn" if trust == UNTRUSTED else "muted", "text": f"grade {text}"}


@dataclass(frozen=True)
class Tail:
    """The end of a long text: its last lines, and how many lines came before them."""

    text: str
    hidden_lines: int = 0


def tail(text: str, lines: int = TAIL_LINES, chars: int = TAIL_CHARS) -> Tail:
    """The last ``lines`` lines of ``text`` (at most ``chars`` characters of them)."""
    kept = text.rstrip("\n").split("\n")
    hidden = max(len(kept) - lines, 0)
    shown = "\n".join(kept[hidden:])
    if len(shown) > chars:
        shown = "…" + shown[-chars:]
    return Tail(shown, hidden)


@dataclass(frozen=True)
class LastCall:
    """One call of the last step: its action, where it ran, and the end of its output."""

    action: str
    env: str | None
    message: str | None
    output: Tail
    failed: bool


@dataclass(frozen=True)
class Evaluation:
    """Which evaluator did not pass, or what the task's scorer gave, and on which state.

    Attributes:
        pending: Labels of the evaluators next to pass that did not (graph-graded).
        passed: Evaluators passed, of ``total``.
        total: Evaluators in the graph (0 for a scorer-graded task).
        score: The scorer's score (scorer-graded), else None.
        points: (earned, total) checkpoint points the scorer gave, if it gave any.
        state: Which state it was judged on, as the page says it.
    """

    pending: list[str]
    passed: int
    total: int
    score: float | None
    points: tuple[int, int] | None
    state: str


@dataclass(frozen=True)
class Cause:
    """What an episode page shows under its verdict: the parts of the row that say why."""

    error: str | None = None
    error_type: str | None = None
    evaluation: Evaluation | None = None
    setup: Tail | None = None
    show_last_step: bool = False
    last_step: int | None = None
    last_calls: list[LastCall] = field(default_factory=list)


def _value(row: pd.Series, name: str) -> Any:
    value = row[name] if name in row.index else None
    return None if is_missing(value) else value


def pending_evaluators(graph: Graph, passed: set[int]) -> list[str]:
    """The evaluators that were next to pass and did not: every prerequisite passed, they
    did not (every not-passed one when none is, as on a graph with a cycle)."""
    before: dict[int, set[int]] = {node: set() for node in range(len(graph.labels))}
    for source, target in graph.edges:
        before[target].add(source)
    waiting = [node for node in before if node not in passed]
    frontier = [node for node in waiting if before[node] <= passed]
    return [graph.labels[node] for node in frontier or waiting]


def _state(steps: int, recorded: bool) -> str:
    """Which state the grade was given on, from the number of steps the agent took."""
    if steps == 0:
        return "the state setup left: the agent took no step"
    if not recorded:
        return "the state the agent left (its steps were not recorded)"
    return f"the state after step {steps}, the agent's last"


def _evaluation(
    row: pd.Series, graph: Graph | None, passed: set[int], steps: int, recorded: bool
) -> Evaluation | None:
    """The evaluator part of the cause; None when the row has no graph (older rows)."""
    if graph is None or not graph.labels:
        return None
    state = _state(steps, recorded)
    if graded_by_scorer(graph):
        checkpoints = _value(row, "checkpoints")
        points = None
        if checkpoints is not None and len(checkpoints):
            points = (
                sum(int(p["result"]) for p in checkpoints),
                sum(int(p["total"]) for p in checkpoints),
            )
        return Evaluation([], 0, 0, float(row["score"]), points, state)
    done = passed & set(range(len(graph.labels)))
    return Evaluation(
        pending_evaluators(graph, done), len(done), len(graph.labels), None, None, state
    )


def _last_calls(steps: pd.DataFrame) -> tuple[int | None, list[LastCall]]:
    """The last step's number (1-based) and its calls, each with the end of its output."""
    if steps.empty:
        return None, []
    number = int(steps["step"].max())
    calls = []
    for call in steps[steps["step"] == number].to_dict("records"):
        error = call.get("error")
        failed = error is not None and not is_missing(error)
        message = call.get("agent_message")
        message = None if message is None or is_missing(message) or not message else str(message)
        if message is not None and len(message) > MESSAGE_CHARS:
            message = message[:MESSAGE_CHARS] + "…"
        env = call.get("env")
        calls.append(
            LastCall(
                action=str(call["action"]),
                env=None if env is None or is_missing(env) else str(env),
                message=message,
                output=tail(str(error if failed else call.get("result") or "")),
                failed=failed,
            )
        )
    return number + 1, calls


def cause(
    row: pd.Series, graph: Graph | None, steps: pd.DataFrame, outcome: str, attribution: str
) -> Cause | None:
    """Why the episode did not pass, from its row and steps; None when it passed.

    Args:
        row: The episode's row.
        graph: Its evaluator graph, or None when it recorded none (or an unreadable one).
        steps: Its steps (one row per call), in step order; empty when it took none.
        outcome: Its ``outcome_of``.
        attribution: Whose doing it is.
    """
    if outcome == PASS:
        return None
    reason = str(row["termination_reason"])
    last_step, last_calls = _last_calls(steps)
    passed: set[int] = set()
    if not steps.empty:
        final = steps.iloc[-1]["graph_passed"]
        passed = set() if is_missing(final) else {int(node) for node in final}
    taken = int(_value(row, "steps") or 0) if last_step is None else last_step
    agents = attribution == "agent"
    evaluation = None
    if agents or reason == TerminationReason.EVALUATOR_ERROR:
        evaluation = _evaluation(row, graph, passed, taken, last_step is not None)
    setup_output = _value(row, "setup_output")
    setup = None
    if reason == TerminationReason.SETUP_ERROR and setup_output:
        setup = tail(str(setup_output))
    return Cause(
        error=_value(row, "error"),
        error_type=_value(row, "error_type"),
        evaluation=evaluation,
        setup=setup,
        show_last_step=agents or last_step is not None,
        last_step=last_step,
        last_calls=last_calls,
    )
