"""Sandbox operation latency through crabray against the same raw operation without it.

Per backend: start, reset and exec latency (median and p95) through the
crabray backend, beside the raw cost of the same operation with the backend's
own client (for docker, the docker SDK), the overhead of crabray over raw,
and whether resetting a used sandbox beats starting a new one (target: at
least 3x faster; crabray's per-operation overhead under 10%).

Reset is measured the way episodes use it: after a short "episode" (one exec
and ``--episode-sec`` of idle time), since the docker backend prepares the
next clean container in the background while an episode runs. The reset of a
backend with ``warm_spare=False`` is shown too: that is the synchronous
recreate, which is what the raw row compares with.

Then, per backend, episodes/s of a trivial suite (one-action episodes, the
shape of ``scripts/bench_episodes.py``) run by the real runner on a local Ray
instance at concurrency 1 and 2: overall, the time to the first finished
episode (actor and sandbox start), and the steady rate after it.

Then, per backend whose sandbox has python3, the guest rows: one command
through the sandbox's guest process and one in-sandbox Python call (the
seed's ``check_file_exist``, run through ``EpisodeEnv`` as an episode runs
it), each beside one plain exec of ``true`` (crabray's own exec before the
guest is up on local; the docker SDK's ``exec_run`` on docker; a paramiko
``exec_command`` on ssh), and the one-off cost of starting the guest. Docker
uses ``crabray/debian`` here (busybox has no python3), the VM the test VM
with python3 when it is built (``envs/vm/out-python``). Targets: a Python call
under 2x a plain exec on docker and ssh; an action under 10 ms at p50.

Backends: ``local`` (unconfined), ``local-bwrap`` (confined by bubblewrap),
``docker`` (the ``crabray/busybox`` image of ``envs/busybox``), ``ssh`` (a
throwaway OpenSSH server on loopback, the test suite's ``tests/backends/ssh/sshd.py``)
and ``vm`` (the test VM of ``envs/vm/build.sh``). One missing here is skipped
with the reason. Figures are printed, never asserted.

One function per backend (``bench_docker``, ...) returns its latency rows, and
``SETUPS`` gives each backend's settings for the episode rows; add a backend
by writing both.

Usage: python scripts/bench_sandboxes.py [--backend docker] [--n 20] [--episodes 40]
       [--episode-sec 1.5] [--no-episodes] [--no-guest] [--sweep-image IMAGE] [--quick]
       [--smoke]
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench_episodes import SUITE as LOCAL_SUITE  # a sibling script: its trivial suite
from docker_sdk_loop import sdk_loop  # the docker sweep's baseline, a sibling module

logger = logging.getLogger("bench_sandboxes")

BUSYBOX = "crabray/busybox:latest"
DEBIAN = "crabray/debian:latest"
REPO = Path(__file__).resolve().parents[1]
VM_IMAGE = REPO / "envs" / "vm" / "out"
VM_PYTHON_IMAGE = REPO / "envs" / "vm" / "out-python"
"""The test VM with python3 (``CRABRAY_VM_PYTHON=1 envs/vm/build.sh envs/vm/out-python``)."""


class Unavailable(Exception):
    """The backend cannot run on this machine; the message says why."""


@dataclass
class Row:
    """One operation of one backend: crabray's timings and the raw ones, in seconds."""

    backend: str
    operation: str
    crabray: list[float]
    raw: list[float] | None

    @staticmethod
    def p95(values: list[float]) -> float:
        ordered = sorted(values)
        return ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]

    def line(self) -> str:
        ours = statistics.median(self.crabray)
        ours_p95 = self.p95(self.crabray)
        text = f"{self.backend:<8} {self.operation:<22} {ours * 1e3:9.1f} {ours_p95 * 1e3:9.1f}"
        if not self.raw:
            return text + f" {'-':>9} {'-':>9} {'-':>9}"
        raw = statistics.median(self.raw)
        overhead = (ours - raw) / raw
        return text + f" {raw * 1e3:9.1f} {self.p95(self.raw) * 1e3:9.1f} {overhead:+9.1%}"


def timed(fn: Callable[[], object]) -> float:
    started = time.perf_counter()
    fn()
    return time.perf_counter() - started


