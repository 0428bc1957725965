"""An S3-compatible server on loopback for the tests: moto's, started as its own process."""

from __future__ import annotations

import importlib.util
import os
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

CREDENTIALS = {
    "AWS_ACCESS_KEY_ID": "crabray-test",
    "AWS_SECRET_ACCESS_KEY": "crabray-test-secret",
    "AWS_DEFAULT_REGION": "us-east-1",
}


@dataclass(frozen=True)
class S3Server:
    """Where the server listens, and how a URI reaches it (pyarrow's query parameters)."""

    host: str
    port: int

    @property
    def endpoint(self) -> str:
        return f"{self.host}:{self.port}"

    def uri(self, bucket: str, prefix: str = "") -> str:
        """``s3://bucket/prefix`` aimed at this server over plain HTTP."""
        path = f"{bucket}/{prefix}".rstrip("/")
        return f"s3://{path}?endpoint_override={self.endpoint}&scheme=http"

    def create_bucket(self, name: str) -> None:
        import pyarrow.fs as pafs

        store = pafs.S3FileSystem(
            endpoint_override=self.endpoint,
            scheme="http",
            allow_bucket_creation=True,
            access_key=CREDENTIALS["AWS_ACCESS_KEY_ID"],
            secret_key=CREDENTIALS["AWS_SECRET_ACCESS_KEY"],
            region=CREDENTIALS["AWS_DEFAULT_REGION"],
        )
        store.create_dir(name)


def _free_port(host: str) -> int:
    with socket.socket() as probe:
        probe.bind((host, 0))
        return int(probe.getsockname()[1])


def start_moto(host: str = "127.0.0.1") -> Iterator[S3Server]:
    """Run ``moto.server`` on a free port of ``host`` until the generator is closed."""
    if importlib.util.find_spec("moto") is None:
        if os.environ.get("CI") == "true":
            pytest.fail("moto is not installed: pip install -e '.[dev]'")
        pytest.skip("needs moto's S3 server: pip install 'moto[server]' (in the dev extra)")
    port = _free_port(host)
    server = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", host, "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                urllib.request.urlopen(f"http://{host}:{port}/moto-api/", timeout=2).close()
                break
            except OSError:
                if server.poll() is not None or time.monotonic() > deadline:
                    pytest.fail(f"moto's S3 server did not start on {host}:{port}")
                time.sleep(0.1)
        yield S3Server(host, port)
    finally:
        server.terminate()
        server.wait(timeout=30)
