"""``run_episode`` against the real local backend: outcomes, errors, limits and records."""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from crabray import BenchmarkConfig, EnvironmentConfig, Task, action, evaluator
from crabray.actions import (
    FILE_ACTIONS,
    SHELL_ACTIONS,
    file_contains,
    path_exists,
    run_command,
    submit,
    write_file,
)
from crabray.agents import (
    ActionCall,
    Agent,
    AgentSpec,
    AgentStep,
    NoopAgent,
    OracleAgent,
    StepInput,
    TaskBrief,
)
from crabray.backends import Backend, create_backend
from crabray.core.errors import AgentError
from crabray.core.result import CheckpointScore, EpisodeRecord, Score, TerminationReason
from crabray.episode import EpisodeLimits, EpisodeSettings, run_episode

Reason = TerminationReason
Move = list[ActionCall] | Exception


class ScriptAgent(Agent):
    """Plays a fixed list of moves, then calls ``complete``; a move that is an exception raises."""

    kind = "script"

    def __init__(self, moves: list[Move], *, fail_reset: Exception | None = None) -> None:
        super().__init__(AgentSpec(name="script", kind="script"))
        self.moves = list(moves)
        self.fail_reset = fail_reset
        self.briefs: list[TaskBrief] = []
        self.inputs: list[StepInput] = []

    def reset(self, brief: TaskBrief) -> None:
        self.briefs.append(brief)
        if self.fail_reset is not None:
            raise self.fail_reset

    def step(self, observed: StepInput) -> AgentStep:
        self.inputs.append(observed)
        if not self.moves:
            return AgentStep(calls=[ActionCall(name="complete")], message="done")
        move = self.moves.pop(0)
        if isinstance(move, Exception):
            raise move
        return AgentStep(calls=move, message=f"move {observed.step}")


def call(name: str, **arguments: Any) -> list[ActionCall]:
    return [ActionCall(name=name, arguments=arguments)]


def forever(name: str, **arguments: Any) -> list[Move]:
    return [call(name, **arguments) for _ in range(100)]


@action
def nap(seconds: float, env: Any) -> str:
    """Sleep a while.

    Args:
        seconds: How long.
    """
    time.sleep(seconds)
    return "rested"


@evaluator
def explodes(env: Any) -> bool:
    """Always raises."""
    raise RuntimeError("checker cannot read /proc/mystery")


@action
def broken_setup(env: Any) -> None:
    """Fails."""
    raise OSError("setup disk full")


Runner = Callable[..., EpisodeRecord]


@pytest.fixture
def sandbox_root(tmp_path: Path) -> Path:
    return tmp_path / "sandboxes"


@pytest.fixture
def make_env(sandbox_root: Path) -> Callable[..., EnvironmentConfig]:
    def make(
        name: str = "box", actions: list[Any] | None = None, **fields: Any
    ) -> EnvironmentConfig:
        return EnvironmentConfig(
            name=name,
            action_space=[*SHELL_ACTIONS, *FILE_ACTIONS, nap] if actions is None else actions,
            backend="local",
            backend_settings={"root_dir": str(sandbox_root)},
            **fields,
        )

    return make


@pytest.fixture
def started() -> Iterator[dict[str, Backend]]:
    """Backends started by ``run``, by environment name; closed after the test."""
    backends: dict[str, Backend] = {}
    yield backends
    for backend in backends.values():
        backend.close()


@pytest.fixture
def run(started: dict[str, Backend]) -> Runner:
    """Start a local sandbox per task environment and run one episode in them."""

    def go(
        bench: BenchmarkConfig,
        agent: Agent,
        task_id: str | None = None,
        **settings: Any,
    ) -> EpisodeRecord:
        task = bench.task(task_id) if task_id else bench.tasks[0]
        backends = {}
        for env in bench.task_environments(task):
            backend = create_backend(env)
            backend.start()
            started[env.name] = backend
            backends[env.name] = backend
        return run_episode(
            bench,
            task,
            agent,
            backends,
            EpisodeSettings(run_id="run-1", suite="tests", agent=agent.spec.name, **settings),
        )

    return go


