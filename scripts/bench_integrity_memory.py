"""Peak worker memory while grading what a hostile sandbox holds, against a baseline.

Issue 24's target: grading a 1.5 GiB sparse file with ``file_equals`` and
``file_contains``, and answering a plain-Python call that returns a large value,
must keep the peak RSS of the process that grades (a Ray worker in a run) under
300 MB, whatever the sandbox holds. This script is that process: it starts a
sandbox (a confined local one, and a docker one of ``crabray/debian`` when the
engine and the image are there), then for each measurement resets the
process's peak (``/proc/self/clear_refs``, ``5``) and reads it back
(``VmHWM``). The baseline is grading a tiny file in the same run; the table
shows each peak and its ratio to the baseline.

Usage: python scripts/bench_integrity_memory.py [--smoke]
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from crabray.actions import file_contains, file_equals  # noqa: E402
from crabray.backends import Backend, create_backend  # noqa: E402
from crabray.backends.environment import AgentSignals, Environment  # noqa: E402
from crabray.backends.guest import python_call  # noqa: E402
from crabray.core import action  # noqa: E402
from crabray.core.environment import EnvironmentConfig  # noqa: E402
from crabray.core.errors import ActionError, CrabrayError  # noqa: E402

TARGET_MB = 300
SPARSE = "truncate -s 1536M big.txt"


@action
def large_value(megabytes: int) -> str:
    """A value of ``megabytes`` MiB, built and returned inside the sandbox."""
    return "x" * (megabytes * 2**20)


def peak_mb(work: Callable[[], Any]) -> float:
    """The process's peak resident memory (MiB) while ``work`` runs (the peak reset first)."""
    Path("/proc/self/clear_refs").write_text("5")
    work()
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmHWM in /proc/self/status")


def grade(env: Environment, path: str) -> None:
    """Both shipped file checks on ``path``; the answer is "42"."""
    file_equals(path=path, content="42").evaluate(env, None)
    file_contains(path=path, text="42").evaluate(env, None)


def call(env: Environment, megabytes: int) -> None:
    """A plain-Python call returning ``megabytes`` MiB; refused past the cap (an action error)."""
    with contextlib.suppress(ActionError):
        env.backend.call_python(python_call(large_value, {"megabytes": megabytes}))


def measure(backend: Backend, value_mb: int) -> dict[str, float]:
    env = Environment("bench", backend, AgentSignals())
    backend.exec(f"echo 42 > tiny.txt && {SPARSE}")
    backend.check_python()
    call(env, 1)  # the guest and the call's source are warm before any figure
    grade(env, "tiny.txt")
    return {
        "grade a tiny file (baseline)": peak_mb(lambda: grade(env, "tiny.txt")),
        "grade a 1.5 GiB sparse file": peak_mb(lambda: grade(env, "big.txt")),
        "a call returning 1 MiB": peak_mb(lambda: call(env, 1)),
        "a call returning 15 MiB (cap 16)": peak_mb(lambda: call(env, 15)),
        f"a call returning {value_mb} MiB": peak_mb(lambda: call(env, value_mb)),
    }


def sandboxes(smoke: bool) -> list[tuple[str, EnvironmentConfig]]:
    root = tempfile.mkdtemp(prefix="bench-integrity-")
    local = {"isolation": "bwrap", "root_dir": root}
    found = [("local", EnvironmentConfig(name="bench", backend="local", backend_settings=local))]
    if not smoke:
        why = _docker_missing()
        if why is None:
            settings = {"image": "crabray/debian:latest", "memory_mb": 1024}
            found.append(("docker", EnvironmentConfig(name="bench", backend="docker",
                                                      backend_settings=settings)))  # fmt: skip
        else:
            print(f"docker: skipped ({why})")
    return found


def _docker_missing() -> str | None:
    try:
        import docker

        client = docker.from_env()
        client.images.get("crabray/debian:latest")
        client.close()
    except Exception as exc:
        return f"{type(exc).__name__}: {exc}; start dockerd and run `crabray envs build debian`"
    return None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--smoke", action="store_true", help="local only, a smaller value")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    value_mb = 64 if args.smoke else 150
    rows: list[tuple[str, str, float, float]] = []
    for kind, config in sandboxes(args.smoke):
        backend = create_backend(config)
        t0 = time.monotonic()
        try:
            backend.start()
            figures = measure(backend, value_mb)
        except CrabrayError as exc:
            print(f"{kind}: failed: {exc}")
            raise SystemExit(1) from exc
        finally:
            backend.close()
        base = next(iter(figures.values()))
        rows += [(kind, what, mb, mb / base) for what, mb in figures.items()]
        print(f"{kind}: measured in {time.monotonic() - t0:.1f} s")
    print(f"\nPeak RSS of the grading process (target: under {TARGET_MB} MB)")
    print(f"{'backend':8} {'what':34} {'peak MB':>8} {'/ baseline':>10}  ")
    for kind, what, mb, ratio in rows:
        flag = "" if mb < TARGET_MB else "  OVER TARGET"
        print(f"{kind:8} {what:34} {mb:8.1f} {ratio:10.2f}{flag}")
    if any(mb >= TARGET_MB for _, _, mb, _ in rows):
        raise SystemExit(f"a peak reached {TARGET_MB} MB")


if __name__ == "__main__":
    main()