def bench_docker(n: int, episode_sec: float) -> list[Row]:
    """Start, reset and exec of the docker backend against the docker SDK's raw calls."""
    import docker

    from crabray.backends import create_backend
    from crabray.backends.docker import parse_docker_settings
    from crabray.core.environment import EnvironmentConfig

    settings = SETUPS["docker"](Path(), contextlib.ExitStack())
    client = docker.from_env()
    options = parse_docker_settings(settings).container_options()
    command = parse_docker_settings(settings).command

    def config(**extra: object) -> EnvironmentConfig:
        return EnvironmentConfig(
            name="bench", backend="docker", backend_settings={**settings, **extra}
        )

    def raw_run() -> docker.models.containers.Container:
        return client.containers.run(BUSYBOX, command, detach=True, **options)

    # Start: a new sandbox, ready for commands (crabray also schedules its warm spare,
    # which close() waits for; only start() is timed). Ours and raw alternate, so
    # load from other processes on the machine hits both alike.
    start_ours: list[float] = []
    start_raw: list[float] = []
    for _ in range(n):
        backend = create_backend(config())
        start_ours.append(timed(backend.start))
        backend.close()
        started = time.perf_counter()
        container = raw_run()
        start_raw.append(time.perf_counter() - started)
        container.remove(force=True)

    # Reset of a used sandbox, after an episode.
    warm = create_backend(config())
    cold = create_backend(config(warm_spare=False))
    warm.start()
    cold.start()
    reset_warm, reset_cold, reset_raw = [], [], []
    raw = raw_run()
    for _ in range(n):
        warm.exec("echo used > used.txt")
        time.sleep(episode_sec)
        reset_warm.append(timed(warm.reset))
        cold.exec("echo used > used.txt")
        reset_cold.append(timed(cold.reset))
        raw.exec_run(["sh", "-c", "echo used > used.txt"])

        def raw_reset() -> None:
            nonlocal raw
            raw.remove(force=True, v=True)
            raw = raw_run()

        reset_raw.append(timed(raw_reset))

    # Exec of a trivial command.
    execs = exec_rows(
        "docker",
        warm,
        5 * n,
        (lambda: raw.exec_run(["true"]), lambda: raw.exec_run(["/bin/sh", "-c", "true"])),
    )
    warm.close()
    cold.close()
    raw.remove(force=True, v=True)
    client.close()
    return [
        Row("docker", "start", start_ours, start_raw),
        Row("docker", "reset (warm spare)", reset_warm, reset_raw),
        Row("docker", "reset (recreate)", reset_cold, reset_raw),
        *execs,
    ]


RawExec = tuple[Callable[[], object], Callable[[], object]]
"""The raw runs of the program ``true`` (argv) and of the shell command ``true`` (string)."""


def exec_rows(label: str, backend: Any, repeats: int, raw: RawExec | None) -> list[Row]:
    """``exec(["true"])`` and ``exec("true")``, each interleaved with its raw counterpart.

    A list runs a program, a string a shell command (where ``true`` is a
    builtin): each is compared with the raw operation that does the same.
    """
    rows = []
    for shape, command in (("argv", ["true"]), ("string", "true")):
        ours: list[float] = []
        raws: list[float] = []
        raw_run = None if raw is None else raw[0 if shape == "argv" else 1]
        for _ in range(repeats):
            ours.append(timed(lambda command=command: backend.exec(command)))
            if raw_run is not None:
                raws.append(timed(raw_run))
        rows.append(Row(label, f"exec `true` ({shape})", ours, raws or None))
    return rows


