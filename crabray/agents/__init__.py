"""Agents: the protocol, a registry of agent kinds, the scripted baselines and the LLM agents."""

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
from crabray.agents.config import (
    BUILTIN_KINDS,
    AgentConfig,
    LLMSettings,
    load_agents,
    select_agents,
)
from crabray.agents.multi_agent import PerEnvironmentAgent, PlannerAgent
from crabray.agents.openai_agent import OpenAIAgent
from crabray.agents.scripted import NoopAgent, OracleAgent
from crabray.core.errors import ConfigError

_KINDS: dict[str, type[Agent]] = {
    cls.kind: cls
    for cls in (OracleAgent, NoopAgent, OpenAIAgent, PlannerAgent, PerEnvironmentAgent)
}


def register_agent(cls: type[Agent]) -> type[Agent]:
    """Class decorator: make an agent kind available by its ``kind`` name."""
    _KINDS[cls.kind] = cls
    return cls


def available_agents() -> list[str]:
    """The names of the registered agent kinds."""
    return sorted(_KINDS)


def agent_spec(name: str) -> AgentSpec:
    """The spec of a built-in agent given by name on the command line (``oracle``, ``noop``).

    LLM agents need a model and an endpoint, so they come from an agents file
    (``select_agents``), never from a bare kind name.

    Raises:
        ConfigError: No built-in agent has that name.
    """
    if name not in BUILTIN_KINDS:
        raise ConfigError(
            f"unknown agent '{name}'; built-in agents: {', '.join(BUILTIN_KINDS)} "
            "(configure LLM agents with --agent-config)",
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
    "AgentConfig",
    "AgentSpec",
    "AgentStep",
    "AgentUsage",
    "CallResult",
    "LLMSettings",
    "NoopAgent",
    "Observation",
    "OpenAIAgent",
    "OracleAgent",
    "PerEnvironmentAgent",
    "PlannerAgent",
    "StepInput",
    "TaskBrief",
    "agent_spec",
    "available_agents",
    "create_agent",
    "load_agents",
    "register_agent",
    "select_agents",
]