@pytest.fixture
def hello(make_env: Callable[..., EnvironmentConfig]) -> BenchmarkConfig:
    task = Task(
        id="hello",
        description="Write hello.txt containing hi.",
        evaluator=file_contains(path="hello.txt", text="hi"),
        solution=[write_file(path="hello.txt", content="hi\n")],
        tags=["files"],
    )
    return BenchmarkConfig(name="bench", tasks=[task], environments=[make_env()])


def bench_of(env: EnvironmentConfig, **task_fields: Any) -> BenchmarkConfig:
    task_fields.setdefault("evaluator", file_contains(path="hello.txt", text="hi"))
    task = Task(id="t", description="do it", **task_fields)
    return BenchmarkConfig(name="bench", tasks=[task], environments=[env])


# -- outcomes -------------------------------------------------------------------------------


def test_oracle_succeeds(run: Runner, hello: BenchmarkConfig, started: dict[str, Backend]) -> None:
    record = run(hello, OracleAgent(AgentSpec(name="oracle", kind="oracle")))
    result = record.result
    assert result.termination_reason is Reason.SUCCESS
    assert result.success is True
    assert result.score == 1.0
    assert result.completeness == 1.0
    assert result.steps == 1
    assert result.action_errors == 0
    assert result.error is None
    assert started["box"].get_file("hello.txt") == b"hi\n"


def test_noop_completes_without_success(run: Runner, hello: BenchmarkConfig) -> None:
    record = run(hello, NoopAgent(AgentSpec(name="noop", kind="noop")))
    result = record.result
    assert result.termination_reason is Reason.AGENT_COMPLETE
    assert result.success is False
    assert result.score == 0.0
    assert result.completeness == 0.0
    assert result.steps == 1
    assert [s.action for s in record.steps] == ["complete"]


def test_agent_fail_ends_the_episode(run: Runner, hello: BenchmarkConfig) -> None:
    record = run(hello, ScriptAgent([call("fail", reason="impossible")]))
    assert record.result.termination_reason is Reason.AGENT_FAIL
    assert record.result.success is False


def test_oracle_without_solution_is_the_benchmarks_fault_and_never_a_pass(
    run: Runner, make_env: Callable[..., EnvironmentConfig]
) -> None:
    bench = bench_of(make_env())
    record = run(bench, OracleAgent(AgentSpec(name="oracle", kind="oracle")))
    assert record.result.termination_reason is Reason.AGENT_ERROR
    assert "has no reference solution" in (record.result.error or "")
    assert record.result.error_type == "NoSolutionError"
    assert record.result.attribution.value == "benchmark"
    assert not record.result.success and record.result.score == 0.0


# -- bad calls ------------------------------------------------------------------------------


def test_bad_parameters_are_recorded_and_the_episode_goes_on(
    run: Runner, hello: BenchmarkConfig
) -> None:
    agent = ScriptAgent(
        [
            call("write_file", path="hello.txt"),  # content missing
            call("write_file", path="hello.txt", content="hi", mode="w"),  # unknown param
            call("write_file", path="hello.txt", content="hi"),
        ]
    )
    record = run(hello, agent)
    result = record.result
    assert result.termination_reason is Reason.SUCCESS
    assert result.success is True
    assert result.action_errors == 2
    assert result.steps == 3
    first, second, third = record.steps
    assert first.error is not None
    assert "ActionParameterError" in first.error
    assert "action 'write_file'" in first.error
    assert "parameter 'content'" in first.error
    assert "parameter 'mode'" in (second.error or "")
    assert third.error is None
    # the agent sees the error of its previous call
    assert agent.inputs[1].results[0].error == first.error
    assert agent.inputs[2].results[0].error == second.error