def lifecycle_rows(
    label: str,
    make: Callable[[], Any],
    n: int,
    episode_sec: float,
    raw_start: Callable[[], Callable[[], None]] | None,
    raw_reset: Callable[[], None] | None,
    raw_exec: Callable[[Any], RawExec] | None,
) -> list[Row]:
    """Start, reset and exec rows of a backend, each beside its raw operation.

    Args:
        make: A new, unstarted backend.
        raw_start: Does the raw start; returns what undoes it (untimed).
        raw_reset: The raw reset of one used sandbox.
        raw_exec: Given the started backend, its raw runs of ``true`` (see ``exec_rows``).
    """
    start_ours: list[float] = []
    start_raw: list[float] = []
    for _ in range(n):
        backend = make()
        start_ours.append(timed(backend.start))
        backend.close()
        if raw_start is not None:
            started = time.perf_counter()
            undo = raw_start()
            start_raw.append(time.perf_counter() - started)
            undo()
    backend = make()
    backend.start()
    reset_ours: list[float] = []
    reset_raw: list[float] = []
    for _ in range(n):
        backend.exec("echo used > used.txt")
        time.sleep(episode_sec)
        reset_ours.append(timed(backend.reset))
        if raw_reset is not None:
            reset_raw.append(timed(raw_reset))
    execs = exec_rows(label, backend, 5 * n, raw_exec(backend) if raw_exec else None)
    backend.close()
    return [
        Row(label, "start", start_ours, start_raw or None),
        Row(label, "reset", reset_ours, reset_raw or None),
        *execs,
    ]


def bench_local(n: int, episode_sec: float, *, confined: bool = False) -> list[Row]:
    """The local backend against the same steps with ``os``/``subprocess``.

    Raw start and reset make (and remove) the sandbox's directories; raw exec
    is ``subprocess.run`` of the very argv the backend runs (for a confined
    sandbox, ``nsenter`` into the holder's namespaces).
    """
    from crabray.backends import create_backend
    from crabray.backends.local import LocalBackend
    from crabray.core.environment import EnvironmentConfig

    label = "bwrap" if confined else "local"
    root = Path(tempfile.mkdtemp(prefix="crabray-bench-local-"))
    settings = SETUPS[label](root, contextlib.ExitStack())

    def make() -> LocalBackend:
        config = EnvironmentConfig(name="bench", backend="local", backend_settings=settings)
        backend = create_backend(config)
        assert isinstance(backend, LocalBackend)
        return backend

    def layout(directory: Path) -> None:
        for sub in ("work", "home", "tmp"):
            (directory / sub).mkdir(parents=True)

    def raw_start() -> Callable[[], None]:
        directory = Path(tempfile.mkdtemp(dir=root))
        layout(directory)
        return lambda: shutil.rmtree(directory)

    scratch = root / "raw"
    layout(scratch)

    def raw_reset() -> None:
        shutil.rmtree(scratch)
        layout(scratch)

    def raw_exec(backend: LocalBackend) -> RawExec:
        holder = backend._holder  # the raw operation: the same nsenter argv, run directly

        def run(argv: list[str]) -> Callable[[], object]:
            full = holder.command(argv, cwd="/home/user/work") if holder else argv
            workdir = backend.workdir
            return lambda: subprocess.run(full, cwd=workdir, check=True, capture_output=True)

        return run(["true"]), run(["/bin/sh", "-c", "true"])

    try:
        return lifecycle_rows(
            label,
            make,
            n,
            episode_sec,
            None if confined else raw_start,
            None if confined else raw_reset,
            raw_exec,
        )
    finally:
        shutil.rmtree(root, ignore_errors=True)


