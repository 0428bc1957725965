"""The agents config file: parsing, error messages, specs without keys, agent selection."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from crabray.agents import AgentSpec, create_agent, load_agents, select_agents
from crabray.agents.config import LLMSettings, read_agent_configs, resolve_api_key
from crabray.core.errors import AuthenticationError, ConfigError
from tests.conftest import ROOT


def write(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "agents.toml"
    path.write_text(textwrap.dedent(body))
    return path


def test_example_file_loads(monkeypatch: pytest.MonkeyPatch) -> None:
    specs = load_agents(ROOT / "agents.example.toml")
    assert set(specs) == {"gpt-4o", "gpt-4o-planner", "gpt-4o-per-env", "qwen-local", "mock-llm"}
    gpt = specs["gpt-4o"]
    assert (gpt.kind, gpt.model, gpt.max_tokens, gpt.max_cost_usd) == (
        "openai",
        "gpt-4o-2024-08-06",
        200000,
        0.5,
    )
    settings = LLMSettings.model_validate(gpt.settings)
    assert settings.vision is True
    assert settings.key_env == "OPENAI_API_KEY"
    assert settings.cost_usd(1_000_000, 100_000) == pytest.approx(3.5)
    assert specs["gpt-4o-planner"].settings["planner_model"] == "gpt-4o-2024-08-06"
    for spec in specs.values():
        create_agent(spec)  # every kind is registered and accepts its settings


def test_errors_name_file_table_and_field(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        """
        [[agents]]
        name = "ok"
        kind = "noop"

        [[agents]]
        name = "hot"
        kind = "openai"
        model = "m"
        temperature = 7
        """,
    )
    with pytest.raises(ConfigError) as caught:
        load_agents(path)
    assert caught.value.file == str(path)
    assert caught.value.field == "agents[1] (hot).temperature"
    assert "less than or equal to 2" in str(caught.value)


@pytest.mark.parametrize(
    ("body", "field", "reason"),
    [
        ('name = "a"\nkind = "gpt"', "agents[0] (a).kind", "openai"),
        ('name = "a"\nkind = "openai"', "agents[0] (a)", "needs a model"),
        ('name = "a"\nkind = "openai"\nmodel = "m"\ntemprature = 1', "temprature", "Extra"),
        ('kind = "noop"', "agents[0].name", "Field required"),
        ('name = "oracle"\nkind = "noop"', "agents[0] (oracle).name", "built-in"),
        (
            'name = "a"\nkind = "openai"\nmodel = "m"\nkey_env = "K"\napi_key = "x"',
            "agents[0] (a)",
            "not both",
        ),
        (
            'name = "a"\nkind = "openai"\nmodel = "m"\nmax_conversation_bytes = 100',
            "agents[0] (a).max_conversation_bytes",
            "greater than or equal to 4096",
        ),
    ],
)
def test_invalid_tables(tmp_path: Path, body: str, field: str, reason: str) -> None:
    path = write(tmp_path, "[[agents]]\n" + body + "\n")
    with pytest.raises(ConfigError) as caught:
        load_agents(path)
    assert field in (caught.value.field or "")
    assert reason in caught.value.reason


def test_duplicate_names_bad_toml_missing_file_and_stray_keys(tmp_path: Path) -> None:
    dup = write(tmp_path, '[[agents]]\nname = "a"\nkind = "noop"\n' * 2)
    with pytest.raises(ConfigError, match="used twice"):
        load_agents(dup)
    with pytest.raises(ConfigError, match="not valid TOML"):
        load_agents(write(tmp_path, "[[agents]\n"))
    with pytest.raises(ConfigError, match="cannot read"):
        load_agents(tmp_path / "nope.toml")
    with pytest.raises(ConfigError, match="unknown top-level"):
        load_agents(write(tmp_path, '[agent]\nname = "a"\n'))


def test_a_key_in_the_file_stays_out_of_the_spec(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = write(
        tmp_path,
        """
        [[agents]]
        name = "inline"
        kind = "openai"
        model = "m"
        api_key = "sk-inline-secret"
        """,
    )
    spec = load_agents(path)["inline"]
    assert "sk-inline-secret" not in spec.model_dump_json()
    assert "sk-inline-secret" not in repr(read_agent_configs(path)["inline"])
    settings = LLMSettings.model_validate(spec.settings)
    assert settings.config_file == str(path.resolve())
    key, source = resolve_api_key("inline", settings)
    assert key is not None and key.get_secret_value() == "sk-inline-secret"
    assert source == f"api_key in {path.resolve()}"
    assert all("sk-inline-secret" not in r.getMessage() for r in caplog.records)
    assert any("prefer key_env" in r.getMessage() for r in caplog.records)


def test_key_from_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    settings = LLMSettings(key_env="CRABRAY_TEST_KEY_X")
    monkeypatch.delenv("CRABRAY_TEST_KEY_X", raising=False)
    with pytest.raises(AuthenticationError, match="CRABRAY_TEST_KEY_X"):
        resolve_api_key("a", settings)
    monkeypatch.setenv("CRABRAY_TEST_KEY_X", "sk-env")
    key, source = resolve_api_key("a", settings)
    assert key is not None and key.get_secret_value() == "sk-env"
    assert source == "environment variable CRABRAY_TEST_KEY_X"
    assert resolve_api_key("a", LLMSettings()) == (None, None)


def test_select_agents(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = write(
        tmp_path,
        """
        [[agents]]
        name = "mine"
        kind = "openai"
        model = "m"
        key_env = "CRABRAY_TEST_KEY_Y"
        max_cost_usd = 0.25
        """,
    )
    monkeypatch.setenv("CRABRAY_TEST_KEY_Y", "sk-y")
    specs = select_agents(["oracle", "mine"], path)
    assert [s.name for s in specs] == ["oracle", "mine"]
    assert specs[0] == AgentSpec(name="oracle", kind="oracle")
    assert specs[1].max_cost_usd == 0.25
    with pytest.raises(ConfigError) as caught:
        select_agents(["nobody"], path)
    assert "available: mine, noop, oracle" in str(caught.value)
    with pytest.raises(ConfigError, match="--agent-config"):
        select_agents(["nobody"])
    with pytest.raises(ConfigError, match="twice"):
        select_agents(["noop", "noop"])
    monkeypatch.delenv("CRABRAY_TEST_KEY_Y")
    with pytest.raises(ConfigError, match="CRABRAY_TEST_KEY_Y"):
        select_agents(["mine"], path)
