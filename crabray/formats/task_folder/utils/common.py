"""Helpers for task-folder evaluators: ``@grader``, an LLM judge, file and trajectory checks.

This file runs INSIDE a task's container as ``/utils/common.py`` (Debian's
python3, standard library only, crabray is not installed there). It keeps the
names evaluators written for the format's original base image import
(``grader``, ``llm_complete``, ``evaluate_with_llm``, ``check_repo_exists``,
``get_all_texts_from_slide``, and the modules a star import brings: ``os``,
``logging``, ``base64``, ``subprocess``),
so they run unmodified. The original's clients for its hosted services
(RocketChat, GitLab, ownCloud, Plane) are not provided: crabray runs no such
services.

The LLM judge speaks the OpenAI chat-completions protocol with urllib, to the
endpoint named by the original format's environment variables, which crabray
forwards from the worker when they are set:

- ``LITELLM_BASE_URL``: the API root, joined with ``/chat/completions`` exactly
  like crabray's agents' ``base_url`` (so give ``http://host:4000/v1`` when the
  server serves ``/v1/chat/completions``);
- ``LITELLM_API_KEY``: sent as a bearer token (optional for servers without keys);
- ``LITELLM_MODEL``: the model name the server knows.
"""

from __future__ import annotations

import base64
import functools
import json
import logging
import os
import re
import subprocess  # noqa: F401  (the original's `from common import *` hands evaluators these)
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from typing import Any

logger = logging.getLogger("common")

IMAGE_JPEG = "image/jpeg"
IMAGE_PNG = "image/png"

_RETRY_STATUSES = (408, 409, 429)
_MESSAGE_CHARS = 500
_ANSWER = re.compile(r"\b(yes|no)\b")

# Files that prove one of the original suite's repositories was cloned into /workspace.
PROJECT_FILES = {
    "openhands": ".openhands_instructions",
    "janusgraph": ".backportrc.json",
    "colly": "xmlelement_test.go",
    "streamlit": ".ruff.toml",
    "risingwave": "risedev.yml",
    "bustub": "CMakeLists.txt",
}


class LLMConfigError(RuntimeError):
    """The LLM judge is not configured: an environment variable is missing."""


class LLMError(RuntimeError):
    """The LLM endpoint refused the request or answered something unreadable."""


def grader(func: Callable[..., Any]) -> Callable[..., Any]:
    """Make a checkpoint function fail safe: an exception or a None return becomes False.

    One broken check (a missing file, an unreachable service) then fails its
    own checkpoint instead of the whole evaluation. The exception is logged
    with its traceback so the evaluator's output says why.
    """

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            result = func(*args, **kwargs)
        except Exception:
            logger.exception("checkpoint %s raised; counted as failed", func.__name__)
            return False
        if result is None:
            logger.warning("checkpoint %s returned None; counted as failed", func.__name__)
            return False
        return result

    return wrapper


def _llm_settings() -> tuple[str, str | None, str]:
    """``(base_url, api_key, model)`` from the environment, or a clear error."""
    base_url = os.environ.get("LITELLM_BASE_URL", "").strip()
    model = os.environ.get("LITELLM_MODEL", "").strip()
    missing = [
        name
        for name, value in (("LITELLM_BASE_URL", base_url), ("LITELLM_MODEL", model))
        if not value
    ]
    if missing:
        raise LLMConfigError(
            f"the LLM judge is not configured: set {' and '.join(missing)} in the environment "
            "crabray runs (it forwards LITELLM_BASE_URL, LITELLM_API_KEY and LITELLM_MODEL "
            "to the evaluator)"
        )
    api_key = os.environ.get("LITELLM_API_KEY", "").strip() or None
    return base_url, api_key, model


def _server_message(body: bytes, api_key: str | None) -> str:
    text = body.decode("utf-8", "replace")
    try:
        data = json.loads(text)
    except ValueError:
        data = None
    if isinstance(data, dict) and isinstance(data.get("error"), dict):
        text = str(data["error"].get("message") or text)
    text = text.strip()[:_MESSAGE_CHARS]
    return text.replace(api_key, "***") if api_key else text


def llm_complete(
    messages: list[dict[str, Any]],
    *,
    temperature: float | None = 0.0,
    timeout_sec: float = 120.0,
    max_retries: int = 3,
) -> dict[str, Any]:
    """Send one chat-completions request and return the server's JSON answer.

    Rate limits, server errors and refused connections are retried with
    exponential backoff. The answer is the raw response dict, as in the
    original (``answer["choices"][0]["message"]["content"]``).

    Args:
        messages: OpenAI message dicts, e.g. ``[{"role": "user", "content": "Hi"}]``.
        temperature: Sampling temperature; omitted from the request when None.
        timeout_sec: Per attempt.
        max_retries: Attempts after the first one.

    Raises:
        LLMConfigError: ``LITELLM_BASE_URL`` or ``LITELLM_MODEL`` is not set.
        LLMError: The server refused the request, retries ran out, or the answer is not JSON.
    """
    base_url, api_key, model = _llm_settings()
    url = base_url.rstrip("/") + "/chat/completions"
    body: dict[str, Any] = {"model": model, "messages": messages}
    if temperature is not None:
        body["temperature"] = temperature
    headers = {"Content-Type": "application/json"}
    if api_key:
        headers["Authorization"] = f"Bearer {api_key}"
    payload = json.dumps(body).encode()
    for attempt in range(max_retries + 1):
        request = urllib.request.Request(url, data=payload, headers=headers, method="POST")
        try:
            with urllib.request.urlopen(request, timeout=timeout_sec) as response:
                raw = response.read()
            break
        except urllib.error.HTTPError as exc:
            message = _server_message(exc.read(), api_key)
            retryable = exc.code in _RETRY_STATUSES or exc.code >= 500
            if not retryable or attempt == max_retries:
                raise LLMError(f"LLM endpoint {url} answered HTTP {exc.code}: {message}") from exc
            problem = f"HTTP {exc.code}"
        except (urllib.error.URLError, TimeoutError, ConnectionError) as exc:
            if attempt == max_retries:
                raise LLMError(f"LLM endpoint {url} unreachable: {exc}") from exc
            problem = str(exc)
        delay = min(2.0**attempt, 30.0)
        logger.warning("LLM endpoint %s: %s; retry %d in %.0f s", url, problem, attempt + 1, delay)
        time.sleep(delay)
    try:
        reply: dict[str, Any] = json.loads(raw)
        return reply
    except ValueError as exc:
        snippet = raw[:_MESSAGE_CHARS].decode("utf-8", "replace")
        raise LLMError(f"LLM endpoint {url} answered non-JSON: {snippet!r}") from exc


