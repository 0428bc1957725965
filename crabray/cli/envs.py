"""``crabray envs``: build the sandbox images under ``envs/`` and prune crabray's containers."""

from __future__ import annotations

import importlib.util
from typing import Annotated

import typer
from rich.markup import escape
from rich.table import Table

from crabray.cli.terminal import console, errors, safe_text
from crabray.core.errors import ConfigError, CrabrayError
from crabray.core.install import extra_install_command
from crabray.core.words import plural

envs_app = typer.Typer(
    help="Build sandbox images from envs/ and remove containers crashed runs left behind.",
    no_args_is_help=True,
    epilog="""Examples:

  crabray envs list

  crabray envs build busybox

  crabray envs prune
""",
)


@envs_app.command(
    "build",
    epilog="""Examples:

  crabray envs build busybox

  crabray envs build debian --image my/debian:1
""",
)
def build(
    name: Annotated[str, typer.Argument(help="An env under envs/, e.g. busybox.")],
    image: Annotated[
        str | None, typer.Option(help="Image name to build; crabray/NAME:latest by default.")
    ] = None,
) -> None:
    """Build env NAME's image by running envs/NAME/build.sh, showing its output."""
    import time

    from crabray.backends.envs import build_env, build_script, env_image

    target = image or env_image(name)
    script = build_script(name)
    console.print(f"building [bold]{escape(target)}[/] with {escape(str(script))} ...")
    started = time.monotonic()

    def show(line: str) -> None:
        console.print(f"  {safe_text(line)}", style="dim", highlight=False)

    if _makes_docker_image(name):
        # Labelled with its inputs, so the docker backend knows it current.
        from crabray.backends.docker import build_env_image

        build_env_image(name, target, on_line=show)
    else:
        build_env(name, image=target, on_line=show)
    console.print(f"[green]built[/] {escape(target)} in {time.monotonic() - started:.1f} s")


@envs_app.command(
    "list",
    epilog="""Example:

  crabray envs list
""",
)
def list_envs() -> None:
    """List the envs under envs/ and whether their image exists on the engine."""
    from crabray.backends.envs import available_envs, env_image, envs_dir

    names = available_envs()
    # Only builds that make a Docker image have one to look for (a VM build makes disks).
    images = {n: env_image(n) for n in names if _makes_docker_image(n)}
    present = _present_images(list(images.values()))
    table = Table(title=f"envs in {envs_dir()}")
    for column in ("env", "docker image", "built"):
        table.add_column(column)
    for name in names:
        image = images.get(name)
        if image is None:
            table.add_row(name, "-", "-")
            continue
        built = "?" if present is None else ("yes" if image in present else "no")
        table.add_row(name, image, built)
    console.print(table)


@envs_app.command(
    "prune",
    epilog="""Examples:

  crabray envs prune           # what crashed runs left behind

  crabray envs prune --all     # every crabray container and snapshot
""",
)
def prune(
    everything: Annotated[
        bool,
        typer.Option(
            "--all", help="Remove every crabray container and snapshot, live runs' included."
        ),
    ] = False,
) -> None:
    """Remove crabray containers and snapshot images whose owner process died on this host."""
    _need_docker_sdk("crabray envs prune")
    from crabray.backends.docker import prune as prune_docker

    removed = prune_docker(everything=everything)
    for item in removed:
        console.print(f"removed {safe_text(item)}", highlight=False)
    scope = "crabray" if everything else "orphaned"
    what = plural(len(removed), "container or snapshot", "containers and snapshots")
    console.print(f"{len(removed)} {scope} {what} removed")


def _need_docker_sdk(command: str) -> None:
    """A missing Docker SDK (an optional extra) is a configuration error that names the extra."""
    if importlib.util.find_spec("docker") is None:
        raise ConfigError(
            f"{command} talks to the Docker engine and needs the missing package 'docker'; "
            f"install it with: {extra_install_command('docker')}"
        )


def _present_images(images: list[str]) -> set[str] | None:
    """Which of ``images`` exist on the engine; None when the engine does not answer."""
    try:
        _need_docker_sdk("crabray envs list")
        from crabray.backends.docker import connect

        client = connect()
    except CrabrayError as exc:
        errors.print(f"[yellow]warning:[/] {safe_text(exc)}", highlight=False, soft_wrap=True)
        return None
    try:
        tags = {tag for image in client.images.list() for tag in image.tags}
    finally:
        client.close()
    return {image for image in images if image in tags}


def _makes_docker_image(name: str) -> bool:
    """Whether env ``name``'s build makes a Docker image (a VM's build makes disks)."""
    from crabray.backends.envs import build_script

    return "docker" in build_script(name).read_text()
