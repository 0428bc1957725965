"""The docker backend building its image from a Dockerfile (``build_context``), for real.

Images are built on the real engine from a Dockerfile in a temporary folder
(FROM crabray/busybox, so no registry and no network are needed), tagged by
their content, reused while the folder is unchanged; a failing step is an
error quoting the step's output. ``network: host`` reaches a server the test
runs on the host's loopback.
"""

from __future__ import annotations

import http.server
import logging
import threading
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from crabray.backends import create_backend
from crabray.backends.docker._engine import BUILD_REPOSITORY, from_images, substitute_from
from crabray.core.environment import EnvironmentConfig
from crabray.core.errors import ConfigError, SandboxError
from tests.backends.docker.dockerd import BUSYBOX_IMAGE, require_env_image

pytest.importorskip("docker")

Make = Callable[..., Any]


@pytest.fixture
def context(tmp_path: Path) -> Path:
    """A build context folder with a unique name (so its image tag is new)."""
    folder = tmp_path / f"ctx-{uuid.uuid4().hex[:8]}"
    folder.mkdir()
    return folder


@pytest.fixture
def make(client: Any) -> Iterator[Make]:
    """Start docker backends with the given settings; every one is closed afterwards,
    and the images built for them are removed."""
    made: list[Any] = []

    def start(**settings: Any) -> Any:
        config = EnvironmentConfig(
            name="buildtest",
            backend="docker",
            backend_settings={"warm_spare": False, **settings},
        )
        backend = create_backend(config)
        made.append(backend)
        backend.start()
        return backend

    yield start
    for backend in made:
        backend.close()
    built = {b.describe()["image"] for b in made}
    for tag in sorted(t for t in built if t and t.startswith(f"{BUILD_REPOSITORY}/")):
        client.images.remove(tag, force=True)


def _write(folder: Path, dockerfile: str, **files: str) -> None:
    (folder / "Dockerfile").write_text(dockerfile)
    for name, text in files.items():
        (folder / name).write_text(text)


def _image_id(client: Any, backend: Any) -> str:
    return client.images.get(backend.describe()["image"]).id


def test_builds_from_dockerfile_with_a_copied_file(make: Make, context: Path) -> None:
    marker = uuid.uuid4().hex
    _write(
        context,
        f"FROM {BUSYBOX_IMAGE}\nCOPY data.txt /opt/data.txt\nRUN echo built > /opt/run.txt\n",
        **{"data.txt": marker},
    )
    backend = make(build_context=str(context))
    assert backend.exec("cat /opt/data.txt /opt/run.txt").stdout == f"{marker}built\n"
    assert backend.describe()["image"].startswith(f"{BUILD_REPOSITORY}/{context.name}:")


def test_base_image_replaces_every_from(make: Make, context: Path) -> None:
    _write(
        context,
        "FROM ghcr.io/theagentcompany/task-base-image:1.0.0\nRUN echo ok > /root/ok\n",
    )
    backend = make(build_context=str(context), base_image=BUSYBOX_IMAGE)
    assert backend.get_file("/root/ok") == b"ok\n"


def test_substitution_keeps_references_to_stages() -> None:
    text = (
        "FROM --platform=linux/amd64 python:3.12 AS build\n"
        "RUN make\n"
        "from debian:12\n"
        "COPY --from=build /app /app\n"
        "FROM build AS final\n"
    )
    assert substitute_from(text, "crabray/task-base:latest") == (
        "FROM --platform=linux/amd64 crabray/task-base:latest AS build\n"
        "RUN make\n"
        "from crabray/task-base:latest\n"
        "COPY --from=build /app /app\n"
        "FROM build AS final\n"
    )
    assert from_images(text) == ["python:3.12", "debian:12"]
    assert from_images("FROM scratch\n") == []


def test_second_start_reuses_the_image_and_a_change_rebuilds(
    make: Make, context: Path, client: Any, caplog: pytest.LogCaptureFixture
) -> None:
    _write(context, f"FROM {BUSYBOX_IMAGE}\nCOPY a.txt /a.txt\n", **{"a.txt": uuid.uuid4().hex})
    with caplog.at_level(logging.INFO, logger="crabray.backends"):
        first = make(build_context=str(context))
    assert any("building docker image" in r.getMessage() for r in caplog.records)
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="crabray.backends"):
        second = make(build_context=str(context))
    assert not any("building docker image" in r.getMessage() for r in caplog.records)
    assert second.describe()["image"] == first.describe()["image"]
    assert _image_id(client, second) == _image_id(client, first)

    (context / "a.txt").write_text("changed")
    third = make(build_context=str(context))
    assert third.describe()["image"] != first.describe()["image"]
    assert third.get_file("/a.txt") == b"changed"