def test_unknown_action_is_recorded_as_an_error(run: Runner, hello: BenchmarkConfig) -> None:
    record = run(hello, ScriptAgent([call("teleport", to="mars")]))
    bad = record.steps[0]
    assert bad.action == "teleport"
    assert bad.env == "?"
    assert bad.error is not None
    assert "no action 'teleport'" in bad.error
    assert "write_file" in bad.error  # lists what is available
    assert record.result.action_errors == 1
    assert record.result.termination_reason is Reason.AGENT_COMPLETE


def test_consecutive_action_errors_end_the_episode(run: Runner, hello: BenchmarkConfig) -> None:
    record = run(hello, ScriptAgent(forever("teleport")), max_consecutive_action_errors=3)
    result = record.result
    assert result.termination_reason is Reason.ACTION_ERROR
    assert result.steps == 3
    assert result.action_errors == 3
    assert "3 failed action calls in a row" in (result.error or "")


def test_a_good_call_resets_the_consecutive_error_count(
    run: Runner, hello: BenchmarkConfig
) -> None:
    moves: list[Move] = [
        call("teleport"),
        call("teleport"),
        call("list_files"),
        call("teleport"),
        call("teleport"),
    ]
    record = run(hello, ScriptAgent(moves), max_consecutive_action_errors=3)
    assert record.result.termination_reason is Reason.AGENT_COMPLETE
    assert record.result.action_errors == 4


# -- errors of the task or the agent --------------------------------------------------------


def test_evaluator_raising_is_an_evaluator_error(
    run: Runner, make_env: Callable[..., EnvironmentConfig]
) -> None:
    bench = bench_of(make_env(), evaluator=explodes)
    record = run(bench, ScriptAgent([call("list_files")]))
    result = record.result
    assert result.termination_reason is Reason.EVALUATOR_ERROR
    assert result.success is False
    assert result.error_type == "EvaluatorError"
    assert "evaluator 'explodes' raised RuntimeError: checker cannot read /proc/mystery" in (
        result.error or ""
    )
    # the call that triggered the evaluation is still on record
    assert result.steps == 1
    assert [s.action for s in record.steps] == ["list_files"]
    assert result.attribution.value == "agent", "the agent acted: the state may be its doing"


@evaluator
def answer_is_42() -> bool:
    """Plain Python in the sandbox: answer.txt holds 42 (raises when it cannot be read)."""
    with open("answer.txt") as handle:
        return handle.read().strip() == "42"


def test_an_evaluator_crash_the_agent_provokes_is_counted_against_it(
    run: Runner, make_env: Callable[..., EnvironmentConfig]
) -> None:
    """An agent that cannot solve the task must not leave the denominator by making its
    evaluator raise (answer.txt made a directory): the error is recorded, the score is 0,
    and the episode is the agent's."""
    bench = bench_of(make_env(), evaluator=answer_is_42())
    record = run(bench, ScriptAgent([call("run_command", command="mkdir answer.txt")]))
    result = record.result
    assert result.termination_reason is Reason.EVALUATOR_ERROR
    assert "IsADirectoryError" in (result.error or "")
    assert (result.error_type, result.attribution.value) == ("EvaluatorError", "agent")
    assert (result.score, result.success) == (0.0, False)


def test_an_evaluator_crash_before_the_agent_acts_is_the_benchmarks(
    run: Runner, make_env: Callable[..., EnvironmentConfig]
) -> None:
    """On the state setup left, with no action of the agent's, the evaluator is at fault."""
    bench = bench_of(make_env(), evaluator=answer_is_42())
    record = run(bench, ScriptAgent([]))
    result = record.result
    assert result.termination_reason is Reason.EVALUATOR_ERROR
    assert (result.error_type, result.attribution.value) == ("EvaluatorFaultError", "benchmark")
    assert "the agent had not acted" in (result.error or "")


