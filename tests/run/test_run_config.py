"""The run configuration: a TOML run file, command-line overrides, and the CLI's options."""

from __future__ import annotations

from importlib.metadata import version
from pathlib import Path

import pytest
from typer.testing import CliRunner

from crabray.cli import app
from crabray.cluster.sweep.settings import Execution, SchedulerSettings
from crabray.core.errors import ConfigError
from crabray.results import list_runs, read_episodes, read_manifest
from crabray.run import RunSpec, load_run_spec
from crabray.run.spec import FLAT_KEYS
from tests.conftest import ROOT, crabray

runner = CliRunner()


def invoke(*args: str, env: dict[str, str] | None = None) -> tuple[int, str]:
    """Run the CLI in-process; its exit code and everything it printed."""
    result = runner.invoke(app, list(args), env={"COLUMNS": "200", "NO_COLOR": "1", **(env or {})})
    return result.exit_code, result.output


def test_a_run_file_is_read_with_paths_relative_to_it(tmp_path: Path) -> None:
    path = tmp_path / "conf" / "run.toml"
    path.parent.mkdir()
    path.write_text(
        'suite = "../suite.py"\nagents = ["oracle", "noop"]\nconcurrency = 4\n'
        'out_dir = "/abs/results"\ntask_ids = ["a"]\n'
    )
    spec = load_run_spec(path)
    assert Path(spec.what.suite or "") == path.parent / "../suite.py"
    assert spec.agents.names == ["oracle", "noop"]
    assert (spec.execution.concurrency, spec.what.epochs) == (4, RunSpec().what.epochs)
    assert spec.results.out_dir.path == Path("/abs/results")
    assert spec.what.task_ids == ["a"]


def test_options_override_only_the_fields_they_set(tmp_path: Path) -> None:
    path = tmp_path / "run.toml"
    path.write_text('suite = "s.py"\nagents = ["oracle"]\nconcurrency = 4\nepochs = 3\n')
    merged = load_run_spec(path).updated(RunSpec.of(epochs=1, concurrency=None))
    assert (merged.execution.concurrency, merged.what.epochs) == (4, 1)
    assert merged.agents.names == ["oracle"]
    assert merged.what.suite == str(tmp_path / "s.py")


def test_every_bad_field_of_a_run_file_is_named_with_the_file(tmp_path: Path) -> None:
    path = tmp_path / "run.toml"
    path.write_text('concurency = 4\nepochs = 0\nagents = "oracle"\n')
    with pytest.raises(ConfigError) as info:
        load_run_spec(path)
    message = str(info.value)
    assert message.startswith(f"{path}: ")
    assert "concurency: Extra inputs are not permitted" in message
    assert "known fields:" in message and "concurrency" in message
    assert "epochs: Input should be greater than 0" in message
    assert "agents: Input should be a valid list" in message


def test_a_run_file_that_is_not_toml_is_a_config_error(tmp_path: Path) -> None:
    path = tmp_path / "run.toml"
    path.write_text("suite = [unclosed\n")
    with pytest.raises(ConfigError, match="not valid TOML"):
        load_run_spec(path)
    with pytest.raises(ConfigError, match="cannot read run file"):
        load_run_spec(tmp_path / "missing.toml")


def test_run_defaults_are_written_once() -> None:
    """Issue 38: the scheduler takes the run's execution part whole; no field of a run is
    declared twice, in the run or beside it."""
    assert SchedulerSettings.model_fields["execution"].annotation is Execution
    assert not set(SchedulerSettings.model_fields) & set(Execution.model_fields)
    parts = [RunSpec.model_fields[name].annotation for name in RunSpec.model_fields]
    names = [name for part in parts for name in part.model_fields]  # type: ignore[union-attr]
    assert len(names) == len(set(names)) == len(FLAT_KEYS), "each flat key is one field"


def test_limits_and_suite_options_are_declared_once() -> None:
    """The run carries them by their flat names; the scheduler and the episode embed the model."""
    from crabray.episode import EpisodeLimits, EpisodeSettings
    from crabray.formats import SuiteOptions

    for model in (SchedulerSettings, EpisodeSettings):
        assert model.model_fields["limits"].annotation is EpisodeLimits
        assert not set(model.model_fields) & set(EpisodeLimits.model_fields)
    limits, what = (
        RunSpec.model_fields["limits"].annotation,
        RunSpec.model_fields["what"].annotation,
    )
    assert isinstance(limits, type) and issubclass(limits, EpisodeLimits)
    assert isinstance(what, type) and issubclass(what, SuiteOptions)
    spec = RunSpec.of(max_steps=3, time_limit_sec=9.5, backend="docker")
    assert spec.limits.episode == EpisodeLimits(max_steps=3, time_limit_sec=9.5)
    assert spec.what.backend == "docker"


