"""Ray's token authentication for a driver joining a cluster: on when the cluster wants it.

A node started with ``ray start`` (Ray 2.60, this project's) turns token
authentication on by itself when the machine has a token
(``~/.ray/auth_token``, which ``crabray cluster start-head`` creates), and
``crabray cluster`` always starts nodes with it. A driver, though, sends its
token only when ``RAY_AUTH_MODE`` says so, and Ray reads that variable once,
when it is imported. Without it, joining such a cluster failed after 20
seconds of retries with a message that blamed the address.

So before Ray is imported, the cluster's GCS is asked once, without a token,
for its cluster id (the call a joining driver makes first): if it refuses
for want of a token, token mode is turned on, after checking that this
machine's token is the one the cluster accepts. Turning it on for a cluster
that does not use it would break the run (that cluster's GCS cannot call the
driver back), so an open cluster is left as it is. When the GCS cannot be
asked (nothing answers yet, another address form), the rule is the one
before the question: a head ``crabray cluster`` started on this machine wants
the token.
"""

from __future__ import annotations

import enum
import logging
import os
import socket
import sys
from pathlib import Path

from crabray.cluster.runtime.nodes import (
    DEFAULT_STATE_FILE,
    auth_token,
    routable_address,
    started_nodes,
)
from crabray.core.errors import CrabrayError

logger = logging.getLogger(__name__)

_PROBE_METHOD = "/ray.rpc.NodeInfoGcsService/GetClusterId"
"""The GCS call every joining driver and node makes first (its request is empty)."""

_PROBE_TIMEOUT_SEC = 5.0

_settled: set[tuple[str, Path]] = set()
"""The (address, state file) pairs this process has decided for: ``crabray run`` decides
before Ray is imported and ``ray_runtime.connect`` asks again for library callers; the
GCS is asked once (an address that does not answer would cost its timeout twice)."""


class GcsAuth(enum.Enum):
    """What a cluster's GCS said to a call without a token, and to one with this machine's."""

    OPEN = "answers without a token"
    TOKEN_ACCEPTED = "wants a token, and accepts this machine's"
    TOKEN_REFUSED = "wants a token, and refuses this machine's"
    NO_TOKEN_HERE = "wants a token, and this machine has none"
    UNKNOWN = "could not be asked"


def use_token_auth(address: str | None, state_file: Path = DEFAULT_STATE_FILE) -> None:
    """Set ``RAY_AUTH_MODE=token`` for this process when the cluster at ``address`` wants it.

    Runs before anything imports Ray (``crabray run`` and ``crabray cluster
    status`` call it first). Whenever ``RAY_AUTH_MODE`` is set already, the
    user's environment decides.

    Raises:
        CrabrayError: The cluster wants a token this machine does not have or
            that it refuses (the message says where the token goes), or Ray was
            imported already (a program that imports Ray itself must set
            ``RAY_AUTH_MODE=token`` before it starts), or the state file is unreadable.
    """
    if address is None or "RAY_AUTH_MODE" in os.environ or (address, state_file) in _settled:
        return
    answer = gcs_auth(address)
    logger.debug("the GCS at %s %s", address, answer.value)
    if answer is GcsAuth.OPEN:
        _settled.add((address, state_file))
        return
    if answer is GcsAuth.NO_TOKEN_HERE:
        raise CrabrayError(
            f"the Ray cluster at {address} uses token authentication and this machine has "
            "no Ray token: copy the head's ~/.ray/auth_token to ~/.ray/auth_token here, or "
            "set RAY_AUTH_TOKEN to its contents"
        )
    if answer is GcsAuth.TOKEN_REFUSED:
        raise CrabrayError(
            f"the Ray cluster at {address} refuses this machine's Ray token "
            f"({_token_source()}): it is not the head's; copy the head's ~/.ray/auth_token "
            "here, or set RAY_AUTH_TOKEN to its contents"
        )
    if answer is GcsAuth.UNKNOWN and not _started_here(address, state_file):
        _settled.add((address, state_file))
        return
    if "ray" in sys.modules:
        raise CrabrayError(
            f"the Ray cluster at {address} uses token authentication, and Ray reads "
            "RAY_AUTH_MODE only when it is imported: set RAY_AUTH_MODE=token in the "
            "environment before starting this program"
        )
    os.environ["RAY_AUTH_MODE"] = "token"


def gcs_auth(address: str) -> GcsAuth:
    """Ask the GCS at ``address`` (``host:port``) whether it wants a token, without Ray."""
    host, _, port = address.rpartition(":")
    if not host or not port.isdigit():
        return GcsAuth.UNKNOWN  # "auto", "ray://...": Ray's to resolve
    import grpc  # Ray's own dependency; importing it does not import Ray

    def call(token: str | None) -> grpc.StatusCode:
        metadata = None if token is None else [("authorization", f"Bearer {token}")]
        with grpc.insecure_channel(address) as channel:
            probe = channel.unary_unary(_PROBE_METHOD)
            try:
                probe(b"", timeout=_PROBE_TIMEOUT_SEC, metadata=metadata)
            except grpc.RpcError as exc:
                return exc.code()
        return grpc.StatusCode.OK

    status = call(None)
    if status is grpc.StatusCode.OK:
        return GcsAuth.OPEN
    if status is not grpc.StatusCode.UNAUTHENTICATED:
        return GcsAuth.UNKNOWN
    token = auth_token()
    if token is None:
        return GcsAuth.NO_TOKEN_HERE
    if call(token) is grpc.StatusCode.OK:
        return GcsAuth.TOKEN_ACCEPTED
    return GcsAuth.TOKEN_REFUSED


def _token_source() -> str:
    return "$RAY_AUTH_TOKEN" if os.environ.get("RAY_AUTH_TOKEN") else "~/.ray/auth_token"


def _started_here(address: str, state_file: Path) -> bool:
    """Whether ``address`` is a head ``crabray cluster`` started on this machine."""
    host, _, port = address.rpartition(":")
    ours = {n.address for n in started_nodes(state_file) if n.role == "head"}
    return _is_this_machine(host) and f"127.0.0.1:{port}" in ours


def _is_this_machine(host: str) -> bool:
    names = {"127.0.0.1", "localhost", socket.gethostname(), routable_address()}
    try:
        names.add(socket.gethostbyname(socket.gethostname()))
    except OSError as exc:
        logger.debug("cannot resolve this host's name: %s", exc)
    return host in names
