"""CRAB's ``crab.core.models.action`` path: ``Action`` and ``ClosedAction``."""

from typing import Annotated, TypeAlias

from pydantic import AfterValidator

from crabray.core.actions import KEPT_PARAMS, Action


def _check_no_param(action: Action) -> Action:
    """Return ``action`` if it needs no argument from its caller (CRAB's check).

    Raises:
        ValueError: It has required parameters that are not bound.
    """
    if not action.is_closed:
        raise ValueError(
            f"'{action.name}' needs arguments {action.required_parameters}; a closed action "
            "takes none"
        )
    return action


ClosedAction: TypeAlias = Annotated[Action, AfterValidator(_check_no_param)]
"""An action with no required parameter left open, as a pydantic field type."""

__all__ = ["KEPT_PARAMS", "Action", "ClosedAction"]
