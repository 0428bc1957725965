"""``crabray llm serve``'s provider limits, measured from outside: real servers, real HTTP.

Each flag is checked by what a client sees (statuses, ``Retry-After``, delays)
and by what ``GET /stats`` and the summary printed at shutdown count. Delays
are asserted as lower bounds and refusals as counts, never rates or upper
bounds, so a busy machine does not fail them.
"""

from __future__ import annotations

import os
import random
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

from crabray.agents.chat_server import ChatRequest, ChatServer, ReplayModel
from crabray.agents.provider_limits import LatencySpec, ProviderLimits
from tests.conftest import ROOT, crabray, serve_mock_llm

BODY = {"model": "m", "messages": [{"role": "user", "content": "Task: not in the demo suite"}]}
"""A request the mock model answers in text (it has no solution for it): same size every time."""


@contextmanager
def served(tmp_path: Path, *flags: str) -> Iterator[tuple[str, Path]]:
    """``crabray llm serve tasks/demo FLAGS``: its base URL, and its log (complete on exit)."""
    env = {**os.environ, "COLUMNS": "200", "NO_COLOR": "1"}
    log = tmp_path / "serve.log"
    with serve_mock_llm("tasks/demo", ROOT, env, log, flags) as url:
        yield url, log


def post(url: str, body: dict[str, Any] = BODY) -> httpx.Response:
    return httpx.post(f"{url}/chat/completions", json=body, timeout=30)


def stats(url: str) -> dict[str, Any]:
    response = httpx.get(url.removesuffix("/v1") + "/stats", timeout=30)
    response.raise_for_status()
    result: dict[str, Any] = response.json()
    return result


