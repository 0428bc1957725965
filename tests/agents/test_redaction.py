"""A model that repeats its API key: the key is kept nowhere, not in results, logs or the site."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from crabray.core.redact import REDACTED, Redactor, secrets_in_environment
from crabray.results import read_episodes, read_steps
from tests.agents.conftest import write_agents_file, write_hello_suite
from tests.agents.fake_server import FakeChatServer, completion, tool_call
from tests.conftest import crabray

FILE_KEY = "sk-in-the-agents-file-7f3a9c"
ENV_TOKEN = "tok-of-the-driver-environment-51e0"


def strings(frame: pd.DataFrame) -> list[str]:
    """Every string cell of ``frame``, inside lists too."""
    found: list[str] = []
    for value in frame.astype(object).to_numpy().ravel():
        if isinstance(value, str):
            found.append(value)
        elif hasattr(value, "__iter__") and not isinstance(value, bytes | dict):
            found += [v for v in value if isinstance(v, str)]
    return found


def test_redactor_replaces_every_known_secret() -> None:
    redactor = Redactor(["sk-0123456789", "short", "sk-0123456789-longer"])
    assert redactor.text("a sk-0123456789-longer b sk-0123456789 c short") == (
        f"a {REDACTED} b {REDACTED} c short"
    )
    assert redactor.data({"k": ["x sk-0123456789", b"sk-0123456789"]}) == {
        "k": [f"x {REDACTED}", b"sk-0123456789"]
    }
    assert secrets_in_environment({"OPENAI_API_KEY": "a", "HF_TOKEN": "b", "HOME": "c"}) == [
        "a",
        "b",
    ]


@pytest.mark.ray
@pytest.mark.slow
@pytest.mark.usefixtures("private_ray")
def test_a_reply_repeating_the_keys_is_stored_redacted(
    server: FakeChatServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    suite = write_hello_suite(tmp_path, "[*SHELL_ACTIONS, *FILE_ACTIONS]")
    config = write_agents_file(
        tmp_path,
        name="leaky",
        kind="openai",
        model="fake-model-1",
        base_url=server.base_url,
        api_key=FILE_KEY,
        retries=0,
    )
    leak = f"my key is {FILE_KEY} and the token is {ENV_TOKEN}"
    echo = tool_call("run_command", command=f"echo {FILE_KEY} {ENV_TOKEN}")
    echo.body["choices"][0]["message"]["content"] = leak
    server.add(
        completion(echo.body["choices"][0]["message"], finish="tool_calls"),
        tool_call("write_file", path="hello.txt", content=f"hi {FILE_KEY}\n"),
    )
    monkeypatch.setenv("CRABRAY_TEST_SERVICE_TOKEN", ENV_TOKEN)
    out, site = tmp_path / "out", tmp_path / "site"
    done = crabray("-vv", "run", str(suite), "--agent-config", str(config),
                   "--agent", "leaky", "--out", str(out))  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert server.requests, "the model was asked"

    episodes, steps = read_episodes(out), read_steps(out)
    assert episodes.termination_reason.tolist() == ["success"]
    text = strings(episodes) + strings(steps)
    assert not [s for s in text if FILE_KEY in s or ENV_TOKEN in s]
    assert any(REDACTED in s for s in strings(steps)), "the leaks are marked where they were"

    built = crabray("leaderboard", str(out), "--html", str(site))
    assert built.returncode == 0, built.stderr
    pages = [p for p in site.rglob("*") if p.is_file()]
    assert any(REDACTED.encode() in p.read_bytes() for p in pages)
    for page in pages:
        assert FILE_KEY.encode() not in page.read_bytes(), page
        assert ENV_TOKEN.encode() not in page.read_bytes(), page
    for shown in (done.stdout + done.stderr, built.stdout + built.stderr):
        assert FILE_KEY not in shown and ENV_TOKEN not in shown