def test_setup_failure_is_a_setup_error(
    run: Runner, make_env: Callable[..., EnvironmentConfig]
) -> None:
    bench = bench_of(make_env(), setup=[broken_setup])
    agent = ScriptAgent([])
    record = run(bench, agent)
    result = record.result
    assert result.termination_reason is Reason.SETUP_ERROR
    assert "setup 'broken_setup' failed" in (result.error or "")
    assert "setup disk full" in (result.error or "")
    assert result.steps == 0
    assert record.steps == []
    assert agent.briefs == []  # the agent never started
    assert result.setup_output.endswith("[box] broken_setup\nfailed: OSError: setup disk full")


def test_setup_output_records_each_setup_action_and_what_it_returned(
    run: Runner, make_env: Callable[..., EnvironmentConfig]
) -> None:
    prepare = run_command(command="echo prepared; echo warned >&2")
    bench = bench_of(make_env(), setup=[prepare, write_file(path="x.txt", content="x")])
    record = run(bench, ScriptAgent([call("write_file", path="hello.txt", content="hi")]))
    assert record.result.termination_reason is Reason.SUCCESS
    first, second = record.result.setup_output.split("\n\n[box] ")
    assert first.startswith(f"[box] {prepare.label}\nexit code 0\n")
    assert "stdout:\nprepared" in first and "stderr:\nwarned" in first
    assert second == "write_file(path='x.txt', content='x')\nwrote 1 characters to x.txt"


def test_agent_raising_is_an_agent_error(run: Runner, hello: BenchmarkConfig) -> None:
    record = run(hello, ScriptAgent([call("list_files"), AgentError("model refused")]))
    result = record.result
    assert result.termination_reason is Reason.AGENT_ERROR
    assert result.error == "model refused"
    assert result.error_type == "AgentError"
    assert result.steps == 1


def test_agent_raising_an_ordinary_exception_is_an_agent_error(
    run: Runner, hello: BenchmarkConfig
) -> None:
    record = run(hello, ScriptAgent([KeyError("choices")]))
    assert record.result.termination_reason is Reason.AGENT_ERROR
    assert record.result.error_type == "KeyError"
    assert "choices" in (record.result.error or "")


def test_agent_failing_at_reset_is_an_agent_error(run: Runner, hello: BenchmarkConfig) -> None:
    record = run(hello, ScriptAgent([], fail_reset=AgentError("no api key")))
    assert record.result.termination_reason is Reason.AGENT_ERROR
    assert record.result.error == "no api key"
    assert record.result.steps == 0


# -- limits ---------------------------------------------------------------------------------


def test_max_steps(run: Runner, hello: BenchmarkConfig) -> None:
    record = run(hello, ScriptAgent(forever("list_files")), limits=EpisodeLimits(max_steps=4))
    assert record.result.termination_reason is Reason.MAX_STEPS
    assert record.result.steps == 4
    assert len(record.steps) == 4


def test_task_max_steps_is_used(run: Runner, make_env: Callable[..., EnvironmentConfig]) -> None:
    bench = bench_of(make_env(), max_steps=2)
    agent = ScriptAgent(forever("list_files"))
    record = run(bench, agent)
    assert record.result.termination_reason is Reason.MAX_STEPS
    assert record.result.steps == 2
    assert agent.briefs[0].max_steps == 2


def test_time_limit_is_a_timeout(run: Runner, make_env: Callable[..., EnvironmentConfig]) -> None:
    bench = bench_of(make_env(), time_limit_sec=0.3)
    record = run(bench, ScriptAgent(forever("nap", seconds=0.2)))
    result = record.result
    assert result.termination_reason is Reason.TIMEOUT
    assert 1 <= result.steps <= 3
    assert "time limit of 0.3 s reached" in (result.error or "")
    assert result.wall_time_sec >= 0.3


# -- submissions ----------------------------------------------------------------------------


