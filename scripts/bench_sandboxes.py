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

One function per backend (``bench_docker``, ...) returns its rows; add a
backend by writing its function and listing it in ``BENCHES``.

Usage: python scripts/bench_sandboxes.py [--backend docker] [--n 20] [--episode-sec 1.5]
"""

from __future__ import annotations

import argparse
import logging
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass

logger = logging.getLogger("bench_sandboxes")

BUSYBOX = "crabray/busybox:latest"


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
    from crabray.backends.docker_settings import parse_docker_settings
    from crabray.core.environment import EnvironmentConfig

    settings = {"image": BUSYBOX, "build": "busybox"}
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
    exec_ours: list[float] = []
    exec_raw: list[float] = []
    for _ in range(5 * n):
        exec_ours.append(timed(lambda: warm.exec(["true"])))
        exec_raw.append(timed(lambda: raw.exec_run(["true"])))
    warm.close()
    cold.close()
    raw.remove(force=True, v=True)
    client.close()
    return [
        Row("docker", "start", start_ours, start_raw),
        Row("docker", "reset (warm spare)", reset_warm, reset_raw),
        Row("docker", "reset (recreate)", reset_cold, reset_raw),
        Row("docker", "exec `true`", exec_ours, exec_raw),
    ]


def bench_vm(n: int, episode_sec: float) -> list[Row]:
    """Start, reset and exec of the vm backend (test VM of envs/vm/build.sh) against raw
    QMP ``loadvm`` plus a fresh paramiko login, and a raw paramiko exec."""
    from pathlib import Path

    import paramiko

    from crabray.backends import create_backend
    from crabray.backends.vm import SNAPSHOT, VmBackend
    from crabray.core.environment import EnvironmentConfig

    image = Path(__file__).resolve().parents[1] / "envs" / "vm" / "out"
    settings = {"image_dir": str(image), "memory_mb": 192}

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

    def raw_exec() -> None:
        _, stdout, _ = raw_client.exec_command("true")
        stdout.channel.recv_exit_status()

    exec_ours: list[float] = []
    exec_raw: list[float] = []
    for _ in range(5 * n):
        exec_ours.append(timed(lambda: vm.exec(["true"])))
        exec_raw.append(timed(raw_exec))
    raw_client.close()
    vm.close()
    restart.close()
    return [
        Row("vm", "start (fresh boot)", start_boot, None),
        Row("vm", "start", start_ours, None),
        Row("vm", "reset (loadvm)", reset_ours, reset_raw),
        Row("vm", "reset (restart)", reset_restart, None),
        Row("vm", "exec `true`", exec_ours, exec_raw),
    ]


BENCHES: dict[str, Callable[[int, float], list[Row]]] = {"docker": bench_docker, "vm": bench_vm}
"""Per backend kind, the function that measures it."""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", action="append", choices=sorted(BENCHES))
    parser.add_argument("--n", type=int, default=20, help="Repetitions of each operation.")
    parser.add_argument(
        "--episode-sec", type=float, default=1.5, help="Idle time of the simulated episode."
    )
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    rows: list[Row] = []
    for kind in args.backend or sorted(BENCHES):
        logger.info("measuring %s (%d repetitions) ...", kind, args.n)
        rows += BENCHES[kind](args.n, args.episode_sec)
    header = f"{'backend':<8} {'operation':<22} {'p50 ms':>9} {'p95 ms':>9} "
    logger.info(header + f"{'raw p50':>9} {'raw p95':>9} {'overhead':>9}")
    for row in rows:
        logger.info(row.line())
    for kind in {row.backend for row in rows}:
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
