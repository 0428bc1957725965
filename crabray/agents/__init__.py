"""Agents: the protocol, a registry of agent kinds, and the scripted baselines."""

from __future__ import annotations

from crabray.agents.base import (
    ActionCall,
    Agent,
    AgentSpec,
    AgentStep,
    AgentUsage,
    CallResult,
    Observation,
    StepInput,
    TaskBrief,
)
from crabray.agents.scripted import NoopAgent, OracleAgent
from crabray.core.errors import ConfigError

_KINDS: dict[str, type[Agent]] = {cls.kind: cls for cls in (OracleAgent, NoopAgent)}


def register_agent(cls: type[Agent]) -> type[Agent]:
    """Class decorator: make an agent kind available by its ``kind`` name."""
    _KINDS[cls.kind] = cls
    return cls


def available_agents() -> list[str]:
    """The names of the registered agent kinds."""
    return sorted(_KINDS)


def agent_spec(name: str) -> AgentSpec:
    """The spec of a built-in agent given by name on the command line.

    Raises:
        ConfigError: No agent kind has that name.
    """
    if name not in _KINDS:
        raise ConfigError(
            f"unknown agent '{name}'; built-in agents: {', '.join(available_agents())}",
            field="--agent",
        )
    return AgentSpec(name=name, kind=name)


def create_agent(spec: AgentSpec) -> Agent:
    """Build the agent ``spec`` describes.

    Raises:
        ConfigError: The kind is not registered.
    """
    cls = _KINDS.get(spec.kind)
    if cls is None:
        raise ConfigError(
            f"agent '{spec.name}' has unknown kind '{spec.kind}'; known: "
            f"{', '.join(available_agents())}",
            field="kind",
        )
    return cls(spec)


__all__ = [
    "ActionCall",
    "Agent",
    "AgentSpec",
    "AgentStep",
    "AgentUsage",
    "CallResult",
    "NoopAgent",
    "Observation",
    "OracleAgent",
    "StepInput",
    "TaskBrief",
    "agent_spec",
    "available_agents",
    "create_agent",
    "register_agent",
]