def test_require_submit_evaluator_waits_for_the_submission(
    run: Runner, make_env: Callable[..., EnvironmentConfig]
) -> None:
    seen: list[Any] = []

    @evaluator(require_submit=True, local=True)
    def answer_is_42(submission: Any) -> bool:
        seen.append(submission)
        return submission == "42"

    bench = bench_of(make_env(), evaluator=answer_is_42)
    agent = ScriptAgent([call("list_files"), call("list_files"), call("submit", content="42")])
    record = run(bench, agent)
    assert record.result.termination_reason is Reason.SUCCESS
    assert seen == ["42"]  # never run before the submit
    assert [s.completeness for s in record.steps] == [0.0, 0.0, 1.0]
    assert "submit" in {tool["function"]["name"] for tool in agent.briefs[0].tools}


def test_wrong_submission_fails(run: Runner, make_env: Callable[..., EnvironmentConfig]) -> None:
    @evaluator(require_submit=True, local=True)
    def answer_is_42(submission: Any) -> bool:
        return submission == "42"

    bench = bench_of(make_env(), evaluator=answer_is_42, extra_actions=[submit])
    record = run(bench, ScriptAgent([call("submit", content="41")]))
    assert record.result.termination_reason is Reason.AGENT_COMPLETE
    assert record.result.success is False


def test_submit_is_offered_only_when_needed(run: Runner, hello: BenchmarkConfig) -> None:
    agent = ScriptAgent([])
    run(hello, agent)
    names = {tool["function"]["name"] for tool in agent.briefs[0].tools}
    assert names == {
        "run_command",
        "read_file",
        "write_file",
        "list_files",
        "file_exists",
        "nap",
        "complete",
        "fail",
    }


# -- several environments -------------------------------------------------------------------


def test_two_environment_task_uses_qualified_names(
    run: Runner, make_env: Callable[..., EnvironmentConfig], started: dict[str, Backend]
) -> None:
    task = Task(
        id="deploy",
        description="Write a.txt on alpha and b.txt on beta.",
        environments=["alpha", "beta"],
        evaluator=[
            path_exists(path="a.txt").on("alpha"),
            path_exists(path="b.txt").on("beta"),
        ],
        solution=[
            write_file(path="a.txt", content="A").on("alpha"),
            run_command(command="echo B > b.txt").on("beta"),
        ],
    )
    bench = BenchmarkConfig(
        name="bench", tasks=[task], environments=[make_env("alpha"), make_env("beta")]
    )
    agent = ScriptAgent(
        [
            call("write_file", path="a.txt", content="A"),  # unqualified: unknown here
            call("alpha-write_file", path="a.txt", content="A"),
            call("beta-run_command", command="echo B > b.txt"),
        ]
    )
    record = run(bench, agent)
    assert record.result.termination_reason is Reason.SUCCESS
    assert record.result.action_errors == 1
    assert [(s.action, s.env) for s in record.steps] == [
        ("write_file", "?"),
        ("alpha-write_file", "alpha"),
        ("beta-run_command", "beta"),
    ]
    assert [s.graph_passed_nodes for s in record.steps] == [0, 1, 2]
    assert started["alpha"].get_file("a.txt") == b"A"
    assert started["beta"].get_file("b.txt") == b"B\n"
    names = {tool["function"]["name"] for tool in agent.briefs[0].tools}
    assert {"alpha-write_file", "beta-run_command", "complete", "fail"} <= names
    assert "write_file" not in names
    assert set(agent.briefs[0].environments) == {"alpha", "beta"}


def test_oracle_replays_multi_env_solution_by_qualified_name(
    run: Runner, make_env: Callable[..., EnvironmentConfig]
) -> None:
    task = Task(
        id="deploy",
        description="Write a.txt on beta.",
        environments=["alpha", "beta"],
        evaluator=path_exists(path="a.txt").on("beta"),
        solution=[write_file(path="a.txt", content="A").on("beta")],
    )
    bench = BenchmarkConfig(
        name="bench", tasks=[task], environments=[make_env("alpha"), make_env("beta")]
    )
    record = run(bench, OracleAgent(AgentSpec(name="oracle", kind="oracle")))
    assert record.result.termination_reason is Reason.SUCCESS
    assert record.steps[0].action == "beta-write_file"
    assert json.loads(record.steps[0].arguments_json) == {"content": "A", "path": "a.txt"}