def _image_part(image_path: str, image_type: str) -> dict[str, Any]:
    if image_type not in (IMAGE_JPEG, IMAGE_PNG):
        raise ValueError(f"image_type must be {IMAGE_JPEG} or {IMAGE_PNG}, got {image_type!r}")
    with open(image_path, "rb") as handle:
        encoded = base64.b64encode(handle.read()).decode()
    return {"type": "image_url", "image_url": {"url": f"data:{image_type};base64,{encoded}"}}


def evaluate_with_llm(
    content: str,
    predicate: str,
    additional_prompt: str = "",
    image_path: str | None = None,
    image_type: str = IMAGE_JPEG,
) -> bool:
    """Ask the LLM judge whether ``content`` (and/or an image) shows ``predicate``.

    The judge is asked to answer "yes" or "no"; the first of those words in its
    answer decides. Empty content without an image is False (nothing to judge).

    Args:
        content: The text to judge, e.g. a report the agent wrote.
        predicate: What it should show, e.g. "the total revenue is 42,000 USD".
        additional_prompt: Appended to the question (extra instructions for the judge).
        image_path: A JPEG or PNG file to judge with the content.
        image_type: ``IMAGE_JPEG`` or ``IMAGE_PNG``.

    Raises:
        LLMConfigError: The judge is not configured (see the module docstring).
        LLMError: The endpoint failed, or the answer has neither "yes" nor "no".
    """
    if not content and not image_path:
        logger.warning("evaluate_with_llm: no content and no image to judge; answering False")
        return False
    if content and image_path:
        query = f'Does the content """{content}""" and the following picture indicate {predicate}?'
    elif content:
        query = f'Does the content """{content}""" indicate {predicate}?'
    else:
        query = f"Does the following picture indicate {predicate}?"
    query += f' Please answer "yes" if it does, or "no" if it does not. {additional_prompt}'
    parts: list[dict[str, Any]] = [{"type": "text", "text": query.strip()}]
    if image_path:
        parts.append(_image_part(image_path, image_type))
    answer = llm_complete([{"role": "user", "content": parts}])
    try:
        text = str(answer["choices"][0]["message"]["content"] or "")
    except (KeyError, IndexError, TypeError) as exc:
        raise LLMError(f"LLM answer has no choices[0].message.content: {answer!r:.300}") from exc
    found = _ANSWER.search(text.lower())
    if found is None:
        raise LLMError(f"LLM judge answered neither yes nor no: {text[:_MESSAGE_CHARS]!r}")
    verdict = found.group(1) == "yes"
    logger.info("LLM judge: %r -> %s (%r)", predicate, verdict, text[:200])
    return verdict


def check_file_exists(path: str) -> bool:
    """Whether ``path`` is an existing regular file."""
    return os.path.isfile(path)


def read_file(path: str, encoding: str = "utf-8") -> str:
    """The text of ``path``; raises (OSError) when it cannot be read, so ``@grader`` fails."""
    with open(path, encoding=encoding) as handle:
        return handle.read()


def check_repo_exists(project_name: str) -> bool:
    """Whether one of the original suite's repositories is cloned under /workspace."""
    if project_name not in PROJECT_FILES:
        logger.warning("unknown project %r; known: %s", project_name, sorted(PROJECT_FILES))
        return False
    return os.path.isfile(os.path.join("/workspace", project_name, PROJECT_FILES[project_name]))


def get_all_texts_from_slide(slide: Any) -> str:
    """The lower-cased text of every text frame of a python-pptx slide, space-joined
    (the original's helper; ``""`` for no slide)."""
    if slide is None:
        return ""
    return " ".join(shape.text_frame.text.lower() for shape in slide.shapes if shape.has_text_frame)


def parse_trajectory(trajectory: str) -> list[dict[str, Any]]:
    """The agent's steps from crabray's trajectory JSON (an array of step objects).

    Each step has ``step``, ``env``, ``action``, ``arguments``, ``result``,
    ``error`` and ``agent_message``. Substring checks on the raw text work too;
    this is for checks that need to know which action ran with which arguments.

    Raises:
        ValueError: ``trajectory`` is not a JSON array.
    """
    steps = json.loads(trajectory) if trajectory.strip() else []
    if not isinstance(steps, list):
        raise ValueError(f"the trajectory is not a JSON array but {type(steps).__name__}")
    return steps


def commands_run(trajectory: str) -> list[str]:
    """The command lines the agent ran with ``run_command``, in order."""
    return [
        str(step["arguments"]["command"])
        for step in parse_trajectory(trajectory)
        if isinstance(step, dict)
        and step.get("action") == "run_command"
        and isinstance(step.get("arguments"), dict)
        and "command" in step["arguments"]
    ]
