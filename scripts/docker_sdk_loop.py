"""The baseline of the docker sweep rows of ``bench_sandboxes.py``: a plain docker SDK loop.

One episode of the trivial suite, done with the docker SDK alone: a new
container from the same image with the same options crabray gives its
containers (what a pooled reset swaps in: a container no episode used), one
exec (``echo N > out.txt`` in the image's working directory), one file check
(the file read back through the archive API and compared), and the container
removed. ``concurrency`` threads run episodes side by side, each with its own
client, as crabray's actors do. Nothing is prepared ahead: this is the loop a
user would write without crabray, which crabray's pooled sweep (warm spares,
Ray actors, Parquet results) is measured against.
"""

from __future__ import annotations

import io
import posixpath
import tarfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any


def sdk_loop(settings: dict[str, Any], episodes: int, concurrency: int) -> list[float]:
    """Run ``episodes`` SDK episodes on ``concurrency`` threads; when each one finished.

    Returns:
        Seconds from the loop's start at which each episode finished, sorted.

    Raises:
        RuntimeError: An episode's file check failed (the loop did not do the work).
    """
    import docker

    from crabray.backends.docker import parse_docker_settings

    parsed = parse_docker_settings(settings)
    image = parsed.image_name or ""
    options = parsed.container_options()
    setup = docker.from_env()
    workdir = parsed.workdir or setup.images.get(image).attrs["Config"].get("WorkingDir") or "/"
    setup.close()
    finished: list[float] = []
    lock = threading.Lock()
    numbers = iter(range(episodes))
    t0 = time.perf_counter()

    def worker() -> None:
        client = docker.from_env()
        try:
            while True:
                with lock:
                    number = next(numbers, None)
                if number is None:
                    return
                one_episode(client, image, parsed.command, options, workdir, number)
                with lock:
                    finished.append(time.perf_counter() - t0)
        finally:
            client.close()

    with ThreadPoolExecutor(concurrency) as pool:
        for future in [pool.submit(worker) for _ in range(concurrency)]:
            future.result()
    return sorted(finished)


def one_episode(
    client: Any,
    image: str,
    command: list[str] | None,
    options: dict[str, Any],
    workdir: str,
    number: int,
) -> None:
    """New container, one exec, one file check, removal."""
    container = client.containers.run(image, command, detach=True, **options)
    try:
        exit_code, output = container.exec_run(
            ["/bin/sh", "-c", f"echo {number} > out.txt"], workdir=workdir
        )
        if exit_code != 0:
            raise RuntimeError(f"SDK loop: the episode's command failed: {output!r}")
        stream, _ = container.get_archive(posixpath.join(workdir, "out.txt"))
        with tarfile.open(fileobj=io.BytesIO(b"".join(stream))) as archive:
            member = archive.extractfile("out.txt")
            content = member.read().decode() if member else ""
        if content.strip() != str(number):
            raise RuntimeError(f"SDK loop: out.txt holds {content!r}, not {number}")
    finally:
        container.remove(force=True, v=True)
