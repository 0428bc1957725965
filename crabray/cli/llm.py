"""``crabray llm``: a local stand-in for a model, to try LLM agents with no key and no network."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer
from rich.markup import escape

from crabray.cli.terminal import console, safe_text
from crabray.core.errors import ConfigError
from crabray.core.words import counted

if TYPE_CHECKING:
    from crabray.agents import ActionCall
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
""",
)
def serve(
    suite: Annotated[str, typer.Argument(help="The suite whose reference solutions to replay.")],
    host: Annotated[str, typer.Option(help="Address to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port to listen on (0: any free port).")] = DEFAULT_PORT,
) -> None:
    """Serve a mock model at http://HOST:PORT/v1 until Ctrl-C.

    It speaks OpenAI's chat-completions protocol: every reply is a tool call
    replaying the reference solution of the task in the conversation, one
    call per step, then `complete`; it reports token usage, so an agent of
    kind `openai` pointed at it (see the `mock-llm` entry of
    agents.example.toml) records tokens, cost and its tool calls as with a
    hosted model. See docs/offline-llm.md.
    """
    from crabray.agents.chat_server import ChatServer, ReplayModel
    from crabray.formats import load_suite, resolve_suite

    loaded = load_suite(resolve_suite(suite))
    solutions = reference_solutions(loaded)
    try:
        server = ChatServer(ReplayModel(solutions), host=host, port=port)
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
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        console.print("stopped")
    finally:
        server.httpd.server_close()


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
