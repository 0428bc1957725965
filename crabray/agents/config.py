"""The agents config file: which LLM agents exist, how they reach their model, their limits.

A TOML file of ``[[agents]]`` tables (see ``agents.example.toml`` at the
repository root)::

    [[agents]]
    name = "gpt-4o"
    kind = "openai"
    model = "gpt-4o-2024-08-06"
    base_url = "https://api.openai.com/v1"
    key_env = "OPENAI_API_KEY"
    price_in_per_mtok = 2.5
    price_out_per_mtok = 10.0
    max_cost_usd = 0.5

Each table becomes an ``AgentSpec``, what the driver sends to episode calls.
A spec never carries the API key: it names the environment variable
(``key_env``) or, for a key written in the file (``api_key``, discouraged),
the file itself; the agent reads the key when it starts an episode, in the
worker, so keys never reach results, manifests or Ray's object store.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, ValidationError, model_validator

from crabray.agents.base import AgentSpec
from crabray.agents.registry import available_agents
from crabray.core.errors import AuthenticationError, ConfigError
from crabray.core.result import DEFAULT_MAX_CONVERSATION_BYTES, MIN_CONVERSATION_BYTES
from crabray.core.toml_file import read_toml

logger = logging.getLogger(__name__)

AgentKind = Literal["openai", "openai-planner", "openai-per-env", "oracle", "noop"]
BUILTIN_KINDS = ("oracle", "noop")
LLM_KINDS = ("openai", "openai-planner", "openai-per-env")

DEFAULT_MAX_CONNECTIONS = 32
"""Calls in flight to one endpoint, for a whole run: the ceiling of the adaptive limit, which
starts lower (``crabray.agents.model_limits.START_CONNECTIONS``). Hosted APIs take tens of
concurrent calls from one account on their lower tiers; a local server (vLLM) gains little
past its own batch size."""

DEFAULT_RPM = 500
"""Requests per minute to one endpoint, for a whole run: what the lower paid tiers of hosted
APIs allow for their main models (set it higher for a server of your own; 0 for none)."""


class LLMSettings(BaseModel):
    """How an LLM agent talks to its model: what ``AgentSpec.settings`` holds for LLM kinds."""

    model_config = ConfigDict(extra="forbid")

    base_url: str = Field(
        default="https://api.openai.com/v1", description="Root of the chat-completions API."
    )
    key_env: str | None = Field(
        default=None,
        description="Environment variable holding the API key; none for servers without auth.",
    )
    config_file: str | None = Field(
        default=None,
        description="Agents file to read ``api_key`` from at run time (set when the file has one).",
    )
    temperature: float | None = Field(default=0.0, ge=0, le=2)
    max_tokens_per_call: int | None = Field(
        default=1024, gt=0, description="Most tokens the model may generate per call."
    )
    history_window: int = Field(
        default=10, gt=0, description="Most recent turns kept besides the system and task messages."
    )
    vision: bool = Field(default=False, description="Send screenshots as images.")
    timeout_sec: float = Field(default=120.0, gt=0, description="Per model request.")
    retries: int = Field(default=4, ge=0, description="Retries on rate limits and server errors.")
    price_in_per_mtok: float = Field(default=0.0, ge=0, description="USD per 1M input tokens.")
    price_out_per_mtok: float = Field(default=0.0, ge=0, description="USD per 1M output tokens.")
    max_no_tool_replies: int = Field(
        default=3, gt=0, description="Replies in a row without a tool call before the agent fails."
    )
    planner_model: str | None = Field(
        default=None, description="Model of the planner (planner kinds); the agent's model if None."
    )
    max_connections: int = Field(
        default=DEFAULT_MAX_CONNECTIONS,
        ge=0,
        description="Most calls to this endpoint in flight at once, for the whole run across "
        "every node (agents sharing the endpoint share it, the tightest wins); 0: no cap.",
    )
    rpm: int = Field(
        default=DEFAULT_RPM,
        ge=0,
        description="Requests per minute to this endpoint for the whole run; 0: no limit.",
    )
    tpm: int = Field(
        default=0,
        ge=0,
        description="Tokens per minute to this endpoint for the whole run; 0: none.",
    )
    adaptive: bool = Field(
        default=True,
        description="Shrink the calls in flight on 429s, server errors and rising latency, "
        "grow them back while calls succeed, within max_connections.",
    )
    limiter_run: str | None = Field(
        default=None,
        description="The run whose limiter actors serve this agent's calls (set by crabray).",
    )

    def cost_usd(self, tokens_in: int, tokens_out: int) -> float:
        """The price of one call from the configured price table."""
        return (tokens_in * self.price_in_per_mtok + tokens_out * self.price_out_per_mtok) / 1e6


class AgentConfig(LLMSettings):
    """One ``[[agents]]`` table of the agents config file."""

    name: str = Field(min_length=1, description="The name given to --agent and shown in results.")
    kind: AgentKind
    model: str | None = Field(default=None, description="The model name the server knows.")
    api_key: SecretStr | None = Field(
        default=None, description="The key itself (discouraged: prefer key_env)."
    )
    max_tokens: int | None = Field(default=None, gt=0, description="Per-episode token limit.")
    max_cost_usd: float | None = Field(default=None, gt=0, description="Per-episode cost limit.")
    max_conversation_bytes: int = Field(
        default=DEFAULT_MAX_CONVERSATION_BYTES,
        ge=MIN_CONVERSATION_BYTES,
        description="What an episode's conversation_json keeps at most (UTF-8 bytes); past it "
        "the middle of the conversation is left out, with a message saying how much.",
    )

    @model_validator(mode="after")
    def _needs_model(self) -> AgentConfig:
        if self.kind in LLM_KINDS and not self.model:
            raise ValueError(f"kind '{self.kind}' needs a model")
        if self.key_env is not None and self.api_key is not None:
            raise ValueError("give key_env or api_key, not both")
        if self.config_file is not None:
            raise ValueError("config_file is set by crabray, not in the agents file")
        if self.limiter_run is not None:
            raise ValueError("limiter_run is set by crabray, not in the agents file")
        return self

    def to_spec(self, source: Path) -> AgentSpec:
        """The spec episode calls receive: everything but the key itself."""
        limits = self.model_dump(include={"max_tokens", "max_cost_usd", "max_conversation_bytes"})
        if self.kind in BUILTIN_KINDS:
            return AgentSpec(name=self.name, kind=self.kind, model=self.model, **limits)
        settings = LLMSettings.model_validate(
            self.model_dump(include=set(LLMSettings.model_fields))
        )
        if self.api_key is not None:
            settings.config_file = str(source.resolve())
        return AgentSpec(
            name=self.name,
            kind=self.kind,
            model=self.model,
            settings=settings.model_dump(),
            **limits,
        )


def read_agent_configs(path: str | Path) -> dict[str, AgentConfig]:
    """Parse an agents file into its tables, by agent name.

    Raises:
        ConfigError: The file is missing or not TOML, or a table is invalid; the message
            names the file, the table (``agents[INDEX] (NAME)``) and the field.
    """
    path = Path(path)
    data = read_toml(path, "agents file")
    unknown = sorted(set(data) - {"agents"})
    if unknown:
        raise ConfigError(
            f"unknown top-level key(s) {unknown}; agents go in [[agents]] tables", file=str(path)
        )
    tables = data.get("agents", [])
    if not isinstance(tables, list) or not all(isinstance(t, dict) for t in tables):
        raise ConfigError("must be an array of tables: [[agents]]", file=str(path), field="agents")
    configs: dict[str, AgentConfig] = {}
    for index, table in enumerate(tables):
        where = f"agents[{index}]" + (f" ({table['name']})" if "name" in table else "")
        try:
            config = AgentConfig.model_validate(table)
        except ValidationError as exc:
            err = exc.errors()[0]
            loc = ".".join(str(part) for part in err["loc"])
            more = f" (and {len(exc.errors()) - 1} more)" if len(exc.errors()) > 1 else ""
            field = f"{where}.{loc}" if loc else where
            raise ConfigError(f"{err['msg']}{more}", file=str(path), field=field) from exc
        if config.name in configs:
            raise ConfigError(
                f"agent name '{config.name}' is used twice", file=str(path), field=f"{where}.name"
            )
        if config.name in BUILTIN_KINDS and config.kind != config.name:
            raise ConfigError(
                f"'{config.name}' is a built-in agent; choose another name",
                file=str(path),
                field=f"{where}.name",
            )
        if config.api_key is not None:
            logger.warning(
                "%s: agent '%s' has its API key in the file; prefer key_env", path, config.name
            )
        configs[config.name] = config
    return configs


def bare_kinds() -> list[str]:
    """Agent kinds given by name alone (``--agent oracle``): the built-ins, then plugins' kinds.

    LLM kinds need a model and an endpoint, so they come from an agents file.
    """
    plugins = (k for k in available_agents() if k not in BUILTIN_KINDS and k not in LLM_KINDS)
    return [*BUILTIN_KINDS, *plugins]


def load_agents(path: str | Path) -> dict[str, AgentSpec]:
    """The agents an agents file configures, as specs by name.

    Raises:
        ConfigError: See ``read_agent_configs``.
    """
    path = Path(path)
    return {name: c.to_spec(path) for name, c in read_agent_configs(path).items()}


def select_agents(names: list[str], config_path: str | Path | None = None) -> list[AgentSpec]:
    """The specs of the agents named on the command line: built-ins and configured ones.

    Checks before anything starts that every LLM agent's key can be found, so a
    missing variable is one error in the driver rather than one per episode.

    Raises:
        ConfigError: A name is unknown (the message lists the available names), a name is
            given twice, the agents file is invalid, or a key variable is not set.
    """
    available: dict[str, AgentSpec] = {n: AgentSpec(name=n, kind=n) for n in bare_kinds()}
    if config_path is not None:
        available.update(load_agents(config_path))
    specs: list[AgentSpec] = []
    for name in names:
        if name not in available:
            hint = "" if config_path is not None else " (configure more with --agent-config)"
            raise ConfigError(
                f"unknown agent '{name}'; available: {', '.join(sorted(available))}{hint}",
                field="--agent",
            )
        if any(s.name == name for s in specs):
            raise ConfigError(f"agent '{name}' is given twice", field="--agent")
        spec = available[name]
        if spec.kind in LLM_KINDS:
            try:
                resolve_api_key(spec.name, LLMSettings.model_validate(spec.settings))
            except AuthenticationError as exc:
                raise ConfigError(str(exc), file=str(config_path), field=f"agent '{name}'") from exc
        specs.append(spec)
    return specs


def with_model(specs: list[AgentSpec], model: str | None) -> list[AgentSpec]:
    """``specs`` with ``--model`` as the model of each LLM agent (baselines have none).

    Raises:
        ConfigError: A model is given but no selected agent uses one: running
            oracle or noop "with a model" would silently ignore it.
    """
    if model is None:
        return specs
    if not any(spec.kind in LLM_KINDS for spec in specs):
        names = ", ".join(spec.name for spec in specs)
        raise ConfigError(
            f"no selected agent uses a model ({names}: scripted agents); name an LLM agent "
            "from --agent-config with --agent, or leave --model out",
            field="--model",
        )
    return [
        spec.model_copy(update={"model": model}) if spec.kind in LLM_KINDS else spec
        for spec in specs
    ]


def agent_secrets(specs: list[AgentSpec]) -> list[str]:
    """The API keys of ``specs``' LLM agents, for the driver to redact from what it keeps.

    Raises:
        ConfigError: A key can no longer be found (see ``select_agents``).
    """
    secrets = []
    for spec in specs:
        if spec.kind not in LLM_KINDS:
            continue
        try:
            key, _ = resolve_api_key(spec.name, LLMSettings.model_validate(spec.settings))
        except AuthenticationError as exc:
            raise ConfigError(str(exc), field=f"agent '{spec.name}'") from exc
        if key is not None:
            secrets.append(key.get_secret_value())
    return secrets


def resolve_api_key(agent: str, settings: LLMSettings) -> tuple[SecretStr | None, str | None]:
    """The agent's API key and a description of where it came from (never the key itself).

    Read from the environment variable ``settings.key_env``, else from the
    ``api_key`` of the agent's table in ``settings.config_file``; ``(None,
    None)`` when neither is configured (servers without authentication).

    Raises:
        AuthenticationError: The variable is not set, or the file no longer has the key.
    """
    if settings.key_env is not None:
        value = os.environ.get(settings.key_env)
        if not value:
            raise AuthenticationError(
                f"agent '{agent}': environment variable {settings.key_env} (its API key) is not set"
            )
        return SecretStr(value), f"environment variable {settings.key_env}"
    if settings.config_file is not None:
        try:
            config = read_agent_configs(settings.config_file).get(agent)
        except ConfigError as exc:
            raise AuthenticationError(f"agent '{agent}': cannot read its API key: {exc}") from exc
        if config is None or config.api_key is None:
            raise AuthenticationError(
                f"agent '{agent}': no api_key in {settings.config_file} any more"
            )
        return config.api_key, f"api_key in {settings.config_file}"
    return None, None


def llm_settings(spec: AgentSpec) -> LLMSettings:
    """The LLM settings of ``spec``, validated.

    Raises:
        ConfigError: The settings are not valid for an LLM agent.
    """
    try:
        return LLMSettings.model_validate(spec.settings)
    except ValidationError as exc:
        err = exc.errors()[0]
        loc = ".".join(str(part) for part in err["loc"])
        raise ConfigError(err["msg"], field=f"agent '{spec.name}'.settings.{loc}") from exc
