"""The single tool-calling agent over an OpenAI-compatible chat-completions API.

Kind ``openai``: CRAB's single-agent setting. The task's action schemas are
the model's tools (already qualified ``<env>-<action>`` in multi-environment
tasks); every step the model sees fresh observations and the real output or
error of each of its previous calls as ``tool`` messages, and answers with
tool calls. Usage (tokens, calls, latency, cost from the price table) goes to
``self.usage``, which the episode reads to enforce per-episode limits.

Works with any server speaking the protocol: hosted APIs, vLLM, Ollama,
llama.cpp's server. The multi-agent styles of the CRAB paper build on the
same pieces in ``crabray.agents.multi_agent``.
"""

from __future__ import annotations

import logging
from typing import Any

from crabray.agents.base import Agent, AgentSpec, AgentStep, StepInput, TaskBrief
from crabray.agents.config import LLMSettings
from crabray.agents.conversation import (
    Dialogue,
    ModelCaller,
    observation_content,
    tool_names,
)
from crabray.agents.llm_client import ChatResponse
from crabray.agents.registry import register_agent
from crabray.core.errors import AgentError

logger = logging.getLogger(__name__)

NUDGE = (
    "Your last reply called no tool, so nothing happened. Act by calling one of the tools; "
    "call `complete` when the task is done, or `fail` if it cannot be done."
)


def system_prompt(brief: TaskBrief, role: str | None = None) -> str:
    """The rules every tool-calling model of crabray gets, with the task's environments.

    Args:
        brief: The task.
        role: A first paragraph saying who this model is; the single agent's when None.
    """
    names = {t["function"]["name"] for t in brief.tools}
    lines = [
        role
        or "You are an agent that operates computers to complete a task. You act only by "
        "calling the tools you are given; each call runs in an environment, and its output "
        "or error comes back to you.",
        "",
        "Environments:",
        *(f"- {env}: {desc or '(no description)'}" for env, desc in brief.environments.items()),
    ]
    if len(brief.environments) > 1:
        lines.append("Tool names of the form <environment>-<action> act in that environment.")
    lines += [
        "",
        "Rules:",
        "- Call at least one tool in every reply; a reply without a tool call does nothing.",
        "- Check results before moving on; fix errors rather than repeating a failed call.",
        "- When the task is done, call `complete`.",
        "- If the task cannot be done, call `fail` with the reason.",
    ]
    if "submit" in names:
        lines.append("- The task asks for an answer: hand it in with `submit`.")
    lines.append(f"- You have at most {brief.max_steps} steps.")
    return "\n".join(lines)


def task_message(brief: TaskBrief) -> str:
    """The first user message: the task's instruction."""
    return f"Task: {brief.description}"


def step_header(observed: StepInput, brief: TaskBrief) -> str:
    """The first line of a step's user message."""
    return f"Step {observed.step + 1} of {brief.max_steps}."


class LLMAgent(Agent):
    """What every LLM agent kind shares: settings, the metered model caller, the no-tool count.

    The client (and the API key) is set up at the first ``reset``, inside the
    episode, so a missing key is that episode's ``agent_error`` rather than a
    crash of the episode call that would be retried as an infrastructure failure.

    Raises:
        ConfigError: The spec's settings are not valid LLM settings.
    """

    def __init__(self, spec: AgentSpec) -> None:
        super().__init__(spec)
        self.caller = ModelCaller(spec, self.usage)
        self.settings: LLMSettings = self.caller.settings
        self.no_tool_replies = 0

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.spec.name!r}, model={self.spec.model!r})"

    def start(self, brief: TaskBrief) -> None:
        """Reset the shared state for a new episode and make sure the model is reachable.

        Raises:
            AuthenticationError: The API key is not available.
        """
        self.brief = brief
        self.no_tool_replies = 0
        self.caller.client()

    def count_reply(self, acted: bool, text: str | None) -> None:
        """Track replies that called no tool; too many in a row is the agent's failure.

        Raises:
            AgentError: ``max_no_tool_replies`` replies in a row called no tool.
        """
        if acted:
            self.no_tool_replies = 0
            return
        self.no_tool_replies += 1
        logger.info(
            "%s replied without a tool call (%d in a row)", self.spec.name, self.no_tool_replies
        )
        if self.no_tool_replies >= self.settings.max_no_tool_replies:
            said = f": {text[:200]!r}" if text else ""
            raise AgentError(
                f"the model replied {self.no_tool_replies} times in a row without calling a "
                f"tool{said}"
            )


@register_agent
class OpenAIAgent(LLMAgent):
    """One model, all the task's tools: CRAB's single-agent setting (kind ``openai``).

    Settings (``AgentSpec.settings``, see ``crabray.agents.config.LLMSettings``):
    endpoint and key variable, temperature, tokens per call, history window,
    vision, timeout, retries, prices, and how many replies without a tool call
    are tolerated in a row.
    """

    kind = "openai"

    def reset(self, brief: TaskBrief) -> None:
        self.start(brief)
        self.tools: list[dict[str, Any]] = brief.tools
        self.names = tool_names(brief.tools)
        self.dialogue = Dialogue(
            system_prompt(brief), task_message(brief), self.settings.history_window
        )

    def step(self, observed: StepInput) -> AgentStep:
        self.dialogue.answer_pending(observed.results)
        note = NUDGE if self.no_tool_replies else None
        self.dialogue.open_turn(
            observation_content(
                step_header(observed, self.brief),
                observed.observations,
                self.settings.vision,
                note,
            )
        )
        response: ChatResponse = self.caller.ask(self.dialogue, self.tools)
        calls = self.dialogue.action_calls(response, self.names)
        self.count_reply(bool(calls), response.content)
        return AgentStep(calls=calls, message=response.content)