def bench_ssh(n: int, episode_sec: float) -> list[Row]:
    """The ssh backend against a throwaway sshd, beside paramiko's own calls.

    Raw start is a paramiko login plus one ``mkdir``; raw reset one ``rm -rf``
    and ``mkdir`` over the open connection; raw exec ``exec_command`` of
    ``exec true`` (the program) and of ``true`` (the shell builtin).
    """
    import paramiko

    from crabray.backends import create_backend
    from crabray.core.environment import EnvironmentConfig

    with contextlib.ExitStack() as stack:
        root = Path(tempfile.mkdtemp(prefix="crabray-bench-ssh-"))
        stack.callback(shutil.rmtree, root, ignore_errors=True)
        settings = SETUPS["ssh"](root, stack)

        def make() -> Any:
            return create_backend(
                EnvironmentConfig(name="bench", backend="ssh", backend_settings=settings)
            )

        def login() -> paramiko.SSHClient:
            client = paramiko.SSHClient()
            client.load_host_keys(settings["known_hosts"])
            client.connect(
                settings["host"],
                port=settings["port"],
                username=settings["user"],
                key_filename=settings["key_path"],
                look_for_keys=False,
                allow_agent=False,
            )
            return client

        def run(client: paramiko.SSHClient, command: str) -> None:
            _, stdout, _ = client.exec_command(command)
            stdout.channel.recv_exit_status()

        remote = settings["remote_root"]

        def raw_start() -> Callable[[], None]:
            client = login()
            run(client, f"mkdir -p {remote}/raw-start/work {remote}/raw-start/home")

            def undo() -> None:
                run(client, f"rm -rf {remote}/raw-start")
                client.close()

            return undo

        client = stack.enter_context(contextlib.closing(login()))
        return lifecycle_rows(
            "ssh",
            make,
            n,
            episode_sec,
            raw_start,
            lambda: run(client, f"rm -rf {remote}/raw && mkdir -p {remote}/raw/work"),
            lambda _backend: (lambda: run(client, "exec true"), lambda: run(client, "true")),
        )


def bench_vm(n: int, episode_sec: float) -> list[Row]:
    """Start, reset and exec of the vm backend (test VM of envs/vm/build.sh) against raw
    QMP ``loadvm`` plus a fresh paramiko login, and a raw paramiko exec."""
    import paramiko

    from crabray.backends import create_backend
    from crabray.backends.vm import VmBackend
    from crabray.backends.vm._backend import SNAPSHOT
    from crabray.core.environment import EnvironmentConfig

    image = VM_IMAGE
    settings = SETUPS["vm"](image, contextlib.ExitStack())

    def make(**extra: object) -> VmBackend:
        config = EnvironmentConfig(
            name="bench", backend="vm", backend_settings={**settings, **extra}
        )
        backend = create_backend(config)
        assert isinstance(backend, VmBackend)
        return backend

    boot = make(boot_cache=False)  # one fresh boot: it takes tens of seconds under TCG
    start_boot = [timed(boot.start)]
    boot.close()
    start_ours: list[float] = []
    for _ in range(n):
        backend = make()
        start_ours.append(timed(backend.start))
        backend.close()

    vm, restart = make(), make(reset_mode="restart")
    vm.start()
    restart.start()
    port = vm.describe()["port"]
    key = paramiko.Ed25519Key.from_private_key_file(str(image / "id_ed25519"))

    def login() -> paramiko.SSHClient:
        client = paramiko.SSHClient()
        client.set_missing_host_key_policy(paramiko.AutoAddPolicy())
        client.connect("127.0.0.1", port=port, username="root", pkey=key, look_for_keys=False)
        return client

    reset_ours, reset_restart, reset_raw = [], [], []
    raw_client = login()
    for _ in range(n):
        vm.exec("echo used > used.txt")
        time.sleep(episode_sec)
        reset_ours.append(timed(vm.reset))
        restart.exec("echo used > used.txt")
        reset_restart.append(timed(restart.reset))

        def raw_reset() -> None:
            nonlocal raw_client
            raw_client.close()
            vm._require_qmp().hmp(f"loadvm {SNAPSHOT}")  # the raw operation
            raw_client = login()

        reset_raw.append(timed(raw_reset))
    vm.reset()  # the backend's own link went stale with the raw loadvm (and now the raw one)
    raw_client.close()
    raw_client = login()

    def raw_exec(command: str) -> None:
        _, stdout, _ = raw_client.exec_command(command)
        stdout.channel.recv_exit_status()

    execs = exec_rows("vm", vm, 5 * n, (lambda: raw_exec("exec true"), lambda: raw_exec("true")))
    raw_client.close()
    vm.close()
    restart.close()
    return [
        Row("vm", "start (fresh boot)", start_boot, None),
        Row("vm", "start", start_ours, None),
        Row("vm", "reset (loadvm)", reset_ours, reset_raw),
        Row("vm", "reset (restart)", reset_restart, None),
        *execs,
    ]


SUITE = LOCAL_SUITE.replace(
    'EnvironmentConfig(name="box", ',
    'EnvironmentConfig(name="box", backend=KIND, backend_settings=SETTINGS, ',
)
"""The trivial suite of the episode rows (``scripts/bench_episodes.py``'s, on any backend):
one command and one file check per episode."""


