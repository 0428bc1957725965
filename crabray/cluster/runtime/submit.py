"""Ray jobs on a cluster's head: how a machine that is no node of the cluster runs there.

A Ray driver joins a cluster only from one of its nodes, so a laptop submits
the driver itself (``crabray run``, or ``crabray runs pack`` to fetch results)
as a Ray job through the head's Job Submission API, which the dashboard serves
(``http://HEAD:8265``). A job's ``working_dir`` is a folder this machine
uploads and every node that runs part of the job unpacks; its output is read
back through the same API. Only Ray's public ``ray.job_submission`` is used;
it is a plain HTTP client (with Ray's token in a header when the cluster uses
token authentication), so this machine needs no Ray node and no ssh.
"""

from __future__ import annotations

import importlib.util
import logging
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from crabray.core.errors import CrabrayError
from crabray.core.install import extra_install_command

if TYPE_CHECKING:
    from ray.job_submission import JobSubmissionClient

logger = logging.getLogger(__name__)

MAX_UPLOAD_BYTES = 100 * 1024 * 1024
"""What crabray ships in a job's working_dir at most: Ray refuses packages past
its gRPC message limit (512 MiB) and warns at half of that; a suite this large
belongs on a shared file system or in the node image."""
NOT_SHIPPED = (".git", ".venv", "venv", "results", "__pycache__", "node_modules")
"""Folder names never shipped: version control, virtualenvs, results, caches."""
_POLL_SEC = 1.0
_STOP_WAIT_SEC = 60.0


def is_job_address(address: str | None) -> bool:
    """Whether ``address`` is a head's Job Submission API (``http(s)://HOST:8265``).

    Any other address (``HOST:6379``) is a Ray cluster a driver joins directly.
    """
    return address is not None and address.startswith(("http://", "https://"))


def check_upload_size(folder: Path) -> int:
    """The bytes of the files under ``folder`` that a job would ship; raise when too many.

    Raises:
        CrabrayError: More than ``MAX_UPLOAD_BYTES``; the message names the largest entries.
    """
    sizes: dict[str, int] = {}
    for root, dirs, files in os.walk(folder):
        dirs[:] = [d for d in dirs if d not in NOT_SHIPPED]
        for name in files:
            path = Path(root, name)
            if path.is_symlink() or not path.is_file():
                continue
            top = path.relative_to(folder).parts[0]
            sizes[top] = sizes.get(top, 0) + path.stat().st_size
    total = sum(sizes.values())
    if total > MAX_UPLOAD_BYTES:
        largest = sorted(sizes.items(), key=lambda item: -item[1])[:3]
        named = ", ".join(f"{name} ({size / 2**20:.0f} MiB)" for name, size in largest)
        raise CrabrayError(
            f"the suite is too large to ship with the job: {total / 2**20:.0f} MiB of files "
            f"(at most {MAX_UPLOAD_BYTES // 2**20} MiB), largest: {named}. Move large data out "
            "of the suite folder (onto a file system every node mounts, or into the node image), "
            f"or leave it in a folder named one of {', '.join(NOT_SHIPPED)}, which are not shipped"
        )
    return total


def job_client(address: str) -> JobSubmissionClient:
    """A client of the Job Submission API at ``address``; checks that it answers.

    Ray's info lines (package uploads) are kept off the terminal.

    Raises:
        CrabrayError: Ray's job client is not installed, nothing answers there, or it
            refused this machine's Ray token.
    """
    if importlib.util.find_spec("aiohttp") is None:
        raise CrabrayError(
            "submitting a run to a cluster needs Ray's job client, part of ray[default]: "
            f"{extra_install_command('cluster')} (or 'ray[default]' at crabray's Ray version)"
        )
    _use_token_if_present()
    from ray.job_submission import JobSubmissionClient

    try:
        client = JobSubmissionClient(address)
    except Exception as exc:
        raise CrabrayError(
            f"cannot reach Ray's Job Submission API at {address}: {exc}. It is the head's "
            "dashboard (port 8265; `crabray cluster start-head` serves it); with token "
            "authentication, set RAY_AUTH_MODE=token and copy the head's ~/.ray/auth_token "
            "here (or set RAY_AUTH_TOKEN)"
        ) from exc
    _quiet_ray_loggers()
    return client