# -- records --------------------------------------------------------------------------------


def test_step_records_and_result_fields(
    run: Runner, make_env: Callable[..., EnvironmentConfig]
) -> None:
    chain = [path_exists(path="one"), path_exists(path="two")]
    bench = bench_of(make_env(), evaluator=chain, tags=["t1", "t2"])
    agent = ScriptAgent(
        [
            call("run_command", command="touch one"),
            call("list_files"),
            call("run_command", command="touch two"),
        ]
    )
    before = time.time()
    record = run(bench, agent, node="node-7", epoch=2, attempt=1)
    result = record.result

    assert result.termination_reason is Reason.SUCCESS
    assert (result.run_id, result.suite, result.task_id, result.agent) == (
        "run-1",
        "tests",
        "t",
        "script",
    )
    assert (result.epoch, result.attempt, result.node) == (2, 1, "node-7")
    assert result.tags == ["t1", "t2"]
    assert result.steps == 3
    assert result.completeness == 1.0
    assert result.setup_time_sec > 0
    assert result.wall_time_sec >= result.setup_time_sec
    assert before <= result.started_at.timestamp() <= result.finished_at.timestamp()
    assert result.finished_at.timestamp() <= time.time()
    assert result.started_at.tzinfo is not None

    assert [s.step for s in record.steps] == [0, 1, 2]
    assert [s.call_index for s in record.steps] == [0, 0, 0]
    assert [s.action for s in record.steps] == ["run_command", "list_files", "run_command"]
    assert [json.loads(s.arguments_json) for s in record.steps] == [
        {"command": "touch one"},
        {},
        {"command": "touch two"},
    ]
    assert record.steps[0].result == "exit code 0"
    assert "one" in json.loads(record.steps[1].result)
    assert [s.graph_passed_nodes for s in record.steps] == [1, 1, 2]
    assert [s.graph_total_nodes for s in record.steps] == [2, 2, 2]
    assert [s.completeness for s in record.steps] == [0.5, 0.5, 1.0]
    assert [s.agent_message for s in record.steps] == ["move 0", "move 1", "move 2"]
    for step in record.steps:
        assert step.episode_id == result.episode_id
        assert (step.run_id, step.task_id, step.agent) == ("run-1", "t", "script")
        assert (step.epoch, step.attempt) == (2, 1)
        assert step.env == "box"
        assert step.error is None
        assert step.duration_sec >= 0


def test_node_defaults_to_host_name(run: Runner, hello: BenchmarkConfig) -> None:
    record = run(hello, ScriptAgent([]))
    assert record.result.node == socket.gethostname()


def test_several_calls_in_one_step(run: Runner, hello: BenchmarkConfig) -> None:
    move = [
        ActionCall(name="list_files", call_id="c1"),
        ActionCall(
            name="write_file", arguments={"path": "hello.txt", "content": "hi"}, call_id="c2"
        ),
    ]
    record = run(hello, ScriptAgent([move]))
    assert record.result.termination_reason is Reason.SUCCESS
    assert record.result.steps == 1
    assert [(s.step, s.call_index) for s in record.steps] == [(0, 0), (0, 1)]
    assert record.steps[1].agent_message is None