def _local_setup(root: Path, _stack: contextlib.ExitStack) -> dict[str, Any]:
    return {"root_dir": str(root / "sandboxes"), "isolation": "none"}


def _bwrap_setup(root: Path, _stack: contextlib.ExitStack) -> dict[str, Any]:
    from crabray.backends.local import _bwrap as bwrap

    usable, why = bwrap.probe()
    if not usable:
        raise Unavailable(f"bubblewrap does not work here ({why}): {bwrap.INSTALL_HINT}")
    return {"root_dir": str(root / "sandboxes"), "isolation": "bwrap"}


def _docker_setup(_root: Path, _stack: contextlib.ExitStack) -> dict[str, Any]:
    import docker

    try:
        docker.from_env().ping()
    except docker.errors.DockerException as exc:
        raise Unavailable(f"no docker engine ({exc}): apt-get install docker.io") from exc
    return {"image": BUSYBOX, "build": "busybox"}


def _ssh_setup(root: Path, stack: contextlib.ExitStack) -> dict[str, Any]:
    sys.path.insert(0, str(REPO))
    from tests.backends.ssh.sshd import sshd_missing, start_sshd

    missing = sshd_missing()
    if missing:
        raise Unavailable(missing)
    server = start_sshd(root / "sshd")
    stack.callback(server.stop)
    return server.settings(remote_root=str(root / "remote"))


def _vm_setup(_root: Path, _stack: contextlib.ExitStack) -> dict[str, Any]:
    if not (VM_IMAGE / "vmlinuz").is_file():
        raise Unavailable(f"no test VM in {VM_IMAGE}: run envs/vm/build.sh")
    return {"image_dir": str(VM_IMAGE), "memory_mb": 192}


SETUPS: dict[str, Callable[[Path, contextlib.ExitStack], dict[str, Any]]] = {
    "local": _local_setup,
    "bwrap": _bwrap_setup,
    "docker": _docker_setup,
    "ssh": _ssh_setup,
    "vm": _vm_setup,
}
"""Per backend label: its ``backend_settings`` here (starting what it needs on ``stack``),
or ``Unavailable``."""

KIND_OF = {"bwrap": "local"}
"""Labels that are a settings variant of a backend kind."""

SDK_LOOP = "sdk-loop"
"""The label of the plain docker SDK loop's rows (the docker sweep's baseline)."""


@dataclass
class Throughput:
    """Episodes/s of one backend at one concurrency."""

    backend: str
    concurrency: int
    episodes: int
    finished: list[float]
    """Seconds from the run's start at which each episode finished."""

    def figures(self) -> tuple[float, float, float]:
        """Overall episodes/s, seconds to the first finished episode, steady episodes/s."""
        n, first, last = len(self.finished), self.finished[0], self.finished[-1]
        steady = (n - 1) / (last - first) if last > first else float("nan")
        return n / last, first, steady

    def line(self) -> str:
        overall, first, steady = self.figures()
        return (
            f"{self.backend:<8} {self.concurrency:>11} {len(self.finished):>9} {overall:>13.1f} "
            f"{first:>16.2f} {steady:>12.1f}"
        )


def episodes_per_sec(
    label: str, settings: dict[str, Any], episodes: int, concurrency: int, root: Path
) -> Throughput:
    """Run the trivial suite with the oracle through the real runner; when episodes finished."""
    from crabray.agents import agent_spec
    from crabray.run import RunSpec, run_suite

    if "backend=KIND" not in SUITE:
        raise RuntimeError("the suite of scripts/bench_episodes.py changed: adapt SUITE here")
    suite = root / f"suite_{label}_{concurrency}.py"
    text = SUITE.replace("KIND", repr(KIND_OF.get(label, label)))
    suite.write_text(text.replace("SETTINGS", repr(settings)).replace("N_TASKS", str(episodes)))
    options = RunSpec.of(
        suite=str(suite),
        out_dir=root / f"out_{label}_{concurrency}",
        concurrency=concurrency,
    )
    finished: list[float] = []
    t0 = time.perf_counter()

    def mark(progress: Any) -> None:
        now = time.perf_counter() - t0
        finished.extend([now] * (progress.done - len(finished)))

    summary = run_suite(options, [agent_spec("oracle")], on_progress=mark)
    if summary.successes != summary.planned:
        logger.warning(
            "%s c=%d: only %d of %d episodes succeeded",
            label,
            concurrency,
            summary.successes,
            summary.planned,
        )
    return Throughput(label, concurrency, episodes, finished)


