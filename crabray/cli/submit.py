"""``crabray run --address http://HEAD:8265`` and ``crabray runs fetch``: a cluster from afar.

A run given the head's Job Submission API as its address is not run here:
the suite is staged in a folder with a run file (``run.toml``) holding the
run's spec, shipped as a Ray job's ``working_dir``, and ``crabray run``
runs on the head as the job's entrypoint, the driver of the sweep. Its output
streams back here. Ctrl-C stops the job; what finished is kept on the head
and ``--resume RUN_ID`` continues it. Results stay on the head (``~/crabray/
results`` by default; a relative ``--out`` is relative to ``~/crabray`` there,
an absolute one or a ``file://`` URL is taken as is, e.g. a shared mount);
``crabray runs fetch`` copies a run back through another small job. An
``--out`` store URI (``s3://...``) is written by the head with the head's
own credentials (``crabray.results.store.remote``); nothing of this machine's
environment is sent. ``--detach`` returns once the job is submitted;
``crabray runs follow`` and ``crabray runs stop`` find the run's job later.
"""

from __future__ import annotations

import json
import secrets
import shlex
import shutil
import socket
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.markup import escape

from crabray.cli.options import DEFAULT_ROOT, root_option
from crabray.cli.terminal import console, errors, plain_text, safe_text
from crabray.cluster.runtime.submit import job_client
from crabray.core.errors import CrabrayError
from crabray.results.store.root import ResultsRoot
from crabray.run.spec import DEFAULT_RESULTS, RunSpec, field_of, is_default_root

if TYPE_CHECKING:
    from ray.job_submission import JobSubmissionClient

    from crabray.cli.results_copy import ResultsMirror


REMOTE_HOME = "crabray"
"""The head's folder (under the home of the user running Ray) that relative result roots are in."""
_SHIPPED_PATHS = ("agent_config", "index", "services")
_NOT_IN_RUN_FILE = {"address", "out_dir", "suite", "resume", "run_id", "suite_origin"}


DEFAULT_SYNC_SEC = 15.0
"""How often a followed run's finished episodes are copied here by default: each copy is a
short job on the head (a process that packs what changed), about a second of its CPU."""
SyncEveryOpt = Annotated[
    float,
    typer.Option(
        "--sync-every",
        min=0,
        metavar="SECONDS",
        help="Followed from here: copy the episodes finished so far into the results root "
        "here every SECONDS (0: once, when the run ends).",
    ),
]
AddressOpt = Annotated[
    str,
    typer.Option(envvar="RAY_ADDRESS", help="The head's Job Submission API, http://HEAD:8265."),
]


def remote_out(root: ResultsRoot) -> str:
    """``--out`` as a shell word on the head: relative roots go under ``~/crabray`` there."""
    if root.is_url or Path(root.given).is_absolute():
        return shlex.quote(root.given)
    return f'"$HOME"/{REMOTE_HOME}/{shlex.quote(root.given)}'