def _quiet_ray_loggers() -> None:
    """Keep Ray's own info lines (uploads) off the terminal: at most the root logger's level.

    Ray's job client sets its modules' loggers to INFO itself, after ``crabray -v``
    set the root logger's level.
    """
    level = max(logging.getLogger().level, logging.ERROR)
    for name in ["ray", *(n for n in logging.root.manager.loggerDict if n.startswith("ray."))]:
        logging.getLogger(name).setLevel(level)


def _use_token_if_present() -> None:
    """Send this machine's Ray token with every request, when it has one.

    Ray's client sends the token only in token mode, read from
    ``RAY_AUTH_MODE`` when Ray is imported; a token sent to a cluster without
    authentication is ignored, so having one is reason enough.
    """
    has_token = os.environ.get("RAY_AUTH_TOKEN") or (Path.home() / ".ray" / "auth_token").exists()
    if has_token and "RAY_AUTH_MODE" not in os.environ and "ray" not in sys.modules:
        os.environ["RAY_AUTH_MODE"] = "token"


def submit(
    client: JobSubmissionClient,
    entrypoint: str,
    working_dir: Path,
    submission_id: str,
    metadata: dict[str, str],
) -> str:
    """Submit ``entrypoint`` with ``working_dir`` shipped to every node; the job's id.

    Raises:
        CrabrayError: The head refused the job (its reason in the message).
    """
    runtime_env = {"working_dir": str(working_dir), "excludes": [f"{n}/" for n in NOT_SHIPPED]}
    try:
        return client.submit_job(
            entrypoint=entrypoint,
            runtime_env=runtime_env,
            submission_id=submission_id,
            metadata=metadata,
        )
    except Exception as exc:
        raise CrabrayError(f"the head refused the job: {exc}") from exc


def follow(client: JobSubmissionClient, job_id: str, write: Callable[[str], None]) -> int:
    """Pass the job's output to ``write`` as it comes until the job ends; its exit code.

    Polls the job's log (plain HTTP, no websocket client needed here). The
    exit code is the entrypoint's, or 1 when the job failed without one (it
    was stopped, or its runtime environment could not be set up).
    """
    from ray.job_submission import JobStatus

    shown = 0
    while True:
        status = client.get_job_status(job_id)
        logs = client.get_job_logs(job_id)
        if len(logs) > shown:
            write(logs[shown:])
            shown = len(logs)
        if status.is_terminal():
            break
        time.sleep(_POLL_SEC)
    info = client.get_job_info(job_id)
    if status == JobStatus.SUCCEEDED:
        return 0
    code = getattr(info, "driver_exit_code", None)
    if info.message and not code:
        write(f"job {job_id} {status.value.lower()}: {info.message}\n")
    return int(code) if code else 1


def run_job(client: JobSubmissionClient, run_id: str) -> str:
    """The id of the latest job that ran (or runs) crabray run ``run_id`` on this cluster.

    Raises:
        CrabrayError: No job of the head ran that run.
    """
    jobs = [
        job
        for job in client.list_jobs()
        if (job.metadata or {}).get("crabray_run_id") == run_id and job.submission_id
    ]
    if not jobs:
        raise CrabrayError(
            f"no job of run {run_id} on this cluster (the head forgets jobs when it restarts)"
        )
    latest = max(jobs, key=lambda job: job.start_time or 0)
    return str(latest.submission_id)


def stop(client: JobSubmissionClient, job_id: str) -> bool:
    """Stop the job and wait (a minute at most) until it has stopped; whether it has."""
    client.stop_job(job_id)
    deadline = time.monotonic() + _STOP_WAIT_SEC
    while time.monotonic() < deadline:
        if client.get_job_status(job_id).is_terminal():
            return True
        time.sleep(_POLL_SEC)
    return False


def job_output(client: JobSubmissionClient, job_id: str) -> str:
    """Wait for a short job to end and return its output.

    Raises:
        CrabrayError: The job failed; its output is in the message.
    """
    from ray.job_submission import JobStatus

    while not (status := client.get_job_status(job_id)).is_terminal():
        time.sleep(_POLL_SEC)
    logs = client.get_job_logs(job_id)
    if status != JobStatus.SUCCEEDED:
        raise CrabrayError(f"job {job_id} {status.value.lower()}:\n{logs.strip()[-2000:]}")
    return logs


def delete(client: JobSubmissionClient, job_id: str) -> None:
    """Forget a finished job on the head (its record; Ray keeps no other trace worth keeping)."""
    try:
        client.delete_job(job_id)
    except Exception as exc:
        logger.debug("could not delete job %s: %s", job_id, exc)