def bench_episodes(
    labels: list[str], episodes: int, docker_image: str | None = None
) -> list[Throughput]:
    """Episodes/s of every available backend in ``labels`` at concurrency 1 and 2.

    ``docker_image`` replaces busybox in the docker sweep, crabray's and the SDK
    loop's alike: an image with python3 (``crabray/debian``) has crabray read the
    evaluator's file through the container's guest, where busybox leaves it the
    archive API the SDK loop uses.
    """
    import ray

    from crabray.cluster.runtime.ray_runtime import connect

    kinds = {KIND_OF.get(label, label) for label in labels}
    results: list[Throughput] = []
    with contextlib.ExitStack() as stack:
        root = Path(tempfile.mkdtemp(prefix="crabray-bench-episodes-"))
        stack.callback(shutil.rmtree, root, ignore_errors=True)
        connect(hosts=dict.fromkeys(kinds, 4))  # 2 x the highest concurrency, as the runner does
        try:
            for label in labels:
                try:
                    settings = SETUPS[label](root / label, stack)
                    if label == "docker" and docker_image:
                        settings = {"image": docker_image}
                except Unavailable as exc:
                    logger.info("episodes on %s: skipped: %s", label, exc)
                    continue
                logger.info("episodes on %s (%d per run) ...", label, episodes)
                for concurrency in (1, 2):
                    results.append(episodes_per_sec(label, settings, episodes, concurrency, root))
                    if label == "docker":  # beside it, the plain SDK loop (docker_sdk_loop.py)
                        finished = sdk_loop(settings, episodes, concurrency)
                        results.append(Throughput(SDK_LOOP, concurrency, episodes, finished))
        finally:
            ray.shutdown()  # pooled sandboxes close before the sshd serving them stops
    return results


def check_file_exist(file_path: str) -> bool:
    """The seed's evaluator: a plain function, so it runs inside the sandbox (its guest)."""
    return os.path.isfile(file_path)


def bench_guest(label: str, n: int) -> list[Row]:
    """A command through the guest and a Python call, each beside one plain exec of ``true``."""
    from crabray.backends import create_backend
    from crabray.backends.episode_env import EpisodeEnv
    from crabray.core import evaluator
    from crabray.core.env import AgentSignals
    from crabray.core.environment import EnvironmentConfig

    with contextlib.ExitStack() as stack:
        root = Path(tempfile.mkdtemp(prefix="crabray-bench-guest-"))
        stack.callback(shutil.rmtree, root, ignore_errors=True)
        settings = SETUPS[label](root, stack)
        if label == "docker":
            settings = {"image": DEBIAN}
        if label == "vm" and (VM_PYTHON_IMAGE / "vmlinuz").is_file():
            settings = {**settings, "image_dir": str(VM_PYTHON_IMAGE), "memory_mb": 512}
        kind = {"bwrap": "local"}.get(label, label)
        config = EnvironmentConfig(name="bench", backend=kind, backend_settings=settings)
        backend = create_backend(config)
        backend.start()
        stack.callback(backend.close)
        local = label in ("local", "bwrap")
        guest_start = 0.0 if local else timed(backend.check_python)  # no python3: no rows
        plain = _plain_exec(label, backend, settings, stack)
        plain_times = [timed(plain) for _ in range(5 * n)] if plain else []
        if local:
            guest_start = timed(backend.check_python)
        env = EpisodeEnv("bench", backend, AgentSignals())
        check = evaluator(check_file_exist)(file_path="made.txt")
        execs, calls, plains = [], [], []
        for _ in range(5 * n):
            execs.append(timed(lambda: backend.exec(["true"])))
            calls.append(timed(lambda: check.evaluate(env)))
            if plain is not None:
                plains.append(timed(plain))
        if local:
            plains = plain_times  # after the guest is up, local's exec is the guest's
        after_reset = []
        for _ in range(min(n, 5)):
            backend.reset()
            time.sleep(1.0)  # an episode: docker warms the next container and its guest
            after_reset.append(timed(lambda: check.evaluate(env)))
        return [
            Row(label, "guest start (once)", [guest_start], None),
            Row(label, "1st call after reset", after_reset, None),
            Row(label, "exec via guest", execs, plains or None),
            Row(label, "python call", calls, plains or None),
        ]


