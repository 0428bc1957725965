"""The Docker engine itself: connecting with a clear error, labels, pruning orphans,
and building images from a Dockerfile.

Every container and snapshot image crabray makes carries ``crabray=1`` and an
owner label (host, pid and start time of the process that made it); pruning
removes those whose owner is dead on this host, or all of them when asked.

An image built from a ``build_context`` is tagged by a hash of what the
build sees (the context's files after ``.dockerignore``, the Dockerfile with
its FROM lines substituted, the base image), so a second sandbox of the same
folder reuses it and any change to the folder builds a new one.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import logging
import os
import re
import tempfile
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import docker
import requests
from docker.errors import APIError, DockerException, ImageNotFound, NotFound
from docker.models.containers import Container
from docker.models.images import Image
from docker.utils.build import create_archive, exclude_paths

from crabray.backends.docker._settings import DockerSettings
from crabray.backends.envs import (
    INPUTS_LABEL,
    available_envs,
    build_env,
    build_lock,
    env_bases,
    env_image,
    inputs_digest,
)
from crabray.backends.ownership import owner_tag_is_dead
from crabray.backends.wipe import remove_entry
from crabray.core.errors import CrabrayError, SandboxError, SandboxHostError

logger = logging.getLogger(__name__)

ENGINE_ERRORS: tuple[type[Exception], ...] = (DockerException, requests.RequestException)
"""What a failing engine raises: the SDK's own errors, and the HTTP layer's for a
connection that drops or is refused (the SDK does not wrap those)."""

LABEL = "crabray"
"""Label every crabray container and snapshot image carries (value ``1``)."""
LABEL_ENV, LABEL_RUN, LABEL_OWNER = "crabray.env", "crabray.run", "crabray.owner"
LABEL_SANDBOX = "crabray.sandbox"
"""Identifies one backend instance: its container, its spare and its snapshot image."""
LABEL_SNAPSHOT = "crabray.snapshot"


_API_VERSIONS: dict[str, str] = {}
"""The API version each engine (by ``DOCKER_HOST``) answered; asking costs a round trip."""


def connect() -> docker.DockerClient:
    """A client of the engine ``DOCKER_HOST`` (or the local socket) names.

    The first client of an engine in this process asks it for its API version,
    which is where an unreachable engine fails; later clients reuse the answer,
    so their first real request is where a dead engine shows (see
    :func:`unreachable`).

    Raises:
        SandboxError: The engine is unreachable; says what to check.
    """
    where = _where()
    try:
        client = docker.from_env(version=_API_VERSIONS.get(where))
    except ENGINE_ERRORS as exc:
        raise unreachable(exc) from exc
    _API_VERSIONS[where] = client.api.api_version
    return client


def unreachable(exc: Exception) -> SandboxError:
    """The error for an engine that does not answer: what to check and what to run."""
    return SandboxError(
        f"cannot reach the Docker engine at {_where()}: {exc}. Is dockerd running "
        "(`docker info`; start it with `systemctl start docker` or `dockerd &`)? "
        "Is DOCKER_HOST right? Install it with `apt-get install docker.io`."
    )


def _where() -> str:
    return os.environ.get("DOCKER_HOST") or "unix:///var/run/docker.sock"


def prune(*, everything: bool, owner: str | None = None) -> list[str]:
    """Remove crabray's containers and snapshot images whose owner died on this host.

    Args:
        everything: Remove every crabray container and snapshot image, live
            owners' included (``crabray envs prune --all``).
        owner: Only those of this owner tag (a watchdog cleaning up after its owner).

    Returns:
        What was removed, one description each.

    Raises:
        SandboxError: The engine is unreachable.
    """
    client = connect()
    removed: list[str] = []
    try:
        wanted = [f"{LABEL}=1"] + ([f"{LABEL_OWNER}={owner}"] if owner else [])
        for container in _labelled_containers(client, wanted):
            labels = container.labels or {}
            if not everything and not owner_tag_is_dead(labels.get(LABEL_OWNER, "")):
                continue
            try:
                remove_container(container)
            except ENGINE_ERRORS as exc:  # one resisting container never stops the others
                logger.warning("could not remove container %s: %s", container.name, exc)
                continue
            removed.append(f"container {container.name} (env {labels.get(LABEL_ENV, '?')})")
            logger.info(
                "removed %s container %s", "crabray" if everything else "orphaned", container.name
            )
        snapshots = [f"{LABEL_SNAPSHOT}=1"] + ([f"{LABEL_OWNER}={owner}"] if owner else [])
        for image in client.images.list(filters={"label": snapshots}):
            labels = image.labels or {}
            if not everything and not owner_tag_is_dead(labels.get(LABEL_OWNER, "")):
                continue
            try:
                client.images.remove(str(image.id), force=True)
            except NotFound:
                continue
            short_id = str(image.id)[7:19]
            removed.append(f"snapshot image {short_id} (env {labels.get(LABEL_ENV, '?')})")
    except ENGINE_ERRORS as exc:
        raise SandboxError(f"cannot list or remove crabray containers: {exc}") from exc
    finally:
        client.close()
    return removed


def _labelled_containers(client: docker.DockerClient, labels: list[str]) -> list[Container]:
    """Every container with these labels, running or not.

    The engine lists them, then the client asks for each one: a container removed
    in between (another run's cleanup, a watchdog) makes that a 404, so the list
    is asked again, up to three times.

    Raises:
        docker.errors.NotFound: Containers kept vanishing while listed.
    """
    for attempt in range(3):
        try:
            containers: list[Container] = client.containers.list(
                all=True, filters={"label": labels}
            )
            return containers
        except NotFound:
            if attempt == 2:
                raise
    return []


def remove_container(container: Container) -> None:
    """Remove ``container`` and its writable layer, whatever tree its processes left there.

    The engine removes a layer recursively: a tree 24,000 folders deep (or a
    path past its limits) makes that fail ("file name too long", "too many open
    files") and leaves the container dead, "Removal In Progress". Then its
    writable layer is emptied from this host with one open folder at a time
    (:func:`crabray.backends.wipe.remove_entry`) and the removal tried again.
    A container already gone counts as removed.

    Raises:
        docker.errors.APIError: The engine still could not remove it (its layer is not
            on this host, or another error).
    """
    try:
        container.remove(force=True, v=True)
        return
    except NotFound:
        return
    except APIError as exc:
        if not _empty_writable_layer(container):
            raise
        logger.info("emptied the writable layer of container %s: %s", container.name, exc)
    with contextlib.suppress(NotFound):
        container.remove(force=True, v=True)


def _empty_writable_layer(container: Container) -> bool:
    """Empty a stopped container's writable layer from this host; whether it could be.

    Only for an engine on this host whose storage this process may write
    (overlay2's ``UpperDir``, as root); a remote engine's layer is not here.
    """
    with contextlib.suppress(*ENGINE_ERRORS):
        container.kill()
    try:
        container.reload()
    except NotFound:
        return True
    data = (container.attrs.get("GraphDriver") or {}).get("Data") or {}
    upper = data.get("UpperDir")
    if not upper:
        return False
    try:
        fd = os.open(upper, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    except OSError:
        return False
    try:
        for name in os.listdir(fd):
            remove_entry(fd, name)
    except OSError as exc:
        logger.warning("could not empty the layer of container %s: %s", container.name, exc)
        return False
    finally:
        os.close(fd)
    return True


# -- images built from a Dockerfile ---------------------------------------------------------

BUILD_REPOSITORY = "crabray-build"
"""Repository of images built from a ``build_context``; the tag is a content hash."""
LABEL_BUILD = "crabray.build"
"""Label of a built image: the content hash its tag is made of."""
_BUILD_DOCKERFILE = ".crabray.Dockerfile"
"""Name of the Dockerfile (with FROM lines substituted) in the context sent to the engine."""
_BUILD_HASH_VERSION = "1"
"""Changes when what the hash covers changes, so old tags are not reused by mistake."""
_TAIL_LINES = 20
_FROM = re.compile(r"^(\s*FROM\s+)((?:--\S+\s+)*)(\S+)(.*)$", re.IGNORECASE)
_STAGE = re.compile(r"\s+AS\s+(\S+)", re.IGNORECASE)
_ANSI = re.compile(r"\x1b\[[0-9;]*m")
"""Colour codes the classic builder wraps a step's stderr in."""


@dataclass(frozen=True)
class BuildPlan:
    """What one build from a Dockerfile needs, read once from the context folder.

    Attributes:
        context: The build context folder.
        dockerfile: The Dockerfile's path (inside ``context``).
        text: The Dockerfile's text with FROM lines substituted.
        files: The context's files the engine receives (``.dockerignore`` applied),
            relative to ``context``, sorted.
        tag: ``crabray-build/FOLDER:HASH12``.
        digest: The full content hash.
    """

    context: Path
    dockerfile: Path
    text: str
    files: list[str]
    tag: str
    digest: str

    @property
    def base_images(self) -> list[str]:
        """The images the FROM lines name (not stages, ``scratch`` or ``$ARG`` values)."""
        return [image for image in from_images(self.text) if "$" not in image]


def plan_build(
    context: str, dockerfile: str, base_image: str | None, base_ids: tuple[str, ...] = ()
) -> BuildPlan:
    """Read a build context and derive its image tag from what the build would see.

    Args:
        context: Absolute folder (``build_context``).
        dockerfile: The Dockerfile, relative to ``context``.
        base_image: Replaces the image of every FROM line, when given.
        base_ids: The ids of the FROM images as they are now, so that a rebuilt base
            (a new ``crabray/task-base:latest``) gives its derived images a new tag.

    Raises:
        SandboxError: The folder or the Dockerfile is missing or unreadable; names the path.
    """
    folder = Path(context)
    path = folder / dockerfile
    if not folder.is_dir():
        raise SandboxError(f"the docker build context {folder} is not a folder (build_context)")
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise SandboxError(f"cannot read the Dockerfile {path} (dockerfile): {exc}") from exc
    if base_image is not None:
        text = substitute_from(text, base_image)
    files = sorted(exclude_paths(str(folder), _dockerignore(folder), dockerfile=dockerfile))
    digest = hashlib.sha256()
    for part in (_BUILD_HASH_VERSION, text, base_image or "", *base_ids):
        digest.update(part.encode() + b"\0")
    for name in files:
        digest.update(name.encode() + b"\0" + _file_digest(folder / name) + b"\0")
    hexdigest = digest.hexdigest()
    repository = re.sub(r"[^a-z0-9._-]+", "-", folder.name.lower()).strip("._-") or "context"
    return BuildPlan(
        context=folder,
        dockerfile=path,
        text=text,
        files=files,
        tag=f"{BUILD_REPOSITORY}/{repository}:{hexdigest[:12]}",
        digest=hexdigest,
    )


def build_image(api: Any, plan: BuildPlan) -> str:
    """Build ``plan`` with the engine and tag it ``plan.tag``; return the image id.

    Uses the engine's classic builder (BuildKit may be missing), never pulls,
    and removes the intermediate containers even when a step fails.

    Raises:
        SandboxError: A step failed (names the Dockerfile and the step, quotes the
            end of its output) or the engine is unreachable.
    """
    with tempfile.TemporaryFile() as archive:
        create_archive(
            str(plan.context),
            files=plan.files,
            fileobj=archive,
            extra_files=[(_BUILD_DOCKERFILE, plan.text)],
        )
        archive.seek(0)
        step, tail = "(before the first step)", deque[str](maxlen=_TAIL_LINES)
        image_id: str | None = None
        try:
            for chunk in api.build(
                fileobj=archive,
                custom_context=True,
                dockerfile=_BUILD_DOCKERFILE,
                tag=plan.tag,
                rm=True,
                forcerm=True,
                decode=True,
                labels={LABEL_BUILD: plan.digest},
            ):
                for raw in str(chunk.get("stream", "")).splitlines():
                    line = _ANSI.sub("", raw).rstrip()
                    logger.debug("build %s: %s", plan.tag, line)
                    if line.startswith("Step "):
                        step = line
                        tail.clear()
                    elif line and not line.startswith((" ---> ", "Removing intermediate")):
                        tail.append(line)
                error = chunk.get("error") or chunk.get("message")
                if error:
                    raise SandboxError(_build_failure(plan, step, str(error), tail))
                image_id = chunk.get("aux", {}).get("ID", image_id)
        except requests.ConnectionError as exc:
            raise unreachable(exc) from exc
        except ENGINE_ERRORS as exc:
            explanation = getattr(exc, "explanation", None) or str(exc)
            raise SandboxError(_build_failure(plan, step, explanation, tail)) from exc
    if image_id is None:
        raise SandboxError(
            f"building {plan.tag} from {plan.dockerfile}: the engine reported no image"
        )
    return image_id


def substitute_from(text: str, image: str) -> str:
    """``text`` with the image of every FROM line replaced by ``image``.

    A FROM that names an earlier stage (``FROM build AS final`` after
    ``FROM ... AS build``) keeps it: it is not an image.
    """
    stages: set[str] = set()
    lines = []
    for line in text.splitlines(keepends=True):
        match = _FROM.match(line)
        if match:
            prefix, flags, current, rest = match.groups()
            if current.lower() not in stages:
                line = f"{prefix}{flags}{image}{rest}" + ("\n" if line.endswith("\n") else "")
            stage = _STAGE.match(rest)
            if stage:
                stages.add(stage.group(1).lower())
        lines.append(line)
    return "".join(lines)


def from_images(text: str) -> list[str]:
    """The images the FROM lines of a Dockerfile name, without stage references and ``scratch``."""
    stages: set[str] = set()
    images: list[str] = []
    for line in text.splitlines():
        match = _FROM.match(line)
        if not match:
            continue
        current, rest = match.group(3), match.group(4)
        if current.lower() not in stages and current.lower() != "scratch":
            images.append(current)
        stage = _STAGE.match(rest)
        if stage:
            stages.add(stage.group(1).lower())
    return images


def _build_failure(plan: BuildPlan, step: str, error: str, tail: deque[str]) -> str:
    output = "\n".join(tail) or "(no output)"
    return (
        f"building image {plan.tag} from {plan.dockerfile} failed at {step}: {error.strip()}\n"
        f"Last lines of the step's output:\n{output}"
    )


def _dockerignore(folder: Path) -> list[str]:
    """The patterns of the context's ``.dockerignore``, as the engine reads them."""
    path = folder / ".dockerignore"
    if not path.is_file():
        return []
    lines = (line.strip() for line in path.read_text(encoding="utf-8").splitlines())
    return [line for line in lines if line and not line.startswith("#")]


def _file_digest(path: Path) -> bytes:
    """What the build sees of one context entry: a link's target, or exec bit and content."""
    if path.is_symlink():
        return b"link:" + os.readlink(path).encode()
    if path.is_dir():
        return b"dir"
    digest = hashlib.sha256(b"x" if os.access(path, os.X_OK) else b"-")
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.digest()


# -- making sure a sandbox's image exists ---------------------------------------------------

LABEL_READY = "crabray.ready-command"
"""Image label: a command the backend runs in every new container before using it (e.g.
``crabray/desktop`` waits there for its X server)."""


def ensure_image(client: docker.DockerClient, settings: DockerSettings, env_name: str) -> Image:
    """The image a sandbox runs, built first when the settings say how and it is missing.

    ``image``/``build``: the named image, else ``envs/BUILD/build.sh`` makes it.
    ``build_context``: the image tagged by the folder's content, else it is
    built from the Dockerfile (after any missing ``crabray/ENV`` base image).
    Builds of one image are serialised host-wide; the first use logs a line.

    Raises:
        SandboxError: The image is missing and cannot be built, or its build
            failed (names the image, or the Dockerfile and the failing step).
    """
    if settings.build_context is not None:
        plan = plan_build(settings.build_context, settings.dockerfile, settings.base_image)
        for base in plan.base_images:
            _ensure_base(client, base, plan)
        ids = tuple(str(image.id) for b in plan.base_images if (image := find_image(client, b)))
        plan = plan_build(settings.build_context, settings.dockerfile, settings.base_image, ids)
        return _ensure_built(client, plan)
    name = settings.image_name or ""
    found = find_image(client, name)
    if found is not None and (settings.build is None or _up_to_date(found, settings.build)):
        return found
    if settings.build is None:
        raise _missing_image(name, env_name)
    return _build_env_image(client, settings.build, name)


def check_image(client: docker.DockerClient, settings: DockerSettings, env_name: str) -> None:
    """Check, without building anything, that the engine answers and that
    :func:`ensure_image` will find the sandbox's image or can make it.

    Raises:
        SandboxError: The engine does not answer (what to check and run).
        SandboxHostError: The image (or a Dockerfile's base image) is not on this
            engine and nothing here says how to build it.
    """
    try:
        client.ping()
    except ENGINE_ERRORS as exc:
        raise unreachable(exc) from exc
    if settings.build_context is not None:
        plan = plan_build(settings.build_context, settings.dockerfile, settings.base_image)
        for base in plan.base_images:
            if find_image(client, base) is None and _buildable_env(base) is None:
                raise _missing_base(base, plan)
        return
    name = settings.image_name or ""
    if settings.build is None and find_image(client, name) is None:
        raise _missing_image(name, env_name)


def _missing_image(name: str, env_name: str) -> SandboxHostError:
    env = name.split(":")[0].removeprefix("crabray/")
    how = (
        f"run `crabray envs build {env}` (or set backend_settings.build: '{env}')"
        if env in available_envs()
        else "build or load it on this host (`docker build`, `docker import` or "
        "`docker load`), or set backend_settings.build to an env under envs/"
    )
    return SandboxHostError(
        f"docker image '{name}' of environment '{env_name}' does not exist "
        f"on this engine and no registry is used: {how}"
    )


def _missing_base(base: str, plan: BuildPlan) -> SandboxHostError:
    return SandboxHostError(
        f"the base image '{base}' of {plan.dockerfile} does not exist on this engine and no "
        "registry is used: build or load it first, or pass --base-image IMAGE (in a suite "
        "file: backend_settings.base_image)"
    )


def _buildable_env(base: str) -> str | None:
    """The env under envs/ that builds a missing ``crabray/ENV[:latest]`` base, or None."""
    repository, _, tag = base.partition(":")
    env = repository.removeprefix("crabray/")
    if repository.startswith("crabray/") and tag in ("", "latest") and env in available_envs():
        return env
    return None


def find_image(client: docker.DockerClient, name: str) -> Image | None:
    """The image called ``name`` on the engine, or None.

    Raises:
        SandboxError: The engine is unreachable or failed.
    """
    try:
        return client.images.get(name)
    except ImageNotFound:
        return None
    except requests.ConnectionError as exc:
        raise unreachable(exc) from exc
    except ENGINE_ERRORS as exc:
        raise SandboxError(f"cannot look up image '{name}': {exc}") from exc


def _up_to_date(image: Image, env: str) -> bool:
    """Whether ``image`` was built from env ``env``'s files as they are now (its label)."""
    return bool(image.labels.get(INPUTS_LABEL) == inputs_digest(env))


def _current_image(client: docker.DockerClient, name: str, env: str) -> Image | None:
    found = find_image(client, name)
    return found if found is not None and _up_to_date(found, env) else None


def _build_env_image(client: docker.DockerClient, env: str, name: str) -> Image:
    """Run ``envs/ENV/build.sh`` to make ``name`` (once per host at a time), and label it."""
    why = "is missing" if find_image(client, name) is None else f"is older than envs/{env}"
    logger.info(
        "docker image '%s' %s: building it from envs/%s (first use; "
        "`crabray envs build %s` does it ahead of time)",
        name,
        why,
        env,
        env,
    )
    started = time.monotonic()
    build_env_image(env, name, client=client)
    logger.info("built docker image '%s' in %.1f s", name, time.monotonic() - started)
    built = find_image(client, name)
    if built is None:
        raise SandboxError(f"envs/{env}/build.sh succeeded but made no image '{name}'")
    return built


def build_env_image(
    env: str,
    image: str | None = None,
    *,
    client: docker.DockerClient | None = None,
    on_line: Callable[[str], None] | None = None,
) -> str:
    """Build env ``env``'s docker image with its build script, labelled with its inputs'
    digest so that a change to ``envs/ENV`` (or to an env it builds on) rebuilds it. The
    envs it builds on are made current first, so its script never builds them unlabelled.

    Raises:
        SandboxError: The build failed, or the engine cannot label the image.
    """
    client = client or connect()
    for base in env_bases(env):
        if _current_image(client, env_image(base), base) is None:
            _build_env_image(client, base, env_image(base))
    name = image or env_image(env)
    digest = inputs_digest(env)
    try:
        build_env(
            env,
            image=name,
            on_line=on_line,
            unless=lambda: _current_image(client, name, env) is not None,
        )
    except CrabrayError as exc:
        raise SandboxError(f"cannot make image '{name}': {exc}") from exc
    found = find_image(client, name)
    if found is not None and found.labels.get(INPUTS_LABEL) != digest:
        _label(client, name, digest)
    return name


def env_image_current(client: docker.DockerClient, env: str) -> bool:
    """Whether ``crabray/ENV:latest`` exists and was built from ``envs/ENV`` as it is now."""
    return _current_image(client, env_image(env), env) is not None


def ensure_env_image(env: str, client: docker.DockerClient | None = None) -> str:
    """``crabray/ENV:latest``, built (or rebuilt, when ``envs/ENV`` changed) if need be."""
    client = client or connect()
    name = env_image(env)
    if _current_image(client, name, env) is None:
        _build_env_image(client, env, name)
    return name


def _label(client: docker.DockerClient, name: str, digest: str) -> None:
    """Add the inputs label to image ``name`` (a metadata-only layer, no network)."""
    dockerfile = f"FROM {name}\nLABEL {INPUTS_LABEL}={digest}\n".encode()
    try:
        client.images.build(fileobj=io.BytesIO(dockerfile), tag=name, rm=True, pull=False)
    except ENGINE_ERRORS as exc:
        raise SandboxError(f"cannot label image '{name}' with its inputs: {exc}") from exc


def _ensure_built(client: docker.DockerClient, plan: BuildPlan) -> Image:
    """The image of ``plan``, built under a host-wide lock when its tag is missing."""
    found = find_image(client, plan.tag)
    if found is not None:
        return found
    with build_lock(f"docker-{plan.digest[:16]}"):
        found = find_image(client, plan.tag)
        if found is not None:
            return found
        for base in plan.base_images:
            _ensure_base(client, base, plan)
        logger.info("building docker image %s from %s (first use) ...", plan.tag, plan.dockerfile)
        started = time.monotonic()
        image_id = build_image(client.api, plan)
        logger.info(
            "built docker image %s (%s) in %.1f s",
            plan.tag,
            image_id[7:19],
            time.monotonic() - started,
        )
    built = find_image(client, plan.tag)
    if built is None:
        raise SandboxError(f"building from {plan.dockerfile} succeeded but made no {plan.tag}")
    return built


def _ensure_base(client: docker.DockerClient, base: str, plan: BuildPlan) -> None:
    """Make a missing ``crabray/ENV:latest`` base from envs/; any other missing base is an error.

    The engine would try a registry for it, which these hosts cannot reach.
    """
    env = _buildable_env(base)
    found = find_image(client, base)
    if found is not None and (env is None or _up_to_date(found, env)):
        return
    if env is None:
        raise _missing_base(base, plan)
    _build_env_image(client, env, env_image(env))