def test_observations_reach_the_agent(
    run: Runner, make_env: Callable[..., EnvironmentConfig]
) -> None:
    from crabray.actions import list_files

    env = make_env(observation_space=[list_files])
    bench = bench_of(env)
    agent = ScriptAgent([call("run_command", command="touch seen.txt")])
    run(bench, agent)
    assert "seen.txt" not in json.loads(agent.inputs[0].observations[0].content)
    assert agent.inputs[1].observations[0].name == "list_files"
    assert agent.inputs[1].observations[0].env == "box"
    assert "seen.txt" in json.loads(agent.inputs[1].observations[0].content)
    assert agent.inputs[1].results[0].output == "exit code 0"


# -- teardown -------------------------------------------------------------------------------


def test_teardown_runs_after_success(
    run: Runner, make_env: Callable[..., EnvironmentConfig], started: dict[str, Backend]
) -> None:
    bench = bench_of(make_env(), teardown=[write_file(path="torn.txt", content="x")])
    record = run(bench, ScriptAgent([call("write_file", path="hello.txt", content="hi")]))
    assert record.result.termination_reason is Reason.SUCCESS
    assert started["box"].get_file("torn.txt") == b"x"


def test_teardown_runs_after_setup_failure(
    run: Runner, make_env: Callable[..., EnvironmentConfig], started: dict[str, Backend]
) -> None:
    bench = bench_of(
        make_env(), setup=[broken_setup], teardown=[write_file(path="torn.txt", content="x")]
    )
    record = run(bench, ScriptAgent([]))
    assert record.result.termination_reason is Reason.SETUP_ERROR
    assert started["box"].get_file("torn.txt") == b"x"


def test_teardown_runs_after_agent_error(
    run: Runner, make_env: Callable[..., EnvironmentConfig], started: dict[str, Backend]
) -> None:
    bench = bench_of(make_env(), teardown=[write_file(path="torn.txt", content="x")])
    record = run(bench, ScriptAgent([RuntimeError("agent crashed")]))
    assert record.result.termination_reason is Reason.AGENT_ERROR
    assert started["box"].get_file("torn.txt") == b"x"


def test_failing_teardown_is_noted_without_changing_the_outcome(
    run: Runner, make_env: Callable[..., EnvironmentConfig]
) -> None:
    bench = bench_of(make_env(), teardown=[broken_setup])
    record = run(bench, ScriptAgent([call("write_file", path="hello.txt", content="hi")]))
    assert record.result.termination_reason is Reason.SUCCESS
    assert record.result.success is True
    assert "teardown 'broken_setup' failed" in (record.result.error or "")


# -- scorers ----------------------------------------------------------------------------------


@action
def grade_by_process(env: Any, trajectory: str) -> Score:
    """Two checkpoints: hello.txt exists, and the agent ran `echo` along the way."""
    steps = json.loads(trajectory)
    ran_echo = any("echo" in json.dumps(step["arguments"]) for step in steps)
    wrote = env.backend.exec("test -f hello.txt").exit_code == 0
    checkpoints = [
        CheckpointScore(total=1, result=int(wrote)),
        CheckpointScore(total=1, result=int(ran_echo)),
    ]
    earned = sum(c.result for c in checkpoints)
    return Score(value=earned / 2, checkpoints=checkpoints)


def test_a_scorer_reads_the_trajectory_and_records_its_checkpoints(
    make_env: Callable[..., EnvironmentConfig], run: Runner
):
    bench = bench_of(make_env(), scorer=grade_by_process)
    agent = ScriptAgent([call("run_command", command="echo hi > hello.txt")])

    record = run(bench, agent)

    assert record.result.score == 1.0 and record.result.success
    assert record.result.checkpoints == [CheckpointScore(total=1, result=1)] * 2


def test_partial_checkpoints_give_a_partial_score(
    make_env: Callable[..., EnvironmentConfig], run: Runner
):
    bench = bench_of(make_env(), scorer=grade_by_process)
    agent = ScriptAgent([call("write_file", path="hello.txt", content="hi")])

    record = run(bench, agent)

    assert record.result.score == 0.5 and not record.result.success
    assert [c.result for c in record.result.checkpoints] == [1, 0]
