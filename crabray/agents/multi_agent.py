"""The CRAB paper's multi-agent styles, over the same chat-completions API.

- ``PlannerAgent`` (kind ``openai-planner``), multi-agent *by function*: a
  planner model reads the observations and results and writes, in text, the
  plan and the next sub-goal; a tool-caller model turns that sub-goal into
  tool calls. Two model calls per step, both metered.
- ``PerEnvironmentAgent`` (kind ``openai-per-env``), multi-agent *by
  environment*: a planner chooses which environment acts next and what it
  should do (through a ``delegate`` tool, so the choice is structured); one
  sub-agent per environment, seeing only that environment's tools plus the
  root tools (``complete``, ``fail``, ``submit``), makes the calls.

The planner may use its own model (``planner_model``); screenshots go to the
planner when ``vision`` is on, while tool callers read text.
"""

from __future__ import annotations

import json
import logging
from typing import Any

from crabray.agents.base import AgentStep, StepInput, TaskBrief
from crabray.agents.conversation import Dialogue, observation_content, results_text, tool_names
from crabray.agents.openai_agent import (
    NUDGE,
    LLMAgent,
    step_header,
    system_prompt,
    task_message,
)
from crabray.agents.registry import register_agent
from crabray.core.naming import split_qualified

logger = logging.getLogger(__name__)

DELEGATE = "delegate"


@register_agent
class PlannerAgent(LLMAgent):
    """A planner that writes sub-goals and a tool caller that carries them out."""

    kind = "openai-planner"

    def reset(self, brief: TaskBrief) -> None:
        self.start(brief)
        self.tools: list[dict[str, Any]] = brief.tools
        self.names = tool_names(brief.tools)
        window = self.settings.history_window
        catalogue = "\n".join(
            f"- {t['function']['name']}: {t['function'].get('description', '')}"
            for t in brief.tools
        )
        planner_role = (
            "You are the planner of a team operating computers to complete a task. You do not "
            "call tools: a tool-calling agent carries out your instruction each step. Reply with "
            "a short plan, then the single next sub-goal on a last line starting with 'NEXT:'. "
            "When the task is done, make the next sub-goal calling `complete`.\n\n"
            f"The tool caller's tools:\n{catalogue}"
        )
        self.planner = Dialogue(
            system_prompt(brief, planner_role), task_message(brief), window, "planner"
        )
        caller_role = (
            "You are the tool caller of a team operating computers. Each step a planner gives "
            "you a sub-goal; carry it out by calling tools. Each call's output or error comes "
            "back to you."
        )
        self.tool_caller = Dialogue(
            system_prompt(brief, caller_role), task_message(brief), window, "tool caller"
        )

    def step(self, observed: StepInput) -> AgentStep:
        header = step_header(observed, self.brief)
        results = results_text(observed.results)
        self.planner.open_turn(
            observation_content(
                header + (f"\nResults of the last calls:\n{results}" if results else ""),
                observed.observations,
                self.settings.vision,
                "The tool caller did not act on your last sub-goal."
                if self.no_tool_replies
                else None,
            )
        )
        plan = self.caller.ask(self.planner, None, self.settings.planner_model)
        instruction = (plan.content or "").strip() or "Continue with the task."
        self.tool_caller.answer_pending(observed.results)
        self.tool_caller.open_turn(
            observation_content(
                f"{header}\nThe planner says:\n{instruction}",
                observed.observations,
                vision=False,
                note=NUDGE if self.no_tool_replies else None,
            )
        )
        response = self.caller.ask(self.tool_caller, self.tools)
        calls = self.tool_caller.action_calls(response, self.names)
        self.count_reply(bool(calls), response.content)
        message = f"plan: {instruction}" + (f"\n{response.content}" if response.content else "")
        return AgentStep(calls=calls, message=message)