def submit_run(
    spec: RunSpec,
    detach: bool = False,
    sync_every: float = DEFAULT_SYNC_SEC,
    verified_only: bool = False,
) -> None:
    """Run ``spec`` on the cluster whose Job Submission API is ``spec.execution.address``.

    Checks the suite and agents here first, so a broken suite fails before
    anything is uploaded. An ``--out`` URI is checked for its form only: the
    head writes the store with its own environment's credentials, and checks
    it can before any episode runs.

    Args:
        spec: The run (its ``--model`` included: the run file shipped carries it).
        detach: Return once the job is submitted, printing how to follow and fetch it.
        sync_every: Followed, copy the finished episodes here every this many seconds
            (0: once, at the end).
        verified_only: ``--verified-only``, passed on: the head prints the run's leaderboard.

    Raises:
        CrabrayError: The API does not answer, the suite is too large or invalid,
            or the run failed on the cluster (``typer.Exit`` with its exit code).
    """
    from crabray.cli.outcomes import EXIT_NOT_THE_AGENTS
    from crabray.cluster.runtime.submit import check_upload_size, submit
    from crabray.results import check_uri

    if spec.execution.address is None or spec.what.suite is None:
        raise CrabrayError("a submitted run needs --address http://HEAD:8265 and a suite")
    if spec.results.out_dir.is_store:
        check_uri(spec.results.out_dir.given)
    client = job_client(
        spec.execution.address
    )  # first: it decides how Ray, imported next, authenticates
    from crabray.agents import select_agents
    from crabray.agents.config import with_model
    from crabray.results import new_run_id
    from crabray.run.runner import load_checked_suite

    with_model(select_agents(spec.agents.names, spec.agents.agent_config), spec.agents.model)
    suite = Path(spec.what.suite)
    load_checked_suite(spec.what.resolve(suite))
    folder = suite if suite.is_dir() else suite.parent
    size = check_upload_size(folder)
    run_id = spec.results.resume or spec.results.run_id or new_run_id()
    with tempfile.TemporaryDirectory(prefix="crabray-job-") as staging:
        _stage(spec, suite, folder, Path(staging), run_id)
        job_id = submit(
            client,
            _entrypoint(spec.results.out_dir, verified_only=verified_only),
            Path(staging),
            f"crabray-{run_id}-{secrets.token_hex(3)}",
            {"crabray_run_id": run_id, "crabray_out": spec.results.out_dir.given},
        )
    shipped = f"({size / 2**20:.1f} MiB shipped)"
    if detach:
        _print_detached(spec, run_id, job_id, shipped)
        return
    mirror = _mirror(spec.execution.address, run_id, spec.results.out_dir, sync_every)
    submitted = (
        f"submitted run [bold]{run_id}[/] as job {job_id} to {spec.execution.address} "
        f"{shipped}; {_mirror_note(mirror, spec)}; Ctrl-C stops it"
    )
    if mirror is not None:
        mirror.start()
    resume = resume_command(spec, run_id)
    code = _follow_or_stop(client, job_id, run_id, spec, submitted, resume)
    errors.print(_bring_results_here(client, mirror, spec, run_id), highlight=False, soft_wrap=True)
    if code == EXIT_NOT_THE_AGENTS:  # the head named what was not the agents' doing
        errors.print(f"to resume the run: {escape(resume)}", highlight=False, soft_wrap=True)
    if code != 0:
        raise typer.Exit(code)


def _mirror(
    address: str, run_id: str, root: ResultsRoot, sync_every: float
) -> ResultsMirror | None:
    """The copier of a followed run's results into the same root here; ``None`` for a URI
    or an absolute path on the head, which stay where they are."""
    from crabray.cli.results_copy import ResultsMirror

    here = root.path
    if root.is_url or here is None or here.is_absolute():
        return None
    return ResultsMirror(address, run_id, remote_out(root), here, sync_every)


def _mirror_note(mirror: ResultsMirror | None, spec: RunSpec) -> str:
    """Where a followed run's results are while it runs, said when it is submitted."""
    out = escape(spec.results.out_dir.shown)
    if mirror is None:
        return f"results are written on the head into {out}"
    if mirror.every_sec > 0:
        return f"finished episodes are copied into {out} here every {mirror.every_sec:g} s"
    return f"results are copied into {out} here when it ends"


def _bring_results_here(
    client: JobSubmissionClient, mirror: ResultsMirror | None, spec: RunSpec, run_id: str
) -> str:
    """Copy what a followed run wrote since the last copy; say where its results are.

    A relative results root (``./results`` by default) means the same folder on
    both machines (under ``~/crabray`` on the head): the mirror has copied the
    run here as it went, and makes its last copy. A store URI or an absolute
    path on the head stays where it is, and the message says how to read or
    fetch it. A copy that fails says so and gives the fetch command.
    """
    if mirror is None:
        return _where_results_are(spec, run_id)
    out = spec.results.out_dir.shown
    try:
        copied = mirror.finish(client)
    except CrabrayError as exc:
        return f"could not copy the results here ({safe_text(exc)}); " + _where_results_are(
            spec, run_id
        )
    size = sum(copied.listing.files.values())
    where = escape(shlex.quote(out))
    return (
        f"results of run {escape(run_id)} copied into {escape(out)} ({size / 2**20:.1f} MiB; "
        f"also on the head under ~/{REMOTE_HOME}/{escape(out)}); read them with:  "
        f"crabray leaderboard {where} --run {escape(run_id)}   or   "
        f"crabray view {where} --run {escape(run_id)}"
    )


