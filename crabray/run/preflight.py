"""The preflight: before the first episode, every sandbox the run needs can start where it will run.

A missing ``bwrap``, a Docker engine that does not answer, an image typo or an
SSH host that is down would otherwise fail every episode the same way, each
retried, and the run would end with a leaderboard of zeros. Here each distinct
(backend, settings) the selected tasks need is checked once
(``Backend.preflight``), the checks at once; a failure stops the run with a
``HostError`` naming the environment, its tasks and the fix, before its
manifest exists, so a refused run leaves nothing behind.

Where: on a local run (no ``--address``), in this process, before the local
Ray instance starts (this host is its only node). On a cluster, as a small
Ray task on every node that hosts the kind (``crabray.cluster.actors.preflight``).

The model server of each LLM agent is asked the same way, first: one
request per distinct ``base_url`` (``crabray.agents.reachable``), here or
from the nodes that host the run's sandboxes (where the agents run). A
server that is down would otherwise cost every episode its client's retries
before failing as an infrastructure error.

It also says, before anything runs, which tasks the oracle agent cannot
solve because they carry no reference solution.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor

from crabray.agents import AgentSpec
from crabray.agents.reachable import model_servers, unanswered_servers
from crabray.backends import backend_class
from crabray.cluster.actors.preflight import model_servers_on_nodes, preflight_on_nodes
from crabray.cluster.actors.sandbox import SandboxSpec
from crabray.cluster.runtime.ray_runtime import connect
from crabray.core import EnvironmentConfig
from crabray.core.errors import CrabrayError, HostError
from crabray.core.words import counted, plural
from crabray.formats import Suite
from crabray.formats.validate import tasks_without_solution

logger = logging.getLogger(__name__)

_MAX_TASKS_NAMED = 5
"""Tasks named per failing environment (and per missing-solutions warning); the rest counted."""


def preflight(
    suite: Suite,
    envs: dict[str, list[EnvironmentConfig]],
    agents: Iterable[AgentSpec],
    address: str | None,
) -> None:
    """Check that every sandbox of ``envs`` can start where it will run; warn about the oracle.

    Args:
        suite: The loaded suite.
        envs: The environments of each task the run will start.
        agents: The run's agents (an oracle is warned of tasks it cannot solve).
        address: The Ray cluster's address, or None for a local run (checked here).

    Raises:
        HostError: Some sandbox cannot start; one line per environment, with its
            tasks and the fix.
    """
    agents = list(agents)
    if any(agent.kind == "oracle" for agent in agents):
        _warn_missing_solutions(suite, sorted(envs))
    specs, tasks = _distinct(envs)
    if address is not None:
        connect(address)
    _check_model_servers(model_servers(agents), specs, address)
    if address is None:
        problems = _check_here(specs)
    else:
        problems = [
            (problem.spec, f"on node {problem.node}: {problem.error}")
            for problem in preflight_on_nodes(specs)
        ]
    if problems:
        raise HostError(_message(problems, tasks))


def _check_model_servers(
    servers: dict[str, list[str]], specs: list[SandboxSpec], address: str | None
) -> None:
    """Ask each LLM agent's model server once, where the agents will run (here, or every
    node hosting the run's sandboxes), before anything starts.

    Raises:
        HostError: A server did not answer; one line per server, naming its agents.
    """
    if not servers:
        return
    if address is None:
        problems = list(unanswered_servers(servers).items())
    else:
        problems = [
            (p.base_url, f"on node {p.node}: {p.error}")
            for p in model_servers_on_nodes(specs, list(servers))
        ]
    if not problems:
        return
    lines = [f"{_agents(servers[url])} at {url}: {error}" for url, error in problems]
    # One paragraph, as every error of the command line (crabray.cli.errors).
    raise HostError(
        "the model server this run's LLM agents need does not answer, so nothing ran: "
        + "; ".join(lines)
        + ". Start the server, or correct the agent's base_url in its agents file"
    )


def _agents(names: list[str]) -> str:
    """``agent 'a'`` or ``agents 'a', 'b'``."""
    return f"{plural(len(names), 'agent')} " + ", ".join(f"'{name}'" for name in names)


def _distinct(
    envs: dict[str, list[EnvironmentConfig]],
) -> tuple[list[SandboxSpec], dict[str, list[str]]]:
    """Each distinct sandbox (backend, settings, kind), and the tasks that need each (by
    :func:`_key`)."""
    specs: dict[str, SandboxSpec] = {}
    tasks: dict[str, list[str]] = {}
    for task_id, task_envs in sorted(envs.items()):
        for env in task_envs:
            spec = SandboxSpec.of(env)
            key = _key(spec)
            specs.setdefault(key, spec)
            needing = tasks.setdefault(key, [])
            if task_id not in needing[-1:]:
                needing.append(task_id)
    return list(specs.values()), tasks


def _key(spec: SandboxSpec) -> str:
    """What makes two sandboxes the same check: all but the environment's name."""
    return spec.model_copy(update={"name": ""}).pool_key


def _check_here(specs: list[SandboxSpec]) -> list[tuple[SandboxSpec, str]]:
    """Run every check in this process, at once (each mostly waits: an engine, a host)."""

    def check(spec: SandboxSpec) -> str | None:
        try:
            backend_class(spec.backend, spec.name).preflight(spec.backend_settings, spec.name)
        except CrabrayError as exc:
            return str(exc)
        return None

    with ThreadPoolExecutor(max_workers=max(1, min(8, len(specs)))) as pool:
        answers = list(pool.map(check, specs))
    return [(spec, error) for spec, error in zip(specs, answers, strict=True) if error]


def _message(problems: list[tuple[SandboxSpec, str]], tasks: dict[str, list[str]]) -> str:
    lines = [
        f"{spec.backend} environment '{spec.name}' ({_tasks(tasks[_key(spec)])}): {error}"
        for spec, error in problems
    ]
    # One paragraph, as every error of the command line (crabray.cli.errors).
    return "the sandboxes this run needs cannot start here, so nothing ran: " + "; ".join(lines)


def _tasks(task_ids: list[str]) -> str:
    named = ", ".join(task_ids[:_MAX_TASKS_NAMED])
    more = len(task_ids) - _MAX_TASKS_NAMED
    return f"{plural(len(task_ids), 'task')} {named}" + (f" and {more} more" if more > 0 else "")


def _warn_missing_solutions(suite: Suite, task_ids: list[str]) -> None:
    """Say up front which tasks the oracle has nothing to replay for."""
    missing = tasks_without_solution(suite, task_ids)
    if missing:
        logger.warning(
            "%d of %s have no reference solution for the oracle to replay "
            "(`crabray tasks validate SUITE --oracle` lists them): %s",
            len(missing),
            counted(len(task_ids), "task"),
            _tasks(missing).removeprefix("tasks ").removeprefix("task "),
        )
