"""``SubTask``: CRAB's task template, from which composed tasks are generated.

A subtask describes one step with placeholders (``attribute_dict``) and makes
its evaluator graph for given attribute values (``evaluator_generator``).
Composed-task datasets chain the graphs of several subtasks into one task.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from crabray.core.actions import Action


class SubTask(BaseModel):
    """A task template (CRAB's ``SubTask``).

    Args:
        id: Unique among the subtasks of a dataset.
        description: The instruction, with ``{attribute}`` placeholders.
        attribute_dict: Each attribute's type (or types), e.g. ``{"file": "file_path"}``.
        output_type: The type of what the subtask produces, e.g. ``"None"`` or ``"text"``.
        output_generator: Makes the output from the attributes, or ``"manual"``.
        evaluator_generator: Makes the evaluator graph from the attribute values.
        setup: Closed actions run before the agent starts.
        teardown: Closed actions run after the episode.
        extra_action: Actions added to the agent's action space.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    id: str = Field(min_length=1)
    description: str
    attribute_dict: dict[str, list[str]]
    output_type: str
    output_generator: Callable[..., str] | Literal["manual"] | None = None
    # Returns a networkx DiGraph of evaluators (Any here: networkx loads only when it runs).
    evaluator_generator: Callable[..., Any] | None = None
    setup: list[Action] = Field(default_factory=list)
    teardown: list[Action] = Field(default_factory=list)
    extra_action: list[Action] = Field(default_factory=list)

    def __hash__(self) -> int:
        """Subtasks are keyed by id, as in CRAB."""
        return hash(self.id)

    @field_validator("attribute_dict", mode="before")
    @classmethod
    def _types_as_lists(cls, value: Any) -> Any:
        if isinstance(value, dict):
            return {k: [v] if isinstance(v, str) else v for k, v in value.items()}
        return value

    @field_validator("setup", "teardown", mode="before")
    @classmethod
    def _listify(cls, value: Any) -> Any:
        return [value] if isinstance(value, Action) else value