def _where_results_are(spec: RunSpec, run_id: str) -> str:
    """Where a submitted run's results are, and the command that reads (or fetches) them."""
    root = spec.results.out_dir
    if root.is_store:
        board = f"crabray leaderboard {shlex.quote(root.shown)} --run {run_id}"
        return f"results are in {escape(root.shown)}; read them with:  {escape(board)}"
    fetch = f"crabray runs fetch {run_id} --address {spec.execution.address}"
    if not is_default_root(root):
        fetch += f" --from {shlex.quote(root.shown)}"
    return f"results are on the head; copy them here with:  {escape(fetch)}"


def _print_detached(spec: RunSpec, run_id: str, job_id: str, shipped: str) -> None:
    """What a detached submission prints: the run and job ids, and how to follow and stop it."""
    address = spec.execution.address
    console.print(f"run id: [bold]{run_id}[/]   job id: {job_id}   {shipped}", highlight=False)
    console.print(
        f"follow it:  crabray runs follow {run_id} --address {address}\n"
        f"stop it:    crabray runs stop {run_id} --address {address}\n"
        f"resume it:  {escape(resume_command(spec, run_id))}\n"
        f"{_where_results_are(spec, run_id)}",
        highlight=False,
        soft_wrap=True,
    )


def resume_command(spec: RunSpec, run_id: str) -> str:
    """The command that resumes submitted run ``run_id``, to type as it is.

    A submitted resume ships the suite again and checks it here first, so it
    names the suite, the agents and every option given that says how to read
    the suite or what its episodes are (as given: the run on the head checks
    them against what it recorded), then ``--address`` and ``--resume``. How
    the episodes ran (concurrency, ...) the run recorded and keeps.
    """
    from crabray.core.setting import flag_of
    from crabray.run.resume import keys_with

    given = spec.given()
    words = ["crabray", "run", str(spec.what.suite)]
    for agent in spec.agents.names:
        words += ["--agent", agent]
    if spec.agents.agent_config is not None:
        words += ["--agent-config", spec.agents.agent_config]
    if spec.agents.model is not None:
        words += ["--model", spec.agents.model]
    values = spec.flat()
    for key in keys_with("fixed"):
        value, flag = values[key], flag_of(key, field_of(key))
        if key not in given or value is None:
            continue
        if isinstance(value, dict):
            words += [w for key, item in value.items() for w in (flag, f"{key}={_word(item)}")]
        elif isinstance(value, list):
            words += [w for item in value for w in (flag, str(item))]
        else:
            words += [flag, str(value)]
    if not is_default_root(spec.results.out_dir):
        words += ["--out", spec.results.out_dir.given]
    words += ["--address", str(spec.execution.address), "--resume", run_id]
    return shlex.join(words)


def _word(value: object) -> str:
    """A backend setting's value as ``--backend-setting KEY=VALUE`` reads it back."""
    return value if isinstance(value, str) else json.dumps(value)


