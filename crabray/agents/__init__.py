"""Agents: the protocol, a registry of agent kinds, the scripted baselines and the LLM agents."""

from __future__ import annotations

from typing import TYPE_CHECKING

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
    AgentConfig,
    LLMSettings,
    agent_secrets,
    bare_kinds,
    load_agents,
    select_agents,
)
from crabray.agents.registry import available_agents, create_agent, register_agent
from crabray.agents.scripted import NoopAgent, OracleAgent
from crabray.core.errors import ConfigError
from crabray.core.lazy import lazy_getattr

if TYPE_CHECKING:
    from crabray.agents.multi_agent import PerEnvironmentAgent, PlannerAgent
    from crabray.agents.openai_agent import OpenAIAgent

_LAZY = {
    "OpenAIAgent": "crabray.agents.openai_agent",
    "PerEnvironmentAgent": "crabray.agents.multi_agent",
    "PlannerAgent": "crabray.agents.multi_agent",
}
"""The LLM agents, loaded on first use: their chat client (httpx) is about 60 ms of
import that an actor worker running scripted agents does not need (PEP 562)."""


__getattr__ = lazy_getattr(__name__, _LAZY)


def agent_spec(name: str) -> AgentSpec:
    """The spec of an agent given by kind alone on the command line (``oracle``, ``noop``).

    LLM agents need a model and an endpoint, so they come from an agents file
    (``select_agents``), never from a bare kind name; a plugin's kind (see
    ``docs/plugins.md``) may be given bare.

    Raises:
        ConfigError: No such agent kind can be given bare.
    """
    kinds = bare_kinds()
    if name not in kinds:
        raise ConfigError(
            f"unknown agent '{name}'; built-in agents: {', '.join(kinds)} "
            "(configure LLM agents with --agent-config)",
            field="--agent",
        )
    return AgentSpec(name=name, kind=name)


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
    "agent_secrets",
    "agent_spec",
    "available_agents",
    "create_agent",
    "load_agents",
    "register_agent",
    "select_agents",
]