def _plain_exec(
    label: str, backend: Any, settings: dict[str, Any], stack: contextlib.ExitStack
) -> Callable[[], object] | None:
    """One exec of ``true`` without the guest (see ``bench_guest``); None for the VM."""
    if label in ("local", "bwrap"):
        return lambda: backend.exec(["true"])  # measured before the guest starts
    if label == "docker":
        import docker

        client = stack.enter_context(contextlib.closing(docker.from_env()))
        container = client.containers.get(backend.describe()["container"])
        return lambda: container.exec_run(["true"])
    if label != "ssh":
        return None
    import paramiko

    client = stack.enter_context(contextlib.closing(paramiko.SSHClient()))
    client.load_host_keys(settings["known_hosts"])
    client.connect(
        settings["host"],
        port=settings["port"],
        username=settings["user"],
        key_filename=settings["key_path"],
        look_for_keys=False,
        allow_agent=False,
    )

    def run() -> None:
        _, stdout, _ = client.exec_command("exec true")
        stdout.channel.recv_exit_status()

    return run


BENCHES: dict[str, Callable[[int, float], list[Row]]] = {
    "local": bench_local,
    "bwrap": lambda n, episode_sec: bench_local(n, episode_sec, confined=True),
    "docker": bench_docker,
    "ssh": bench_ssh,
    "vm": bench_vm,
}
"""Per backend label, the function that measures its start, reset and exec."""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", action="append", choices=sorted(BENCHES))
    parser.add_argument("--n", type=int, default=20, help="Repetitions of each operation.")
    parser.add_argument(
        "--episode-sec", type=float, default=1.5, help="Idle time of the simulated episode."
    )
    parser.add_argument(
        "--episodes", type=int, default=40, help="Episodes per run of the trivial suite."
    )
    parser.add_argument("--no-latency", action="store_true", help="Only the episodes/s rows.")
    parser.add_argument("--no-episodes", action="store_true", help="Only the latency rows.")
    parser.add_argument("--no-guest", action="store_true", help="Leave out the guest rows.")
    parser.add_argument(
        "--sweep-image",
        help="Image of the docker sweep rows instead of crabray/busybox (e.g. crabray/debian, "
        "which has python3: crabray's commands and file reads then go through its guest).",
    )
    parser.add_argument(
        "--quick", action="store_true", help="A short look: --n 5 --episodes 12 --episode-sec 0.2."
    )
    parser.add_argument(
        "--smoke",
        action="store_true",
        help="Does it run (CI): --quick on the local backend, 6 episodes, docker sweep rows.",
    )
    args = parser.parse_args()
    sweep_labels = list(args.backend or BENCHES)
    if args.smoke:
        args.quick, args.backend = True, args.backend or ["local"]
        sweep_labels = list(dict.fromkeys([*args.backend, "docker"]))  # the SDK loop's rows too
    if args.quick:
        args.n, args.episodes, args.episode_sec = 5, 12, 0.2
    if args.smoke:
        args.episodes = 6  # four docker sweeps (crabray and the SDK loop, c=1 and 2) in CI
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    logging.getLogger("crabray").setLevel(logging.WARNING)
    logging.getLogger("paramiko").setLevel(logging.WARNING)
    labels = args.backend or list(BENCHES)
    rows: list[Row] = []
    for label in [] if args.no_latency else labels:
        logger.info("measuring %s (%d repetitions) ...", label, args.n)
        try:
            rows += BENCHES[label](args.n, args.episode_sec)
        except Unavailable as exc:
            logger.info("%s: skipped: %s", label, exc)
    from crabray.core.errors import CrabrayError

    guest_rows: list[Row] = []
    for label in [] if args.no_guest else labels:
        logger.info("measuring the guest of %s ...", label)
        try:
            guest_rows += bench_guest(label, args.n)
        except (Unavailable, CrabrayError) as exc:
            logger.info("%s: no guest rows: %s", label, exc)
    load_before = os.getloadavg()[0]  # the sweeps' figures swing with the machine's load
    throughput = (
        [] if args.no_episodes else bench_episodes(sweep_labels, args.episodes, args.sweep_image)
    )
    if rows:
        report_latency(rows)
    if guest_rows:
        report_guest(guest_rows)
    if throughput:
        logger.info("")
        logger.info(
            "trivial suite (one-action episodes, oracle agent) on local Ray; "
            "load average %.1f before the sweeps, %.1f after",
            load_before,
            os.getloadavg()[0],
        )
        logger.info(
            f"{'backend':<8} {'concurrency':>11} {'episodes':>9} {'overall ep/s':>13} "
            f"{'first episode s':>16} {'steady ep/s':>12}"
        )
        for result in throughput:
            logger.info(result.line())
        report_sweep_ratio(throughput)


