"""The oracle of a Harbor task: ``solution/`` copied to ``/solution``, then ``solve.sh`` run.

Harbor's oracle agent uploads the task's ``solution/`` folder and runs
``bash /solution/solve.sh`` from the container's working directory. crabray's
oracle replays a task's solution as agent calls, so the folder travels inside
``run_command`` calls (a tar archive, base64 in chunks an argument can hold)
and ``solve.sh`` runs in the last one, with ``[solution].env`` exported.
"""

from __future__ import annotations

import base64
import io
import shlex
import tarfile
from pathlib import Path

from crabray.actions import run_command
from crabray.actions.limits import MAX_TIMEOUT_SEC
from crabray.core import Action
from crabray.formats.harbor._checks import SOLVE_SCRIPT

SOLUTION_PATH = "/solution"
STAGING = "/tmp/.crabray-solution.b64"
CHUNK_CHARS = 96 * 1024
"""Base64 characters per command: well below Linux's 128 KiB limit on one argument."""


def solution_actions(
    folder: Path, env_vars: dict[str, str], timeout_sec: float | None
) -> list[Action]:
    """The calls that put ``folder`` at ``/solution`` and run its ``solve.sh``.

    Args:
        folder: The task's ``solution/`` folder.
        env_vars: ``[solution].env`` of ``task.toml``, exported for ``solve.sh``.
        timeout_sec: The agent's limit; ``solve.sh`` gets it, up to an agent command's bound.
    """
    encoded = base64.b64encode(_archive(folder)).decode()
    chunks = [encoded[i : i + CHUNK_CHARS] for i in range(0, len(encoded), CHUNK_CHARS)] or [""]
    calls = [
        run_command(
            command=f"{'>' if i == 0 else '>>'} {STAGING} printf %s {shlex.quote(chunk)}",
            timeout_sec=60.0,
        )
        for i, chunk in enumerate(chunks)
    ]
    exports = "".join(f"export {k}={shlex.quote(v)}; " for k, v in sorted(env_vars.items()))
    limit = min(timeout_sec or MAX_TIMEOUT_SEC, MAX_TIMEOUT_SEC)
    calls.append(
        run_command(
            command=(
                f"rm -rf {SOLUTION_PATH} && mkdir -p {SOLUTION_PATH} && "
                f"base64 -d {STAGING} | tar -x -C {SOLUTION_PATH} && rm -f {STAGING} && "
                f"{exports}bash {SOLUTION_PATH}/{SOLVE_SCRIPT}"
            ),
            timeout_sec=limit,
        )
    )
    return calls


def _archive(folder: Path) -> bytes:
    """``folder``'s files as an uncompressed tar (modes kept, owners dropped)."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for path in sorted(folder.rglob("*")):
            info = tar.gettarinfo(str(path), arcname=path.relative_to(folder).as_posix())
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            if path.is_file() and not path.is_symlink():
                with path.open("rb") as handle:
                    tar.addfile(info, handle)
            else:
                tar.addfile(info)
    return buffer.getvalue()
