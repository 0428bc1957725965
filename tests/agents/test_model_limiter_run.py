"""The run's model limiter on real Ray against the real mock provider (``crabray llm serve``).

Episodes run in several Ray worker processes at once; their calls share one
limiter actor per model. What is asserted is what a user sees: every episode's
outcome, the provider's own counts (``GET /stats``), the rows' model columns
and the per-model line ``crabray run`` prints.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

from crabray.results import read_episodes
from tests.conftest import ROOT, crabray, serve_mock_llm

AGENT = """
[[agents]]
name = "limited"
kind = "openai"
model = "crabray-mock"
base_url = "{url}"
rpm = 0
{extra}
"""


@contextmanager
def mock(tmp_path: Path, *flags: str) -> Iterator[str]:
    env = {**os.environ, "COLUMNS": "200", "NO_COLOR": "1"}
    with serve_mock_llm("tasks/demo", ROOT, env, tmp_path / "serve.log", flags) as url:
        yield url


def stats(url: str) -> dict[str, Any]:
    response = httpx.get(url.removesuffix("/v1") + "/stats", timeout=30)
    response.raise_for_status()
    answer: dict[str, Any] = response.json()
    return answer


def agents_file(tmp_path: Path, url: str, extra: str = "") -> Path:
    path = tmp_path / "agents.toml"
    path.write_text(AGENT.format(url=url, extra=extra))
    return path


@pytest.mark.ray
@pytest.mark.slow
@pytest.mark.usefixtures("private_ray")
def test_a_provider_of_two_calls_loses_no_episode_to_rate_limits(tmp_path: Path) -> None:
    """Six episodes at once against a provider that takes two calls: the limiter (adaptive,
    from its defaults) learns the provider's limit, so 429s stay few and none ends an episode."""
    out = tmp_path / "results"
    with mock(tmp_path, "--max-concurrent", "2", "--latency", "0.3") as url:
        agents = agents_file(tmp_path, url)
        run = crabray(
            "run", "tasks/demo", "--agent-config", str(agents), "--agent", "limited",
            "--concurrency", "6", "--max-attempts", "1", "--out", str(out), timeout=600,
        )  # fmt: skip
        provider = stats(url)
    assert run.returncode == 0, run.stdout + run.stderr
    episodes = read_episodes(out)
    assert (episodes["termination_reason"] == "success").all(), episodes["error"].tolist()
    refused = provider["rate_limited"]["concurrency"]
    assert refused <= 0.25 * provider["requests"], provider
    assert provider["peak_in_flight"] <= 2
    # Every 429 the provider sent is on the rows, and the summary's model line.
    assert episodes["model_rate_limited"].sum() == refused
    assert episodes["model_retries"].sum() >= refused
    assert (episodes["model_latencies_sec"].map(len) == episodes["model_calls"]).all()
    line = re.search(r"^crabray-mock\s+(\d+)\s+(\d+)\s+\S+\s+(\d+)", run.stdout, flags=re.M)
    assert line is not None, run.stdout
    assert int(line.group(1)) == episodes["model_calls"].sum() == provider["served"]
    assert int(line.group(2)) == refused
    # While it ran, the progress showed the limiter's limit and calls beside the episodes.
    shown = re.findall(
        r"in flight \d+, model crabray-mock: limit (\d+), (\d+) in flight", run.stderr
    )
    assert shown, run.stderr
    assert all(1 <= int(limit) <= 32 and int(calls) <= int(limit) for limit, calls in shown)


@pytest.mark.ray
@pytest.mark.slow
@pytest.mark.usefixtures("private_ray")
def test_waiting_for_the_model_limiter_is_not_counted_against_the_time_limit(
    tmp_path: Path,
) -> None:
    """One call at a time for six episodes of three 1 s calls each: the last waits some
    15 s for its grants, past its 8 s time limit, and still finishes on its own time. The
    progress shows the limit of one call and the calls waiting for it."""
    out = tmp_path / "results"
    with mock(tmp_path, "--latency", "1") as url:
        agents = agents_file(tmp_path, url, "max_connections = 1\nadaptive = false")
        run = crabray(
            "run", "tasks/demo", "--agent-config", str(agents), "--agent", "limited",
            "--task", "deploy-config", "--epochs", "6", "--concurrency", "6",
            "--time-limit-sec", "8", "--max-attempts", "1", "--out", str(out), timeout=600,
        )  # fmt: skip
        provider = stats(url)
    assert run.returncode == 0, run.stdout + run.stderr
    episodes = read_episodes(out)
    assert (episodes["termination_reason"] == "success").all(), episodes[
        ["termination_reason", "error"]
    ].to_dict("records")
    assert provider["peak_in_flight"] == 1 and provider["rate_limited"]["concurrency"] == 0
    assert episodes["model_wait_sec"].max() > 8  # waited past the limit, not charged for it
    shown = re.findall(
        r"^episodes (\d)/6, \d ok, in flight (\d), model crabray-mock: limit 1, ([01]) in "
        r"flight(?:, (\d) waiting)?$",
        run.stderr,
        flags=re.M,
    )
    assert shown and shown[-1][0] == "6", run.stderr
    # Episodes in flight wait for the one call their model allows at a time.
    assert any(int(waiting or 0) >= 1 for _, _, _, waiting in shown), shown
