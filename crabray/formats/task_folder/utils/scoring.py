"""Checkpoints, results and scoring strategies of the task-folder format.

This file runs INSIDE a task's container as ``/utils/scoring.py`` (Debian's
python3, standard library only, crabray is not installed there), so that an
``evaluator.py`` written for the format's original base image runs unmodified::

    from scoring import Checkpoint, Result, bonus_for_completing_final

    def grade_checkpoints(trajectory=""):
        return Result([Checkpoint(1, 1), Checkpoint(2, 0)], bonus_for_completing_final)

A strategy maps the checkpoint list to ``{"total": int, "result": int}``; the
default sums both. crabray's ``eval.py`` writes ``Result.to_dict()`` as JSON
and the host turns it into the episode's score.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

Score = dict[str, int]
Strategy = Callable[[list["Checkpoint"]], Score]


class CheckpointError(TypeError, ValueError):
    """A checkpoint's points are invalid (not an int, negative, or more earned than available).

    Both a ``TypeError`` and a ``ValueError``, as the original raises one or the other."""


@dataclass
class Checkpoint:
    """Points available (``total``) and earned (``result``) for one rubric item.

    ``True``/``False`` count as 1/0, as in the original format.

    Raises:
        CheckpointError: A value is not an int, is negative, or ``result`` exceeds ``total``.
    """

    total: int
    result: int

    def __post_init__(self) -> None:
        for name in ("total", "result"):
            value = getattr(self, name)
            # The original accepts bools (an int subclass), and evaluators pass them:
            # ``Checkpoint(1, passed)``. They count as 1 and 0.
            if isinstance(value, bool):
                setattr(self, name, int(value))
                continue
            if not isinstance(value, int):
                raise CheckpointError(
                    f"Checkpoint {name} must be an int, got {type(value).__name__} {value!r}"
                )
            if value < 0:
                raise CheckpointError(f"Checkpoint {name} must not be negative, got {value}")
        if self.result > self.total:
            raise CheckpointError(
                f"Checkpoint result {self.result} is greater than its total {self.total}"
            )

    @property
    def complete(self) -> bool:
        """Whether every point of this checkpoint was earned."""
        return self.result == self.total


def _sum_scores(checkpoints: list[Checkpoint]) -> Score:
    return {
        "total": sum(cp.total for cp in checkpoints),
        "result": sum(cp.result for cp in checkpoints),
    }


def _first_gets_full_credit(checkpoints: list[Checkpoint]) -> Score:
    score = _sum_scores(checkpoints)
    score["result"] += checkpoints[0].total - checkpoints[0].result
    return score


class Result:
    """The checkpoints an evaluator graded and how they combine into a final score.

    Args:
        checkpoints: The graded checkpoints, in rubric order.
        scoring_strategy: Maps the checkpoints to ``{"total", "result"}``; the sum when None.
    """

    def __init__(
        self, checkpoints: list[Checkpoint], scoring_strategy: Strategy | None = None
    ) -> None:
        self.checkpoints = checkpoints
        self.scoring_strategy: Strategy = scoring_strategy or _sum_scores

    def __repr__(self) -> str:
        return f"Result(checkpoints={self.checkpoints!r})"

    @property
    def final_score(self) -> Score:
        """``{"total": ..., "result": ...}`` after the scoring strategy."""
        return self.scoring_strategy(self.checkpoints)

    def to_dict(self) -> dict[str, Any]:
        """The JSON shape ``eval.py`` writes: checkpoints and the final score."""
        return {
            "checkpoints": [{"total": cp.total, "result": cp.result} for cp in self.checkpoints],
            "final_score": self.final_score,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any], scoring_strategy: Strategy | None = None) -> Result:
        """Rebuild a result from ``to_dict()``'s shape (the final score is recomputed).

        Raises:
            ValueError: ``data`` has no ``checkpoints`` list or a checkpoint is invalid.
        """
        if not isinstance(data, dict) or not isinstance(data.get("checkpoints"), list):
            raise ValueError("Result.from_dict needs a dict with a 'checkpoints' list")
        checkpoints = []
        for index, item in enumerate(data["checkpoints"], start=1):
            if not isinstance(item, dict) or set(item) - {"total", "result"}:
                raise ValueError(
                    f"checkpoint {index} must be an object with 'total' and 'result', got {item!r}"
                )
            # A missing value goes in as None for __post_init__ to reject with a clear message.
            checkpoints.append(Checkpoint(item.get("total"), item.get("result")))  # type: ignore[arg-type]
        return cls(checkpoints, scoring_strategy)


def bonus_for_completing_final(checkpoints: list[Checkpoint]) -> Score:
    """Full credit for the whole task when the last checkpoint earned all its points.

    For tasks whose last checkpoint proves the whole job was done, however it was done.
    """
    if checkpoints and checkpoints[-1].complete:
        total = sum(cp.total for cp in checkpoints)
        return {"total": total, "result": total}
    return _sum_scores(checkpoints)


# The seed documentation's name for the same strategy.
bonus_for_completing_all = bonus_for_completing_final


def bonus_for_completing_any(checkpoints: list[Checkpoint]) -> Score:
    """Full credit for the first checkpoint when any checkpoint earned all its points.

    The first checkpoint often checks the trajectory for a step every later
    checkpoint depends on: any later success implies it happened.
    """
    if checkpoints and any(cp.complete for cp in checkpoints):
        return _first_gets_full_credit(checkpoints)
    return _sum_scores(checkpoints)


def bonus_for_completing_any_of_given_checkpoints(given_checkpoints: list[int]) -> Strategy:
    """A strategy: full credit for the first checkpoint when any of ``given_checkpoints`` is full.

    Args:
        given_checkpoints: 1-based indices of the checkpoints that imply the first one.

    Raises:
        ValueError: An index is not a positive int (now), or is beyond the
            checkpoint list (when the score is computed).
    """
    indices = list(given_checkpoints)
    for index in indices:
        if not isinstance(index, int) or isinstance(index, bool) or index < 1:
            raise ValueError(
                "bonus_for_completing_any_of_given_checkpoints takes 1-based checkpoint "
                f"indices, got {index!r}"
            )

    def scoring_strategy(checkpoints: list[Checkpoint]) -> Score:
        if not checkpoints:
            return _sum_scores(checkpoints)
        beyond = [index for index in indices if index > len(checkpoints)]
        if beyond:
            raise ValueError(
                f"bonus_for_completing_any_of_given_checkpoints: checkpoint index {beyond[0]} "
                f"is out of range, the result has {len(checkpoints)} checkpoint(s)"
            )
        if any(checkpoints[index - 1].complete for index in indices):
            return _first_gets_full_credit(checkpoints)
        return _sum_scores(checkpoints)

    return scoring_strategy
