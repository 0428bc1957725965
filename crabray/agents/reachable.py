"""Whether the model servers of a run's LLM agents answer, asked once before it starts.

A model server that is down fails every episode of its agent the same way,
each only after the client's retries (about 20 s), and the run ends on a
column of infrastructure errors. The run's preflight (``crabray.run.preflight``)
asks each distinct ``base_url`` once instead, where the agents will run, and
stops the run before any episode when one does not answer.

The question is one HTTP request (``GET {base_url}/models``) sent the way the
agent's client sends its own (httpx, with the environment's proxy settings)
without the API key: any answer, a 401 or a 404 included, means a server is
there; no answer within ``ANSWER_TIMEOUT_SEC`` (refused, no such host, TLS
refused, silence) means it is not.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor

from crabray.agents.base import AgentSpec
from crabray.agents.config import LLM_KINDS, llm_settings

logger = logging.getLogger(__name__)

ANSWER_TIMEOUT_SEC = 5.0
"""How long the preflight waits for a model server's first answer: a server that is
up answers a request for its model list in well under a second."""


def model_servers(agents: Iterable[AgentSpec]) -> dict[str, list[str]]:
    """The ``base_url`` of each LLM agent, with the agents that use it (in the run's order).

    Raises:
        ConfigError: An LLM agent's settings are not valid (``llm_settings``).
    """
    servers: dict[str, list[str]] = {}
    for agent in agents:
        if agent.kind in LLM_KINDS:
            servers.setdefault(llm_settings(agent).base_url, []).append(agent.name)
    return servers


def unanswered(base_url: str, timeout_sec: float = ANSWER_TIMEOUT_SEC) -> str | None:
    """Why the model server at ``base_url`` does not answer from here, or None if it does.

    Args:
        base_url: An agent's API root (``http://127.0.0.1:8000/v1``).
        timeout_sec: How long to wait for the connection and the answer.
    """
    import httpx  # the LLM client's own library: loaded only for a run with LLM agents

    url = base_url.rstrip("/") + "/models"
    try:
        with httpx.Client(timeout=timeout_sec, follow_redirects=False) as client:
            status = client.get(url).status_code
    except httpx.TimeoutException:
        return f"no answer within {timeout_sec:g} s"
    except (httpx.HTTPError, OSError, ValueError) as exc:  # refused, unknown host, bad URL
        return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
    logger.debug("model server %s answered HTTP %d", base_url, status)
    return None


def unanswered_servers(
    base_urls: Iterable[str], timeout_sec: float = ANSWER_TIMEOUT_SEC
) -> dict[str, str]:
    """``unanswered`` for each of ``base_urls`` at once: the ones that do not answer, and why."""
    urls = list(dict.fromkeys(base_urls))
    if not urls:
        return {}
    with ThreadPoolExecutor(max_workers=min(8, len(urls))) as pool:
        answers = list(pool.map(lambda url: unanswered(url, timeout_sec), urls))
    return {url: why for url, why in zip(urls, answers, strict=True) if why is not None}
