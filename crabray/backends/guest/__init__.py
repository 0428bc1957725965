"""The guest: one long-lived Python process inside each sandbox, over the backend's own channel.

Commands and plain-Python actions (CRAB's rule: a function without ``env``
that is not ``local=True`` runs where its environment is) share it, so an
action costs one framed round trip instead of a process spawn. It never
listens on a network: the channel is a confined process's pipes (local), a
docker exec stream, or an SSH channel (ssh, vm). See ``_program`` for the
protocol and ``_client`` for starting and restarting it.
"""

from __future__ import annotations

import functools
import json
from typing import Any

from pydantic_core import to_jsonable_python

from crabray.backends.base import PythonCall
from crabray.backends.guest._client import (
    CALL_TIMEOUT_SEC,
    Guest,
    GuestCallError,
    GuestChannel,
    GuestLostError,
    NoPythonError,
    UntrustedGuestError,
)
from crabray.backends.guest._program import BOOTSTRAP, GUEST_ARGV, KeptOutput, collect_output
from crabray.backends.guest._source import function_units
from crabray.core.actions import Action
from crabray.core.errors import ActionError

__all__ = [
    "BOOTSTRAP",
    "CALL_TIMEOUT_SEC",
    "GUEST_ARGV",
    "Guest",
    "GuestCallError",
    "GuestChannel",
    "GuestLostError",
    "KeptOutput",
    "NoPythonError",
    "UntrustedGuestError",
    "collect_output",
    "python_call",
]


def python_call(action: Action, values: dict[str, Any]) -> PythonCall:
    """The request that runs ``action`` with its validated ``values`` inside a sandbox.

    Raises:
        ActionError: The function's source cannot be sent, or an argument is not JSON.
    """
    func = action.entry
    while isinstance(func, functools.partial):
        # Bound arguments are already in ``values``; the source sent is the function's own.
        func = func.func
    try:
        arguments = to_jsonable_python(values)
    except Exception as exc:
        raise ActionError(
            f"action '{action.name}': its arguments cannot be sent to the sandbox as JSON: {exc}"
        ) from exc
    return PythonCall(
        action=action.name,
        function=func.__name__,
        units=list(function_units(func)),
        arguments_json=json.dumps(arguments),
    )