def test_failing_step_names_the_dockerfile_the_step_and_its_output(
    make: Make, context: Path, client: Any
) -> None:
    _write(
        context,
        f"FROM {BUSYBOX_IMAGE}\nRUN echo first-step\n"
        "RUN echo boom-output-line && echo on-stderr >&2 && exit 3\n",
    )
    before = {c.id for c in client.containers.list(all=True)}
    with pytest.raises(SandboxError) as caught:
        make(build_context=str(context))
    message = str(caught.value)
    assert str(context / "Dockerfile") in message
    assert "Step 3/4 : RUN echo boom-output-line" in message  # the 4th step: our LABEL
    assert "returned a non-zero code: 3" in message
    output = message.split("Last lines", 1)[1]
    assert "boom-output-line" in output and "on-stderr" in output
    assert "\x1b[" not in output
    assert "first-step" not in message
    # No intermediate container of the failed step is left behind (other containers may
    # come and go meanwhile: the engine is shared with whatever else runs on the host).
    left = [
        c.id
        for c in client.containers.list(all=True)
        if c.id not in before and "boom-output-line" in " ".join(c.attrs["Config"]["Cmd"] or [])
    ]
    assert left == []


@pytest.mark.parametrize("missing", ["context", "dockerfile"])
def test_missing_context_or_dockerfile_names_the_path(
    make: Make, tmp_path: Path, missing: str
) -> None:
    folder = tmp_path / "nothere" if missing == "context" else tmp_path
    with pytest.raises(SandboxError) as caught:
        make(build_context=str(folder), dockerfile="Other.dockerfile")
    expected = str(folder) if missing == "context" else str(folder / "Other.dockerfile")
    assert expected in str(caught.value)


def test_missing_base_image_is_named_with_the_dockerfile(make: Make, context: Path) -> None:
    _write(context, "FROM example.invalid/none:1\n")
    with pytest.raises(SandboxError, match=r"base image 'example.invalid/none:1'.*Dockerfile"):
        make(build_context=str(context))


@pytest.mark.parametrize(
    ("settings", "field", "reason"),
    [
        ({"build_context": "relative/dir"}, "build_context", "absolute"),
        ({"build_context": "/x", "image": BUSYBOX_IMAGE}, "image", "build_context' alone"),
        ({"build_context": "/x", "dockerfile": "../Dockerfile"}, "dockerfile", "inside"),
        ({"image": BUSYBOX_IMAGE, "base_image": "x"}, "image", "build_context' only"),
    ],
)
def test_build_settings_errors_name_the_field(
    settings: dict[str, Any], field: str, reason: str
) -> None:
    config = EnvironmentConfig(name="bad", backend="docker", backend_settings=settings)
    with pytest.raises(ConfigError, match=reason) as caught:
        create_backend(config)
    assert caught.value.field == f"backend_settings.{field}"


class _Hello(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = b"hello from the host loopback"
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def loopback_server() -> Iterator[int]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Hello)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server.server_address[1]
    server.shutdown()
    server.server_close()


def test_host_network_reaches_a_loopback_server(make: Make, loopback_server: int) -> None:
    url = f"http://127.0.0.1:{loopback_server}/"
    host = make(image=BUSYBOX_IMAGE, network="host")
    result = host.exec(f"wget -qO- {url}", timeout_sec=20)
    assert result.stdout == "hello from the host loopback", result
    isolated = make(image=BUSYBOX_IMAGE)
    assert not isolated.exec(f"wget -qO- -T 2 {url}", timeout_sec=20).ok


def test_task_folder_dockerfile_builds_on_task_base(make: Make, context: Path) -> None:
    """A task folder's Dockerfile, its FROM replaced by crabray/task-base, as the
    task-folder format runs it: the layout exists, /workspace is where commands start."""
    require_env_image("task-base")
    _write(
        context,
        "FROM ghcr.io/theagentcompany/task-base-image:1.0.0\n"
        "COPY task.md /instruction/\n"
        "RUN echo seeded > /workspace/seed.txt\n",
        **{"task.md": "Do the thing.\n"},
    )
    backend = make(build_context=str(context), base_image="crabray/task-base:latest")
    assert backend.get_file("/instruction/task.md") == b"Do the thing.\n"
    assert backend.get_file("seed.txt") == b"seeded\n"  # relative to the image's WORKDIR
    assert backend.exec("pwd").stdout == "/workspace\n"
    versions = backend.exec("python --version && python3 --version").stdout.split("\n")
    # Debian trixie's python3, so evaluators written for TAC's Python 3.12 parse
    assert versions[0] == versions[1] and versions[0].startswith("Python 3.13")
    layout = backend.exec("ls -d /utils /instruction /workspace /outputs").stdout.split()
    assert layout == ["/instruction", "/outputs", "/utils", "/workspace"]
    as_user = backend.exec("su user -s /bin/sh -c 'touch /outputs/u /workspace/u && echo ok'")
    assert as_user.stdout == "ok\n", as_user