def test_resume_rules_come_from_the_fields() -> None:
    """What a resume checks (what the episodes are) and keeps (how they run) is read from
    each field's metadata, not listed beside the model."""
    from crabray.run.resume import keys_with

    assert set(keys_with("fixed")) == {
        "format", "backend", "backend_settings", "index", "base_image", "services",
        "epochs", "task_ids", "tags", "limit", "max_steps", "time_limit_sec",
    }  # fmt: skip
    assert set(keys_with("kept")) == {
        "concurrency", "max_attempts", "pooling", "warm", "local_slots", "suite_origin",
        "max_cost_usd", "max_tokens",
    }  # fmt: skip


def test_cli_run_file_errors_exit_2_with_file_and_field(tmp_path: Path) -> None:
    path = tmp_path / "run.toml"
    path.write_text('suite = "x.py"\nagents = ["oracle"]\nconcurrency = 0\n')
    code, output = invoke("run", "--config", str(path))
    assert code == 2
    assert f"{path}: concurrency: Input should be greater than 0" in output
    code, output = invoke("run", "--config", str(path), "--concurrency", "0")
    assert code == 2 and "Invalid value for '--concurrency'" in output


def test_cli_run_says_what_is_missing(tmp_path: Path) -> None:
    code, output = invoke("run")
    assert code == 2 and "no suite: give SUITE" in output
    code, output = invoke("run", "tasks/demo")
    assert code == 2 and "no agent: give --agent NAME" in output
    path = tmp_path / "run.toml"
    path.write_text('agents = ["nobody"]\n')
    code, output = invoke("run", str(tmp_path / "missing.py"), "--config", str(path))
    assert code == 2 and "unknown agent 'nobody'" in output  # the file's agents, the CLI's suite


def test_version_comes_from_the_package_metadata() -> None:
    code, output = invoke("--version")
    assert code == 0
    assert output.strip() == f"crabray {version('crabray')}"


COMMANDS = [
    ("run",),
    ("leaderboard",),
    ("view",),
    ("tasks", "list"),
    ("tasks", "validate"),
    ("runs", "list"),
    ("cluster", "start-head"),
    ("cluster", "start-worker"),
    ("cluster", "local"),
    ("cluster", "status"),
    ("cluster", "stop"),
    ("envs", "build"),
    ("envs", "list"),
    ("envs", "prune"),
]


@pytest.mark.parametrize("command", COMMANDS, ids=" ".join)
def test_every_command_help_shows_examples(command: tuple[str, ...]) -> None:
    code, output = invoke(*command, "--help")
    assert code == 0
    assert "Example" in output
    assert f"crabray {' '.join(command)}" in output


def test_index_help_is_not_eaten_by_markup() -> None:
    code, output = invoke("tasks", "list", "--help")
    assert code == 0
    assert "index file mapping each tool to the task ids" in " ".join(output.split())


def test_suite_format_option_and_its_deprecated_spelling(tmp_path: Path) -> None:
    code, output = invoke("tasks", "validate", "tasks/demo", "--suite-format", "python")
    assert code == 0, output
    code, output = invoke("tasks", "validate", "tasks/demo", "--format", "python")
    assert code == 0, output
    assert "--format is deprecated" in output
    code, output = invoke("tasks", "validate", "tasks/demo", "--suite-format", "nope")
    assert code == 2 and "unknown format 'nope'" in output
    code, output = invoke("tasks", "validate", "--help")
    assert "--suite-format" in output and "--format" not in output.replace("--suite-format", "")
    # `tasks list --format` is the output format (table, json, ids), not the suite's.
    code, output = invoke("tasks", "list", "tasks/demo", "--format", "python")
    assert code == 2 and "python" in output


def test_the_example_run_file_is_valid_and_complete() -> None:
    spec = load_run_spec(ROOT / "run.example.toml")
    assert spec.what.suite == str(ROOT / "tasks" / "demo")
    assert spec.agents.names == ["oracle", "noop"]
    text = (ROOT / "run.example.toml").read_text()
    undocumented = [key for key in FLAT_KEYS if f"{key} =" not in text]
    assert undocumented == [], "every field is shown in the example"


@pytest.mark.ray
@pytest.mark.slow
def test_a_run_from_a_file_with_options_overriding_it(tmp_path: Path) -> None:
    path = tmp_path / "run.toml"
    path.write_text(
        f'suite = "{ROOT / "tasks" / "demo"}"\nagents = ["oracle", "noop"]\n'
        'out_dir = "results"\nconcurrency = 3\nepochs = 3\ntask_ids = ["make-dirs"]\n'
    )
    done = crabray("run", "--config", str(path), "--epochs", "2", "-a", "oracle")
    assert done.returncode == 0, done.stderr
    out = tmp_path / "results"  # relative to the file, not to the working directory
    (run_id,) = list_runs(out)
    options = read_manifest(out, run_id).options
    assert (options["concurrency"], options["epochs"], options["task_ids"]) == (3, 2, ["make-dirs"])
    episodes = read_episodes(out)
    assert sorted(zip(episodes.agent, episodes.epoch, strict=True)) == [
        ("oracle", 0),
        ("oracle", 1),
    ]
    assert episodes.success.all()