def burst(url: str, count: int) -> list[tuple[httpx.Response, float]]:
    """``count`` requests sent at once from as many threads: each response and its seconds."""
    gate = threading.Barrier(count)
    results: list[tuple[httpx.Response, float]] = []
    lock = threading.Lock()

    def call() -> None:
        gate.wait()
        started = time.monotonic()
        response = post(url)
        with lock:
            results.append((response, time.monotonic() - started))

    threads = [threading.Thread(target=call) for _ in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert len(results) == count, "a client got no answer"
    return results


def tokens_per_request() -> int:
    """The tokens the mock model counts for ``BODY`` (its usage: prompt + completion)."""
    reply = ReplayModel({})(ChatRequest("/v1/chat/completions", {}, BODY))
    total: int = reply.body["usage"]["total_tokens"]
    return total


def test_max_concurrent_answers_the_excess_with_429_and_retry_after(tmp_path: Path) -> None:
    with served(tmp_path, "--max-concurrent", "4", "--latency", "2") as (url, log):
        results = burst(url, 12)
        counts = stats(url)
    served_ = [(r, sec) for r, sec in results if r.status_code == 200]
    refused = [r for r, _ in results if r.status_code == 429]
    assert len(served_) == 4 and len(refused) == 8, [r.status_code for r, _ in results]
    assert {r.headers["retry-after"] for r in refused} == {"2"}  # the mean latency, rounded up
    assert "in flight" in refused[0].json()["error"]["message"]
    assert all(sec >= 2 for _, sec in served_)
    assert counts["requests"] == 12 and counts["served"] == 4
    assert counts["rate_limited"] == {"concurrency": 8, "rpm": 0, "tpm": 0}
    assert counts["peak_in_flight"] == 4 and counts["in_flight"] == 0
    assert counts["replies_by_status"] == {"200": 4, "429": 8}
    assert counts["capacity_per_sec"] == 2.0  # 4 in flight, 2 s each
    out = log.read_text()
    assert "limits: at most 4 in flight, latency 2 s" in out
    assert "stopped: 12 requests: 4 served, 8 rate-limited (concurrency 8, rpm 0, tpm 0)" in out


def test_rpm_refuses_the_request_past_the_limit(tmp_path: Path) -> None:
    with served(tmp_path, "--rpm", "5") as (url, _):
        statuses = [post(url) for _ in range(6)]
        counts = stats(url)
    assert [r.status_code for r in statuses] == [200] * 5 + [429]
    assert 1 <= int(statuses[-1].headers["retry-after"]) <= 60
    assert "(rpm)" in statuses[-1].json()["error"]["message"]
    assert counts["rate_limited"] == {"concurrency": 0, "rpm": 1, "tpm": 0}
    assert counts["requests"] == 6 and counts["served"] == 5


def test_rpm_counts_over_a_sliding_window() -> None:
    limits = ProviderLimits(rpm=2, window_sec=1.0)
    with ChatServer(ReplayModel({}), limits=limits) as server:
        first = [post(server.base_url).status_code for _ in range(3)]
        time.sleep(1.2)  # the first two have left the window
        later = post(server.base_url).status_code
    assert first == [200, 200, 429]
    assert later == 200


def test_tpm_refuses_the_reply_that_would_pass_the_limit(tmp_path: Path) -> None:
    each = tokens_per_request()
    with served(tmp_path, "--tpm", str(each * 5 // 2)) as (url, _):
        statuses = [post(url) for _ in range(3)]
        counts = stats(url)
    assert [r.status_code for r in statuses] == [200, 200, 429]
    assert 1 <= int(statuses[-1].headers["retry-after"]) <= 60
    assert "tpm" in statuses[-1].json()["error"]["message"]
    assert counts["tokens_in"] + counts["tokens_out"] == 2 * each  # the refused reply not counted
    assert counts["rate_limited"] == {"concurrency": 0, "rpm": 0, "tpm": 1}


def test_tpm_refuses_a_request_bigger_than_the_limit_on_its_own(tmp_path: Path) -> None:
    with served(tmp_path, "--tpm", "1") as (url, _):
        refused = post(url)
    assert refused.status_code == 429
    assert "on its own" in refused.json()["error"]["message"]


@pytest.mark.parametrize(("rate", "status"), [("1.0", 500), ("0.0", 200)])
def test_error_rate_fails_that_share_of_requests(tmp_path: Path, rate: str, status: int) -> None:
    with served(tmp_path, "--error-rate", rate) as (url, log):
        statuses = {post(url).status_code for _ in range(8)}
        counts = stats(url)
    assert statuses == {status}
    failed = 8 if status == 500 else 0
    assert counts["injected_errors"] == failed and counts["server_errors"] == failed
    assert f"{failed} server errors ({failed} injected)" in log.read_text()


def test_seed_makes_the_errors_reproducible(tmp_path: Path) -> None:
    with served(tmp_path, "--error-rate", "0.5", "--seed", "7") as (url, _):
        from_the_command = [post(url).status_code for _ in range(16)]
    limits = ProviderLimits(error_rate=0.5, seed=7)
    with ChatServer(ReplayModel({}), limits=limits) as server:
        again = [post(server.base_url).status_code for _ in range(16)]
    assert from_the_command == again
    assert set(again) == {200, 500}


@pytest.mark.parametrize(("spec", "at_least"), [("0.3", 0.3), ("uniform:0.2,0.4", 0.2)])
def test_latency_delays_every_reply(tmp_path: Path, spec: str, at_least: float) -> None:
    with served(tmp_path, "--latency", spec) as (url, _):
        for _ in range(3):
            started = time.monotonic()
            assert post(url).status_code == 200
            assert time.monotonic() - started >= at_least


@pytest.mark.parametrize(
    "spec", ["gamma:1", "uniform:0.5", "uniform:0.5,0.1", "normal:0.3,-1", "fast", "exp:0", "-1"]
)
def test_a_bad_latency_spec_is_refused(spec: str) -> None:
    done = crabray("llm", "serve", "tasks/demo", "--port", "0", "--latency", spec)
    assert done.returncode == 2
    assert "--latency: " in done.stderr and "uniform:LOW,HIGH" in done.stderr, done.stderr
    assert "Traceback" not in done.stderr


def test_without_limits_nothing_is_refused() -> None:
    with ChatServer(ReplayModel({})) as server:
        results = burst(server.base_url, 20)
        counts = stats(server.base_url)
    assert {r.status_code for r, _ in results} == {200}
    assert counts["requests"] == 20 and counts["served"] == 20
    assert counts["rate_limited"] == {"concurrency": 0, "rpm": 0, "tpm": 0}
    assert counts["tokens_in"] + counts["tokens_out"] == 20 * tokens_per_request()


def test_requests_are_answered_at_once_not_one_by_one() -> None:
    limits = ProviderLimits(latency=LatencySpec.parse("1"))
    with ChatServer(ReplayModel({}), limits=limits) as server:
        results = burst(server.base_url, 6)
        counts = stats(server.base_url)
    assert {r.status_code for r, _ in results} == {200}
    assert counts["peak_in_flight"] > 1, "the server answers one request at a time"


@pytest.mark.parametrize(
    ("text", "mean"),
    [("0.3", 0.3), ("uniform:0.1,0.5", 0.3), ("normal:0.3,0", 0.3), ("exp:0.3", 0.3)],
)
def test_a_latency_spec_reads_back_as_written(text: str, mean: float) -> None:
    spec = LatencySpec.parse(text)
    assert str(spec) == text
    assert spec.mean_sec == pytest.approx(mean)


def test_normal_latencies_are_clipped_at_zero() -> None:
    spec = LatencySpec.parse("normal:0,1")
    draws = [spec.draw(random.Random(seed)) for seed in range(200)]
    assert min(draws) == 0.0 and max(draws) > 0
    assert spec.mean_sec == pytest.approx(1 / (2 * 3.141592653589793) ** 0.5)
