"""``crabray llm``: a local stand-in for a model, to try LLM agents with no key and no network."""

from __future__ import annotations

import signal
from types import FrameType
from typing import TYPE_CHECKING, Annotated

import typer
from rich.markup import escape

from crabray.cli.terminal import console, safe_text
from crabray.core.errors import ConfigError
from crabray.core.words import counted

if TYPE_CHECKING:
    from crabray.agents import ActionCall
    from crabray.agents.provider_limits import ProviderLimits
    from crabray.formats import Suite

DEFAULT_PORT = 8766
"""Next to `crabray view`'s 8765, so the two run side by side (agents.example.toml's mock-llm)."""

llm_app = typer.Typer(
    help="A local chat-completions server for trying LLM agents offline.",
    no_args_is_help=True,
    epilog="""Examples:

  crabray llm serve tasks/demo &

  crabray run tasks/demo --agent-config agents.example.toml --agent mock-llm
""",
)


@llm_app.command(
    "serve",
    epilog="""Examples:

  crabray llm serve tasks/demo

  crabray llm serve tasks/demo --port 9000

  crabray llm serve tasks/demo --max-concurrent 8 --latency 0.3 --rpm 600 --error-rate 0.01
""",
)
def serve(
    suite: Annotated[str, typer.Argument(help="The suite whose reference solutions to replay.")],
    host: Annotated[str, typer.Option(help="Address to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port to listen on (0: any free port).")] = DEFAULT_PORT,
    max_concurrent: Annotated[
        int | None,
        typer.Option(
            min=1, metavar="N", help="Requests in flight at once; more get HTTP 429 (Retry-After)."
        ),
    ] = None,
    rpm: Annotated[
        int | None,
        typer.Option(min=1, metavar="N", help="Requests per minute; more get HTTP 429."),
    ] = None,
    tpm: Annotated[
        int | None,
        typer.Option(
            min=1,
            metavar="N",
            help="Tokens per minute (prompt + completion, as the replies' usage counts them); "
            "a reply past it becomes an HTTP 429.",
        ),
    ] = None,
    latency: Annotated[
        str | None,
        typer.Option(
            metavar="SPEC",
            help="Delay of each reply, in seconds: 0.3, uniform:LOW,HIGH, normal:MEAN,SD "
            "(clipped at 0) or exp:MEAN.",
        ),
    ] = None,
    error_rate: Annotated[
        float,
        typer.Option(min=0.0, max=1.0, metavar="P", help="Share of requests failed with HTTP 500."),
    ] = 0.0,
    seed: Annotated[
        int | None, typer.Option(help="Seeds the random errors and latencies (default: random).")
    ] = None,
) -> None:
    """Serve a mock model at http://HOST:PORT/v1 until Ctrl-C.

    It speaks OpenAI's chat-completions protocol: every reply is a tool call
    replaying the reference solution of the task in the conversation, one
    call per step, then `complete`; it reports token usage, so an agent of
    kind `openai` pointed at it (see the `mock-llm` entry of
    agents.example.toml) records tokens, cost and its tool calls as with a
    hosted model. The limit flags make it a provider under load (429s with
    Retry-After, slow replies, random 500s); GET /stats counts what it did,
    and it prints the counts when stopped. See docs/offline-llm.md.
    """
    from crabray.agents.chat_server import STATS_PATH, ChatServer, ReplayModel
    from crabray.formats import load_suite, resolve_suite

    limits = provider_limits(max_concurrent, rpm, tpm, latency, error_rate, seed)
    loaded = load_suite(resolve_suite(suite))
    solutions = reference_solutions(loaded)
    try:
        server = ChatServer(ReplayModel(solutions), host=host, port=port, limits=limits)
    except OSError as exc:
        raise ConfigError(
            f"cannot listen on {host}:{port}: {exc.strerror or exc}; choose another --port",
            field="--port",
        ) from exc
    console.print(
        f"mock model for {counted(len(solutions), 'task')} of {safe_text(loaded.name)} at "
        f"[bold]{escape(server.base_url)}[/] (Ctrl-C to stop)",
        highlight=False,
        soft_wrap=True,
    )
    if limits.limited:
        console.print(f"limits: {limits.describe()}", highlight=False, soft_wrap=True)
    stats_url = server.base_url.removesuffix("/v1") + STATS_PATH
    console.print(f"counts at {escape(stats_url)}", highlight=False, soft_wrap=True)
    try:
        # `kill` (SIGTERM, as docs/offline-llm.md stops it) ends it as Ctrl-C does.
        signal.signal(signal.SIGTERM, _interrupt)
        server.serve_forever()
    except KeyboardInterrupt:
        console.print(
            f"stopped: {server.provider.stats().summary()}", highlight=False, soft_wrap=True
        )
    finally:
        server.httpd.server_close()


def provider_limits(
    max_concurrent: int | None,
    rpm: int | None,
    tpm: int | None,
    latency: str | None,
    error_rate: float,
    seed: int | None,
) -> ProviderLimits:
    """The limits ``serve``'s flags ask for (none without flags).

    Raises:
        ConfigError: ``--latency`` is not a spec (naming the grammar).
    """
    from crabray.agents.provider_limits import LatencySpec, ProviderLimits

    try:
        spec = LatencySpec.parse(latency) if latency is not None else None
    except ValueError as exc:
        raise ConfigError(str(exc), field="--latency") from exc
    return ProviderLimits(
        max_concurrent=max_concurrent,
        rpm=rpm,
        tpm=tpm,
        latency=spec,
        error_rate=error_rate,
        seed=seed,
    )


def _interrupt(signum: int, frame: FrameType | None) -> None:
    """A signal handler that stops the server as Ctrl-C does, so it prints its counts."""
    raise KeyboardInterrupt


def reference_solutions(suite: Suite) -> dict[str, list[ActionCall]]:
    """Each task's reference solution as an agent would call it, by task description.

    Tasks without a solution are left out (the mock model gives up on them).

    Raises:
        ConfigError: A solution step is not in its task's action space.
    """
    from crabray.actions.root import root_actions
    from crabray.episode import solution_calls

    solutions: dict[str, list[ActionCall]] = {}
    for entry in suite.entries.values():
        task = entry.task
        if not task.solution or task.description in solutions:
            continue
        space = entry.benchmark.action_space(task, root_actions(task))
        solutions[task.description] = solution_calls(entry.benchmark, task, space)
    return solutions
