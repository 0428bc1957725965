"""The registry of agent kinds: ``AgentSpec.kind`` names a class registered here.

Shipped agents register with :func:`register_agent` where they are defined;
an installed package adds kinds in the ``crabray.agents`` entry-point group
(``kind = "module:AgentClass"``, see ``docs/plugins.md``), found the first
time an unknown kind is asked for or the kinds are listed.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar, overload

from crabray.agents.base import Agent, AgentSpec
from crabray.core.errors import ConfigError, UnknownNameError
from crabray.core.registry import Registry

__all__ = ["ENTRY_POINT_GROUP", "available_agents", "create_agent", "register_agent"]

AgentT = TypeVar("AgentT", bound=type[Agent])

ENTRY_POINT_GROUP = "crabray.agents"
"""Where an installed package declares ``kind = "module:AgentClass"``."""


def _accept(kind: str, cls: Any) -> type[Agent]:
    if not (isinstance(cls, type) and issubclass(cls, Agent)):
        raise TypeError(f"agent kind '{kind}' must be an Agent subclass, got {cls!r}")
    return cls


def _name_class(kind: str, cls: type[Agent]) -> None:
    """The registry name and the class's ``kind`` never disagree."""
    cls.kind = kind


_AGENTS: Registry[type[Agent]] = Registry(
    "agent kind", group=ENTRY_POINT_GROUP, field="kind", accept=_accept, on_register=_name_class
)
"""Agent classes by kind."""
for _kind, _target in [
    ("openai", "crabray.agents.openai_agent:OpenAIAgent"),
    ("openai-planner", "crabray.agents.multi_agent:PlannerAgent"),
    ("openai-per-env", "crabray.agents.multi_agent:PerEnvironmentAgent"),
]:  # imported when first asked for: their chat client (httpx) only for the runs using them
    _AGENTS.add_lazy(_kind, _target)
for _kind, _name in [
    ("probe-empty", "EmptyAnswerProbe"),
    ("probe-zero", "ZeroAnswerProbe"),
    ("probe-braces", "BracesAnswerProbe"),
    ("probe-echo", "EchoAnswerProbe"),
    ("probe-every-option", "EveryOptionProbe"),
    ("probe-peek", "PeekProbe"),
    ("probe-wrong-file", "WrongFileProbe"),
    ("probe-fake-tools", "FakeToolsProbe"),
    ("probe-plant-hooks", "PlantHooksProbe"),
    ("probe-tamper-scripts", "TamperScriptsProbe"),
    ("probe-lingering", "LingeringProbe"),
]:  # crabray audit's probes (crabray.agents.probes)
    _AGENTS.add_lazy(_kind, f"crabray.agents.probes:{_name}")


@overload
def register_agent(cls: AgentT, /) -> AgentT: ...


@overload
def register_agent(kind: str, /) -> Callable[[AgentT], AgentT]: ...


def register_agent(target: Any, /) -> Any:
    """Class decorator: make an agent kind available by name.

    Used bare (``@register_agent``) it registers the class under its ``kind``;
    given a name (``@register_agent("mine")``) it registers it under that name
    and sets the class's ``kind`` to it.

    Raises:
        TypeError: The decorated object is not an ``Agent`` subclass.
        DuplicateNameError: Another class is registered under the kind (a ``ConfigError``).
    """
    if isinstance(target, str):

        def decorate(cls: AgentT) -> AgentT:
            _AGENTS.register(target, _accept(target, cls))
            return cls

        return decorate
    kind = getattr(target, "kind", None)
    if not isinstance(kind, str):
        raise TypeError(f"@register_agent needs an Agent subclass with a kind, got {target!r}")
    _AGENTS.register(kind, _accept(kind, target))
    return target


def available_agents() -> list[str]:
    """The names of the registered agent kinds (plugins' included), sorted."""
    return _AGENTS.available()


def agent_class(kind: str) -> type[Agent]:
    """The class registered as ``kind``.

    Raises:
        UnknownNameError: No such kind (a ``ConfigError`` listing the known ones).
        MissingDependencyError: A plugin's kind needs a package that is not installed.
    """
    return _AGENTS.get(kind)


def create_agent(spec: AgentSpec) -> Agent:
    """Build the agent ``spec`` describes.

    Raises:
        ConfigError: The kind is not registered.
    """
    try:
        cls = _AGENTS.get(spec.kind)
    except UnknownNameError as exc:
        raise ConfigError(
            f"agent '{spec.name}' has unknown kind '{spec.kind}'; known: {', '.join(exc.known)}",
            field="kind",
        ) from None
    return cls(spec)