def _follow_or_stop(
    client: JobSubmissionClient,
    job_id: str,
    run_id: str,
    spec: RunSpec,
    submitted: str,
    resume: str,
) -> int:
    """Say the job is submitted, then show its output until it ends; Ctrl-C stops the job.

    The announcement is inside the Ctrl-C handling: a Ctrl-C right after it (the user
    read "Ctrl-C stops it") must stop the job, not leave it running unseen. Exit code 130.
    """
    from crabray.cluster.runtime.submit import follow, stop

    def write(text: str) -> None:
        sys.stdout.write(plain_text(text))  # the job's output: shown, so stripped on a terminal
        sys.stdout.flush()

    try:
        errors.print(submitted, highlight=False, soft_wrap=True)
        return follow(client, job_id, write)
    except KeyboardInterrupt:
        errors.print(f"stopping job {job_id} ...", highlight=False)
        stopped = stop(client, job_id)
        what = "stopped" if stopped else "asked to stop (it has not stopped yet)"
        errors.print(
            f"job {job_id} {what}; the episodes that finished are kept on the head. "
            f"Continue the run with: {escape(resume)}",
            highlight=False,
            soft_wrap=True,
        )
        return 130


def _entrypoint(root: ResultsRoot, *, verified_only: bool = False) -> str:
    """The job's command: the staged run file, its results root on the head (``remote_out``)
    and ``--verified-only`` (an option of the command, not of the run)."""
    command = f"crabray run --config run.toml --out {remote_out(root)}"
    return f"{command} --verified-only" if verified_only else command


def _stage(spec: RunSpec, suite: Path, folder: Path, staging: Path, run_id: str) -> None:
    """Lay out the job's working_dir: the suite under ``suite/``, other files, ``run.toml``."""
    from crabray.cluster.runtime.submit import NOT_SHIPPED

    shutil.copytree(folder, staging / "suite", ignore=shutil.ignore_patterns(*NOT_SHIPPED))
    fields = {
        key: value
        for key, value in spec.flat(given_only=True, mode="json").items()
        if key not in _NOT_IN_RUN_FILE
    }
    fields["suite"] = "suite" if suite.is_dir() else f"suite/{suite.name}"
    for name in _SHIPPED_PATHS:
        if fields.get(name) is not None:
            fields[name] = _ship_file(Path(str(fields[name])), folder, staging)
    if spec.results.resume is not None:
        fields["resume"] = spec.results.resume
    else:
        fields["run_id"] = run_id
    fields["suite_origin"] = f"{socket.gethostname()}:{suite.resolve()}"
    lines = [f"{key} = {json.dumps(value)}" for key, value in fields.items()]
    (staging / "run.toml").write_text("\n".join(lines) + "\n", encoding="utf-8")


def _ship_file(path: Path, folder: Path, staging: Path) -> str:
    """Where a file the run names is in the working_dir: in the suite, or copied beside it."""
    resolved = path.resolve()
    if resolved.is_relative_to(folder.resolve()):
        return f"suite/{resolved.relative_to(folder.resolve()).as_posix()}"
    if not resolved.is_file():
        raise CrabrayError(f"{path}: no such file to ship with the run")
    target = staging / "files" / resolved.name
    target.parent.mkdir(exist_ok=True)
    shutil.copy2(resolved, target)
    return f"files/{resolved.name}"


def fetch(
    run_id: Annotated[str, typer.Argument(help="The run to copy here.")],
    address: AddressOpt,
    source: Annotated[
        ResultsRoot,
        root_option(
            "--from",
            metavar="FROM",
            help="The results root on the head, as the run's --out gave it (relative to "
            f"~/{REMOTE_HOME} there).",
        ),
    ] = DEFAULT_ROOT,
    out: Annotated[ResultsRoot, root_option("--out", "-o", help="The results root here.")] = (
        DEFAULT_ROOT
    ),
) -> None:
    """Copy run RUN_ID from the cluster's head into OUT, through a Ray job (no ssh needed).

    An earlier copy of the run in OUT is replaced, so fetching again during a
    run brings the episodes finished since.
    """
    client = job_client(_job_address(address))
    size = _fetch_run(client, run_id, source, out)
    console.print(
        f"run {escape(run_id)} copied into {escape(out.shown)} ({size / 2**20:.1f} MiB)",
        highlight=False,
        soft_wrap=True,
    )