def report_sweep_ratio(throughput: list[Throughput]) -> None:
    """The plain SDK loop's episodes/s over crabray's pooled docker sweep's, per concurrency.

    Overall counts the whole sweep (crabray's includes starting its actors);
    steady counts from the first finished episode on.
    """
    for sdk in (t for t in throughput if t.backend == SDK_LOOP):
        ours = next(
            t for t in throughput if t.backend == "docker" and t.concurrency == sdk.concurrency
        )
        (sdk_all, _, sdk_steady), (our_all, _, our_steady) = sdk.figures(), ours.figures()
        logger.info(
            "docker pooled sweep, concurrency %d: plain SDK loop / crabray episodes/s = %.2f "
            "overall (%.1f against %.1f), %.2f steady (%.1f against %.1f); target at most 1.5",
            sdk.concurrency,
            sdk_all / our_all,
            sdk_all,
            our_all,
            sdk_steady / our_steady,
            sdk_steady,
            our_steady,
        )


def report_guest(rows: list[Row]) -> None:
    """The guest table; the overhead column is against one plain exec of ``true``."""
    logger.info("")
    logger.info("guest: a command and a Python call in a warm sandbox, beside a plain exec")
    header = f"{'backend':<8} {'operation':<22} {'p50 ms':>9} {'p95 ms':>9} "
    logger.info(header + f"{'exec p50':>9} {'exec p95':>9} {'vs exec':>9}")
    for row in rows:
        logger.info(row.line())
    for row in rows:
        if row.operation == "python call" and row.raw:
            ratio = statistics.median(row.crabray) / statistics.median(row.raw)
            p50_ms = statistics.median(row.crabray) * 1e3
            logger.info(
                "%s: a Python call costs %.2fx a plain exec (target under 2x); p50 %.2f ms "
                "(target at most 10 ms)",
                row.backend,
                ratio,
                p50_ms,
            )


def report_latency(rows: list[Row]) -> None:
    """The latency table, then whether each reset beats a start by 3x."""
    header = f"{'backend':<8} {'operation':<22} {'p50 ms':>9} {'p95 ms':>9} "
    logger.info(header + f"{'raw p50':>9} {'raw p95':>9} {'overhead':>9}")
    for row in rows:
        logger.info(row.line())
    for kind in dict.fromkeys(row.backend for row in rows):
        start = next(r for r in rows if r.backend == kind and r.operation == "start")  # warm start
        for reset in (r for r in rows if r.backend == kind and r.operation.startswith("reset")):
            ratio = statistics.median(start.crabray) / statistics.median(reset.crabray)
            verdict = "beats" if ratio >= 3 else "does not beat"
            logger.info(
                "%s: %s is %.1fx faster than start: %s the 3x target",
                kind,
                reset.operation,
                ratio,
                verdict,
            )


if __name__ == "__main__":
    main()