@register_agent
class PerEnvironmentAgent(LLMAgent):
    """A planner that delegates each step to one environment's sub-agent."""

    kind = "openai-per-env"

    def reset(self, brief: TaskBrief) -> None:
        self.start(brief)
        window = self.settings.history_window
        self.env_tools = _tools_by_environment(brief)
        envs = list(self.env_tools)
        planner_role = (
            "You are the planner of a team operating computers to complete a task. Each "
            "environment has its own agent with that environment's tools. Each step, choose "
            f"one environment and tell its agent what to do, by calling `{DELEGATE}`. Its agents "
            "can also call `complete` when the task is done, `fail` if it cannot be done, and "
            "`submit` when the task asks for an answer."
        )
        self.planner = Dialogue(
            system_prompt(brief, planner_role), task_message(brief), window, "planner"
        )
        self.delegate_tool = _delegate_tool(envs)
        self.sub_agents: dict[str, Dialogue] = {}
        for env in envs:
            role = (
                f"You are the agent of environment '{env}' in a team operating computers. A "
                "planner gives you an instruction; carry it out by calling your tools. Each "
                "call's output or error comes back to you."
            )
            self.sub_agents[env] = Dialogue(
                system_prompt(brief, role), task_message(brief), window, env
            )
        self.last_env: str | None = None

    def step(self, observed: StepInput) -> AgentStep:
        if self.last_env is not None:
            self.sub_agents[self.last_env].answer_pending(observed.results)
            summary = results_text(observed.results) or "the agent made no calls"
            self.planner.answer_pending([], fallback=f"{self.last_env} agent:\n{summary}")
        else:
            self.planner.answer_pending([], fallback="error: not delegated")
        self.planner.open_turn(
            observation_content(
                step_header(observed, self.brief),
                observed.observations,
                self.settings.vision,
                f"Call `{DELEGATE}` to act." if self.no_tool_replies else None,
            )
        )
        plan = self.caller.ask(self.planner, [self.delegate_tool], self.settings.planner_model)
        choice, problem = self._choice(plan.tool_calls)
        self.last_env = None
        if choice is None:
            if problem is not None:
                self.planner.problems.update(dict.fromkeys(self.planner.pending, problem))
            self.count_reply(False, plan.content or problem)
            return AgentStep(calls=[], message=plan.content or problem)
        env, instruction = choice
        dialogue = self.sub_agents[env]
        dialogue.open_turn(
            observation_content(
                f"{step_header(observed, self.brief)}\nInstruction: {instruction}",
                [o for o in observed.observations if o.env == env],
                vision=False,
            )
        )
        response = self.caller.ask(dialogue, self.env_tools[env])
        calls = dialogue.action_calls(response, tool_names(self.env_tools[env]))
        self.last_env = env
        self.count_reply(bool(calls), response.content)
        message = f"{env}: {instruction}" + (f"\n{response.content}" if response.content else "")
        return AgentStep(calls=calls, message=message)

    def _choice(self, calls: list[Any]) -> tuple[tuple[str, str] | None, str | None]:
        """The planner's (environment, instruction), or why its reply gave none."""
        if not calls:
            return None, None
        first = calls[0]
        for extra in calls[1:]:
            self.planner.problems[extra.id] = "only one delegation per step is carried out"
        if first.name != DELEGATE:
            return None, f"there is no tool '{first.name}'; call `{DELEGATE}`"
        try:
            arguments = json.loads(first.arguments or "{}")
            env, instruction = arguments["environment"], str(arguments["instruction"])
        except (ValueError, KeyError, TypeError) as exc:
            return None, f"`{DELEGATE}` needs JSON arguments environment and instruction ({exc})"
        if env not in self.sub_agents:
            return None, f"no environment '{env}'; choose one of {', '.join(self.sub_agents)}"
        return (env, instruction), None


def _tools_by_environment(brief: TaskBrief) -> dict[str, list[dict[str, Any]]]:
    """Each environment's tools plus the root tools (the unqualified ones, with several)."""
    envs = list(brief.environments)
    if len(envs) <= 1:
        return {env: list(brief.tools) for env in envs or ["main"]}
    own: dict[str, list[dict[str, Any]]] = {env: [] for env in envs}
    shared = []
    for tool in brief.tools:
        env, _ = split_qualified(tool["function"]["name"])
        if env in own:
            own[env].append(tool)
        else:
            shared.append(tool)
    return {env: [*tools, *shared] for env, tools in own.items()}


def _delegate_tool(envs: list[str]) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {
            "name": DELEGATE,
            "description": "Hand the next step to the agent of one environment.",
            "parameters": {
                "type": "object",
                "properties": {
                    "environment": {
                        "type": "string",
                        "enum": envs,
                        "description": "The environment whose agent acts next.",
                    },
                    "instruction": {
                        "type": "string",
                        "description": "What that agent should do now, concretely.",
                    },
                },
                "required": ["environment", "instruction"],
            },
        },
    }