def _fetch_run(
    client: JobSubmissionClient, run_id: str, source: ResultsRoot, out: ResultsRoot
) -> int:
    """Copy run ``run_id`` from the head's results root ``source`` into ``out``; its bytes.

    Raises:
        CrabrayError: ``out`` is a store (the copy is unpacked into a folder), the job
            that packs the run failed, or its output is not a run.
    """
    from crabray.cli.results_copy import copy_run

    return copy_run(client, run_id, remote_out(source), out.local()).size


def follow_run(
    run_id: Annotated[str, typer.Argument(help="The submitted run to follow.")],
    address: AddressOpt,
    sync_every: SyncEveryOpt = DEFAULT_SYNC_SEC,
) -> None:
    """Show the output of submitted run RUN_ID (from its start) until it ends; exit with its code.

    A run whose results root is relative (./results by default) is copied into
    the same root here as its episodes finish. Ctrl-C stops following, not the
    run (`crabray runs stop` stops it).
    """
    from crabray.cluster.runtime.submit import follow, run_job

    client = job_client(_job_address(address))
    job_id = run_job(client, run_id)
    given = (client.get_job_info(job_id).metadata or {}).get("crabray_out", DEFAULT_RESULTS)
    root = ResultsRoot(str(given))  # the run's --out, recorded with its job when submitted
    mirror = _mirror(address, run_id, root, sync_every)
    if mirror is not None:
        mirror.start()

    def write(text: str) -> None:
        sys.stdout.write(plain_text(text))  # the job's output: shown, so stripped on a terminal
        sys.stdout.flush()

    try:
        code = follow(client, job_id, write)
    except KeyboardInterrupt:
        errors.print(f"stopped following; run {run_id} goes on (job {job_id})", highlight=False)
        raise typer.Exit(130) from None
    if mirror is not None:
        copied = mirror.finish(client)
        size = sum(copied.listing.files.values())
        errors.print(
            f"results of run {escape(run_id)} copied into {escape(root.shown)} "
            f"({size / 2**20:.1f} MiB)",
            highlight=False,
            soft_wrap=True,
        )
    if code != 0:
        raise typer.Exit(code)


def stop_run(
    run_id: Annotated[str, typer.Argument(help="The submitted run to stop.")],
    address: AddressOpt,
) -> None:
    """Stop submitted run RUN_ID; what finished is kept (the command that submitted it, with
    --resume RUN_ID, goes on)."""
    from crabray.cluster.runtime.submit import run_job, stop

    client = job_client(_job_address(address))
    job_id = run_job(client, run_id)
    status = client.get_job_status(job_id)
    if status.is_terminal():
        console.print(f"run {run_id} (job {job_id}) already ended: {status.value.lower()}")
        return
    stopped = stop(client, job_id)
    what = "stopped" if stopped else "asked to stop (it has not stopped yet)"
    console.print(f"run {run_id} (job {job_id}) {what}", highlight=False)


def _job_address(address: str) -> str:
    """``address`` if it is the head's Job Submission API, else an error saying so."""
    from crabray.cluster.runtime.submit import is_job_address

    if not is_job_address(address):
        raise CrabrayError(f"--address must be the head's http://HOST:8265, not {address}")
    return address


def pack(
    run_id: Annotated[str, typer.Argument(help="The run to write out.")],
    source: Annotated[
        ResultsRoot, root_option("--from", metavar="PATH", help="The results root.")
    ] = DEFAULT_ROOT,
    since: Annotated[
        float | None,
        typer.Option(help="Only the files written since this time (the last copy's listing)."),
    ] = None,
) -> None:
    """Write run RUN_ID of a results root to stdout, framed, for `crabray runs fetch`."""
    from crabray.cli.results_copy import write_pack

    if source.path is None:
        raise CrabrayError(
            f"{source.shown} is a store: read its runs where they are "
            f"(crabray leaderboard {source.shown}); there is nothing to fetch"
        )
    write_pack(source.path, run_id, since)
