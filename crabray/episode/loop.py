"""One episode, in-process: setup, then observe -> agent -> actions -> evaluate, then a result.

This is what the cluster distributes: it knows nothing of Ray. Its sandboxes
arrive as started, clean ``Backend`` objects (local ones, or proxies to Ray
actors). No ordinary error escapes: each ends the episode with a termination
reason and the error on the result, and the result is always produced.
"""

from __future__ import annotations

import json
import logging
import shutil
import socket
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path, PurePosixPath
from typing import Any

from pydantic import BaseModel, Field

from crabray.actions.root import root_actions
from crabray.agents.base import (
    ActionCall,
    Agent,
    AgentStep,
    CallResult,
    Observation,
    StepInput,
    TaskBrief,
)
from crabray.backends.base import Backend
from crabray.backends.episode_env import EpisodeEnv
from crabray.core import (
    ROOT_ENV,
    Action,
    BenchmarkConfig,
    BoundAction,
    EnvironmentConfig,
    Evaluator,
    Task,
)
from crabray.core.env import AgentSignals
from crabray.core.errors import (
    ActionError,
    AgentError,
    ConfigError,
    CrabrayError,
    EvaluatorError,
    EvaluatorFaultError,
    SandboxBrokenError,
    SandboxError,
    SandboxFileError,
)
from crabray.core.evaluators import scorer_error
from crabray.core.graph import GraphProgress
from crabray.core.result import (
    ARTIFACTS_DIR,
    Attribution,
    EpisodeFiles,
    EpisodeRecord,
    EpisodeResult,
    GraphStats,
    Score,
    StepRecord,
    TerminationReason,
    conversation_json,
    sandbox_failure_reason,
    utcnow,
)
from crabray.core.words import counted
from crabray.episode.freeze import AgentFreeze
from crabray.episode.limits import EpisodeLimits
from crabray.formats.validate import solution_bindings

logger = logging.getLogger(__name__)

_RESULT_CHARS = 2_000
DEFAULT_MAX_CONSECUTIVE_ACTION_ERRORS = 10

STUCK_GRACE_SEC = 5.0
"""Past its time limit, how long a step may still run before the episode is recorded as it
stands (its sandbox then counts as broken: the step may still be running in it)."""

STOP_GRACE_SEC = 3.0
"""After a stop is asked (the run is interrupted), how long the step running may take to end
before the episode is recorded as it stands."""

_WATCH_SEC = 0.2
"""How often a watched episode looks at its deadline and at the run's stop request."""


class EpisodeSettings(BaseModel):
    """Who runs the episode and under which limits: what the driver sends with a task."""

    run_id: str
    suite: str
    agent: str
    model: str | None = None
    epoch: int = 0
    attempt: int = 0
    node: str | None = Field(default=None, description="Where it runs; the host name if unset.")
    limits: EpisodeLimits = Field(
        default_factory=EpisodeLimits, description="Budgets over the task's own."
    )
    max_consecutive_action_errors: int = DEFAULT_MAX_CONSECUTIVE_ACTION_ERRORS
    max_tokens: int | None = Field(
        default=None, gt=0, description="Ends the episode (token_limit) past this many tokens."
    )
    max_cost_usd: float | None = Field(
        default=None, gt=0, description="Ends the episode (cost_limit) past this model cost."
    )


def _sandbox_end(error: SandboxError, context: str | None = None) -> _End:
    """The end of an episode whose sandbox failed: the agent's, the benchmark's or the
    infrastructure's, as :func:`sandbox_failure_reason` decides (the one rule)."""
    return _End(sandbox_failure_reason(error), error, context)


class _End(Exception):
    """Ends the episode loop with a termination reason (control flow, never escapes)."""

    def __init__(
        self,
        reason: TerminationReason,
        error: BaseException | None = None,
        context: str | None = None,
    ) -> None:
        super().__init__(reason.value)
        self.reason = reason
        self.error = error
        self.context = context


def solution_calls(
    benchmark: BenchmarkConfig, task: Task, space: list[BoundAction]
) -> list[ActionCall]:
    """The task's reference solution as the calls an agent would make.

    Raises:
        ConfigError: A solution step is not in the agent's action space.
    """
    bindings = solution_bindings(benchmark, task, space)
    return [
        ActionCall(name=bound.call_name, arguments=dict(step.bound))
        for step, bound in zip(task.solution, bindings, strict=True)
    ]


def run_episode(
    benchmark: BenchmarkConfig,
    task: Task,
    agent: Agent,
    backends: dict[str, Backend],
    settings: EpisodeSettings,
) -> EpisodeRecord:
    """Run ``agent`` on ``task`` in the given sandboxes and return what happened.

    Args:
        benchmark: The benchmark the task belongs to.
        task: The task.
        agent: A fresh or reusable agent; ``reset`` is called here.
        backends: A started, clean sandbox for each of the task's environments.
        settings: Identifiers and limits.
    """
    return _Episode(benchmark, task, agent, backends, settings).run()


class WatchedRecord(BaseModel):
    """The record of a watched episode, and whether a step of it was still running."""

    record: EpisodeRecord
    stuck: bool = Field(
        description="A step was still running when the record was taken: the sandboxes "
        "may still be in use by it and must not be reused."
    )


def watch_episode(
    benchmark: BenchmarkConfig,
    task: Task,
    agent: Agent,
    backends: dict[str, Backend],
    settings: EpisodeSettings,
    stop_requested: Callable[[], bool],
) -> WatchedRecord:
    """``run_episode`` under a watch: its own time limit and the run's stop request.

    The episode checks its time limit and the stop request between steps and
    ends itself (``timeout``, ``cancelled``) with every step so far. A step
    that blocks (a command that never returns, a model that never answers)
    cannot be interrupted from here: ``STUCK_GRACE_SEC`` past the time limit,
    or ``STOP_GRACE_SEC`` after a stop, the episode is recorded as it stands
    (steps, conversation, tokens and cost so far; no grading, its sandbox is
    busy) and the step is left to die with its sandbox.

    Args:
        stop_requested: Whether the run asked its episodes to stop; polled every
            ``_WATCH_SEC``.
    """
    episode = _Episode(benchmark, task, agent, backends, settings)
    records: list[EpisodeRecord] = []
    thread = threading.Thread(
        target=lambda: records.append(episode.run()),
        name=f"episode-{task.id}",
        daemon=True,  # a stuck step must not keep the worker from exiting
    )
    thread.start()
    stop_by: float | None = None
    try:
        while thread.is_alive():
            thread.join(_WATCH_SEC)
            now = time.monotonic()
            if stop_by is None and stop_requested():
                episode.stop.set()
                stop_by = now + STOP_GRACE_SEC
            deadline = episode.deadline()  # moves on while the agent waits for its model
            if thread.is_alive() and deadline is not None and now >= deadline + STUCK_GRACE_SEC:
                message = f"a step was still running {STUCK_GRACE_SEC:g} s past its time limit"
                record = episode.as_it_stands(TerminationReason.TIMEOUT, TimeoutError(message))
                return WatchedRecord(record=record, stuck=True)
            if thread.is_alive() and stop_by is not None and now >= stop_by:
                record = episode.as_it_stands(TerminationReason.CANCELLED, _stopped(episode))
                return WatchedRecord(record=record, stuck=True)
    except KeyboardInterrupt:  # the worker itself was interrupted (SIGINT to its group)
        episode.stop.set()
        thread.join(STOP_GRACE_SEC)
        if thread.is_alive():
            record = episode.as_it_stands(TerminationReason.CANCELLED, _stopped(episode))
            return WatchedRecord(record=record, stuck=True)
    return WatchedRecord(record=records[0], stuck=False)


class EpisodeCancelled(CrabrayError):
    """The run was interrupted while the episode ran (a resumed run runs it again)."""


def _stopped(episode: _Episode) -> EpisodeCancelled:
    return EpisodeCancelled(
        f"the run was interrupted during step {max(episode.result.steps, 1)}; "
        "a resumed run runs this episode again"
    )


class _Episode:
    def __init__(
        self,
        benchmark: BenchmarkConfig,
        task: Task,
        agent: Agent,
        backends: dict[str, Backend],
        settings: EpisodeSettings,
    ) -> None:
        self.benchmark, self.task, self.agent, self.settings = benchmark, task, agent, settings
        self.signals = AgentSignals()
        self.envs = {name: EpisodeEnv(name, b, self.signals) for name, b in backends.items()}
        self.envs[ROOT_ENV] = EpisodeEnv(ROOT_ENV, None, self.signals)
        for config in benchmark.task_environments(task):
            for key, value in config.extra_attributes.items():
                setattr(self.envs[config.name], key, value)
        self.result = EpisodeResult(
            run_id=settings.run_id,
            suite=settings.suite,
            task_id=task.id,
            tags=list(task.tags),
            agent=settings.agent,
            model=settings.model,
            epoch=settings.epoch,
            attempt=settings.attempt,
            termination_reason=TerminationReason.ENV_ERROR,
            node=settings.node or socket.gethostname(),
        )
        self.result.description = task.description
        self.result.graph_json = _graph_json(task)
        self.node_index = {node: i for i, node in enumerate(task.evaluator.nodes)}
        self.observed: list[Observation] = []
        self.artifacts: dict[str, bytes] = {}
        self.artifact_of: dict[str, str] = {}
        self.scratch: Path | None = None
        self.steps: list[StepRecord] = []
        self.progress: GraphProgress = task.evaluator.start()
        self.stats: GraphStats = self.progress.stats()
        self.actions_taken = 0
        self.acted_in_sandbox = False
        self.consecutive_errors = 0
        self.time_limit = settings.limits.time_limit_for(benchmark, task)
        self.max_steps = settings.limits.steps_for(benchmark, task)
        self.t0 = time.monotonic()
        self.score: float | None = None
        self.stop = threading.Event()
        """Set when the run is interrupted: the episode ends after its current step."""
        self.calling: tuple[int, int, ActionCall, AgentStep, str, float] | None = None
        """The call running or last run: recorded unfinished if the episode is stopped in it."""
        self.grader_was_replaced = False
        """Set when the agent replaced a sandbox's grader: the episode is then no pass."""
        self.freeze = AgentFreeze(self._sandbox_envs())
        self.agent_began = False
        """Set once every sandbox was told the agent begins: from then on, graders run with
        the agent's processes frozen."""

    def run(self) -> EpisodeRecord:
        try:
            self._setup()
            self._loop()
        except _End as end:
            self._end(end.reason, end.error, end.context)
        except Exception as exc:
            logger.exception("episode %s/%s failed unexpectedly", self.task.id, self.settings.agent)
            self._end(TerminationReason.ENV_ERROR, exc)
        finally:
            if self.result.attribution is Attribution.AGENT:  # nothing to grade otherwise
                self._end_turn()
                self._score()
            self._record_grader_trust()
            self._teardown()
            self._finish()
            self._remove_scratch()
        return EpisodeRecord(result=self.result, steps=self.steps, artifacts=self.artifacts)

    def _setup(self) -> None:
        t_setup = time.monotonic()
        envs = self.benchmark.task_environments(self.task)
        steps = [(a, self.benchmark.reset_env(a, env)) for env in envs for a in env.reset]
        steps += [
            (a, self.benchmark.resolve_env(a, self.task))
            for a in [*self.benchmark.common_setup, *self.task.setup]
        ]
        for act, env_name in steps:
            try:
                returned = act.run(self.envs[env_name])
            except SandboxError as exc:
                self._note_setup(env_name, act.label, f"failed: {exc}")
                raise _sandbox_end(exc, f"setup '{act.name}' failed") from exc
            except Exception as exc:
                self._note_setup(env_name, act.label, f"failed: {type(exc).__name__}: {exc}")
                raise _End(
                    TerminationReason.SETUP_ERROR, exc, f"setup '{act.name}' failed"
                ) from exc
            self._note_setup(env_name, act.label, "" if returned is None else _short(returned))
        try:
            brief = self._brief(envs)
        except (ConfigError, ValueError) as exc:
            raise _End(TerminationReason.SETUP_ERROR, exc, "invalid task") from exc
        for env in self._sandbox_envs():
            try:
                env.backend.agent_begins()
            except SandboxError as exc:
                raise _End(TerminationReason.ENV_ERROR, exc) from exc
        self.agent_began = True
        try:
            self.agent.reset(brief)
        except Exception as exc:
            raise _End(TerminationReason.AGENT_ERROR, exc) from exc
        self.result.setup_time_sec = time.monotonic() - t_setup

    def _note_setup(self, env_name: str, label: str, outcome: str) -> None:
        """Add a setup action and what it gave to the row's ``setup_output`` (the viewer's)."""
        outcome = outcome.rstrip()
        entry = f"[{env_name}] {label}" + (f"\n{outcome}" if outcome else "")
        done = self.result.setup_output
        self.result.setup_output = f"{done}\n\n{entry}" if done else entry

    def _brief(self, envs: list[EnvironmentConfig]) -> TaskBrief:
        """The agent's view of the task; fixes the action space and evaluator environments."""
        self.space = {
            b.call_name: b for b in self.benchmark.action_space(self.task, root_actions(self.task))
        }
        self.evaluator_envs = {n: self._env_for(n) for n in self.task.evaluators}
        self._check_python()
        return TaskBrief(
            task_id=self.task.id,
            description=self.task.description,
            tools=[_tool(b) for b in self.space.values()],
            environments={e.name: e.description for e in envs},
            max_steps=self.max_steps,
            solution=solution_calls(self.benchmark, self.task, list(self.space.values()))
            if self.task.solution
            else None,
        )

    def _check_python(self) -> None:
        """Each sandbox that runs plain-Python actions has python3: a setup error if not.

        Raises:
            ConfigError: Naming the action, the environment and what its image lacks.
        """
        placed = [(b.action, self.envs[b.env]) for b in self.space.values()]
        placed += list(self.evaluator_envs.items())
        checked: set[str] = set()
        for act, env in placed:
            if act.runs_in_sandbox and env.name not in checked:
                env.check_python(act)
                checked.add(env.name)

    def _loop(self) -> None:
        results: list[CallResult] = []
        for step in range(self.max_steps):
            self._check_time()
            if self.stop.is_set():
                raise _End(
                    TerminationReason.CANCELLED,
                    EpisodeCancelled(
                        f"the run was interrupted after {counted(step, 'step')}; "
                        "a resumed run runs this episode again"
                    ),
                )
            observed = StepInput(step=step, observations=self._observe(step), results=results)
            self.observed = observed.observations
            try:
                move: AgentStep = self.agent.step(observed)
            except Exception as exc:
                raise _End(TerminationReason.AGENT_ERROR, exc) from exc
            self._check_budget()
            self.result.steps = step + 1
            results = [self._call(step, index, call, move) for index, call in enumerate(move.calls)]
            if self.stats.success:
                raise _End(TerminationReason.SUCCESS)
            if self.signals.failed:
                raise _End(TerminationReason.AGENT_FAIL)
            if self.signals.completed:
                raise _End(TerminationReason.AGENT_COMPLETE)
            if self.consecutive_errors >= self.settings.max_consecutive_action_errors:
                raise _End(
                    TerminationReason.ACTION_ERROR,
                    AgentError(f"{self.consecutive_errors} failed action calls in a row"),
                )
        raise _End(TerminationReason.MAX_STEPS)

    def _check_budget(self) -> None:
        """End the episode when the agent's model usage passed a per-episode limit."""
        usage, settings = self.agent.usage, self.settings
        tokens = usage.tokens_in + usage.tokens_out
        if settings.max_tokens is not None and tokens > settings.max_tokens:
            raise _End(
                TerminationReason.TOKEN_LIMIT,
                AgentError(f"{tokens} tokens used, limit {settings.max_tokens}"),
            )
        if settings.max_cost_usd is not None and usage.cost_usd > settings.max_cost_usd:
            raise _End(
                TerminationReason.COST_LIMIT,
                AgentError(f"${usage.cost_usd:.4f} spent, limit ${settings.max_cost_usd:.4f}"),
            )

    def _call(self, step: int, index: int, call: ActionCall, move: AgentStep) -> CallResult:
        """Run one of the agent's calls, record it, and step the evaluator graph."""
        started = time.monotonic()
        bound = self.space.get(call.name)
        env_name = bound.env if bound else "?"
        self.calling = (step, index, call, move, env_name, started)
        output, error = "", None
        try:
            if bound is None:
                raise ActionError(
                    f"no action '{call.name}'; available: {', '.join(sorted(self.space))}"
                )
            self.acted_in_sandbox = self.acted_in_sandbox or bound.env != ROOT_ENV
            self.freeze.thaw()  # after a pass, a later call of the same move acts as usual
            returned = bound.action.run(self.envs[bound.env], **call.arguments)
            self.envs[bound.env].trajectory.append(
                (bound.action.name, dict(call.arguments), returned)
            )
            if bound.env == ROOT_ENV and bound.action.name == "complete":
                self.signals.completed = True  # CRAB ends the task on any root `complete`
            output = _short(returned)
            self.consecutive_errors = 0
        except SandboxError as exc:
            raise self._sandbox_end(exc) from exc
        except Exception as exc:
            error = f"{type(exc).__name__}: {exc}"
            self.result.action_errors += 1
            self.consecutive_errors += 1
        self.actions_taken += 1
        try:
            self._evaluate()
        finally:
            # Recorded even when the evaluation ends the episode: the call happened.
            record = self._step_record(step, index, call, move, env_name, output, error, started)
            self.steps.append(record)
        return CallResult(call_id=call.call_id, name=call.name, output=output, error=error)

    def _step_record(
        self,
        step: int,
        index: int,
        call: ActionCall,
        move: AgentStep,
        env_name: str,
        output: str,
        error: str | None,
        started: float,
    ) -> StepRecord:
        return StepRecord(
            episode_id=self.result.episode_id,
            run_id=self.settings.run_id,
            task_id=self.task.id,
            agent=self.settings.agent,
            epoch=self.settings.epoch,
            attempt=self.settings.attempt,
            step=step,
            call_index=index,
            env=env_name,
            action=call.name,
            arguments_json=json.dumps(call.arguments, default=str, sort_keys=True),
            result=output,
            error=error,
            agent_message=move.message if index == 0 else None,
            observation=_observation_text(self.observed) if index == 0 else None,
            screenshot_path=next(
                (
                    self.artifact_of[o.image_path]
                    for o in self.observed
                    if o.image_path and index == 0
                ),
                None,
            ),
            graph_passed=sorted(self.node_index[n] for n in self.progress.passed),
            duration_sec=time.monotonic() - started,
            graph_passed_nodes=self.stats.passed_nodes,
            graph_total_nodes=self.stats.total_nodes,
            completeness=self.stats.completeness,
        )

    def _evaluate(self) -> None:
        """Step the evaluator graph with the agent's processes frozen; thaw them if it goes on."""
        try:
            self.freeze.freeze()
            self.stats = self.progress.step(self._judge, self.actions_taken)
            if not self.stats.success:
                self.freeze.thaw()
        except SandboxError as exc:
            raise self._sandbox_end(exc) from exc
        except EvaluatorError as exc:
            raise _End(TerminationReason.EVALUATOR_ERROR, self._evaluator_fault(exc)) from exc

    def _evaluator_fault(self, exc: EvaluatorError) -> EvaluatorError:
        """``exc`` as the benchmark's fault when no agent under test made the state it met.

        Any other evaluator error stays the agent's: the state it left may be
        what made the evaluator raise (see :class:`EvaluatorError`).
        """
        if isinstance(exc, EvaluatorFaultError):
            return exc
        if self.agent.replays_reference:
            return EvaluatorFaultError(f"{exc} (on the state the reference solution left)")
        if not self.acted_in_sandbox and not self.signals.submitted:
            return EvaluatorFaultError(f"{exc} (on the state setup left: the agent had not acted)")
        return exc

    def _judge(self, node: Evaluator) -> bool:
        if node.require_submit and not self.signals.submitted:
            return False
        env = self.evaluator_envs[node]
        env.grading = True
        try:
            return node.evaluate(env, self.signals.submission)
        except EvaluatorError as exc:
            if isinstance(exc.__cause__, SandboxError):
                raise exc.__cause__ from exc
            raise
        finally:
            env.grading = False

    def _observe(self, step: int) -> list[Observation]:
        observations = []
        for env in self.benchmark.task_environments(self.task):
            for obs in env.observation_space:
                try:
                    value = obs.run(self.envs[env.name])
                except SandboxError as exc:
                    raise self._sandbox_end(exc, f"observation '{obs.name}'") from exc
                except (ActionError, SandboxFileError) as exc:
                    value = f"observation failed: {exc}"
                if isinstance(value, bytes):
                    observations.append(self._image(step, env.name, obs.name, value))
                else:
                    observations.append(
                        Observation(env=env.name, name=obs.name, content=_short(value))
                    )
        return observations

    def _image(self, step: int, env: str, name: str, png: bytes) -> Observation:
        """An image observation: a file the agent can read here, an artifact for the driver."""
        relative = (
            f"{ARTIFACTS_DIR}/{self.settings.run_id}/{self.result.episode_id}/"
            f"step{step:04d}-{env}-{name}.png"
        )
        self.artifacts[relative] = png
        local = self._scratch() / Path(relative).name
        local.write_bytes(png)
        self.artifact_of[str(local)] = relative
        return Observation(env=env, name=name, content=f"[image: {name}]", image_path=str(local))

    def _remove_scratch(self) -> None:
        if self.scratch is None:
            return
        try:
            shutil.rmtree(self.scratch)
        except OSError as exc:
            logger.warning(
                "could not remove the episode's scratch folder %s: %s", self.scratch, exc
            )

    def _scratch(self) -> Path:
        if self.scratch is None:
            self.scratch = Path(tempfile.mkdtemp(prefix="crabray-episode-"))
        return self.scratch

    def deadline(self) -> float | None:
        """When the episode's time limit runs out (monotonic seconds), None without one.

        The time its agent waited for a grant of its model's limiter (or before
        retrying a rate-limited request) is not counted: a run that shares one model
        among many episodes queues their calls, and the queue is not the agent's
        doing. The agent's usage says it as the wait goes on.
        """
        if self.time_limit is None:
            return None
        return self.t0 + self.time_limit + self.agent.usage.model_wait_sec

    def _check_time(self) -> None:
        deadline = self.deadline()
        if deadline is not None and time.monotonic() > deadline:
            raise _End(
                TerminationReason.TIMEOUT,
                TimeoutError(f"time limit of {self.time_limit:g} s reached"),
            )

    def _env_for(self, act: Action) -> EpisodeEnv:
        return self.envs[self.benchmark.resolve_env(act, self.task)]

    def _sandbox_end(self, error: SandboxError, context: str | None = None) -> _End:
        """The end of an episode whose sandbox failed once the agent began: infrastructure
        only when proven.

        A failure the backend could not place (``env_error`` by
        :func:`sandbox_failure_reason`) is checked with a probe of every sandbox
        that touches nothing the agent made (``Backend.probe_health``): when all
        answer, the failure came from what the agent made of its sandbox (a
        socket or a leased file where a file was expected, a tree too deep)
        and is its own ``sandbox_error``, scored 0 and never retried.
        """
        end = _sandbox_end(error, context)
        if end.reason is not TerminationReason.ENV_ERROR or not self.agent_began:
            return end
        problems = [p for env in self._sandbox_envs() if (p := env.backend.probe_health())]
        if problems:
            logger.info("sandbox failure proven by a probe: %s", "; ".join(problems))
            return end
        why = (
            f"{context + ': ' if context else ''}{error} (the sandbox itself answers a probe "
            "that touches nothing the agent made: the failure came from what the agent made "
            "of it)"
        )
        return _End(TerminationReason.SANDBOX_ERROR, SandboxBrokenError(why))

    def _end_turn(self) -> None:
        """The agent's turn is over: its processes stay frozen through the final grading.

        A sandbox that cannot be reached now ends the episode as the sandbox's
        failure does anywhere else.
        """
        if not self.agent_began:
            return
        try:
            self.freeze.end_turn()
        except SandboxError as exc:
            end = self._sandbox_end(exc, "freezing the agent's processes")
            self._end(end.reason, end.error, end.context)

    def _score(self) -> None:
        """Grade a task that has a scorer, once, now that the agent is done.

        Skipped when setup or the sandbox failed, or the run was interrupted. The
        scorer gets the sandbox and, if it asks for ``trajectory``, the steps so
        far as JSON text; it
        returns a number in [0, 1] or a ``Score`` (with checkpoints). A scorer
        that raises scores 0 and ends the episode as evaluator_error with the
        error recorded; a sandbox failure while scoring ends it as
        :func:`sandbox_failure_reason` says (env_error, retried, unless the
        sandbox broke of what the agent did).
        """
        scorer = self.task.scorer
        skipped = (
            TerminationReason.SETUP_ERROR,
            TerminationReason.ENV_ERROR,
            TerminationReason.SANDBOX_ERROR,
            TerminationReason.CANCELLED,  # run again on resume: grading it is wasted time
        )
        if scorer is None or self.result.termination_reason in skipped:
            return
        self.score = 0.0
        env = self._env_for(scorer)
        env.grading = True
        try:
            self.score, self.result.checkpoints = self._run_scorer(scorer, env)
            if self.score < 1.0 and self.freeze.frozen and self.freeze.stopped:
                self._score_thawed(scorer, env)
        except SandboxError as exc:
            end = self._sandbox_end(exc, f"scoring with '{scorer.name}'")
            self._end(end.reason, end.error, end.context)
        except Exception as exc:
            logger.info("scorer '%s' of task %s failed: %s", scorer.name, self.task.id, exc)
            error = self._evaluator_fault(scorer_error(scorer, exc))
            self._end(TerminationReason.EVALUATOR_ERROR, error, f"evaluation '{scorer.name}'")
        finally:
            env.grading = False

    def _run_scorer(self, scorer: Action, env: EpisodeEnv) -> tuple[float, Any]:
        """The scorer's score in [0, 1] and its checkpoints (None when it gave a number).

        Raises:
            EvaluatorError: It returned something else than a score.
        """
        context: dict[str, Any] = {"env": env}
        if "trajectory" in scorer.kept_params:
            context["trajectory"] = self._trajectory()
        value = scorer.invoke(context, {})
        checkpoints = None
        if isinstance(value, Score):
            checkpoints = value.checkpoints
            value = value.value
        if not isinstance(value, int | float) or not 0.0 <= value <= 1.0:
            raise EvaluatorError(f"returned {value!r}, not a score in [0, 1]")
        return float(value), checkpoints

    def _score_thawed(self, scorer: Action, env: EpisodeEnv) -> None:
        """Grade once more with the agent's processes running; a better score is unverified.

        Some graders must talk to a process the agent left (a test of the server
        it started), as the suite's own harness grades them. What they give only
        with those processes thawed could also be those processes' doing, so it
        counts, as an unverified grade with its reason.
        """
        stopped = self.freeze.stopped
        self.freeze.thaw()
        try:
            score, checkpoints = self._run_scorer(scorer, env)
        except SandboxError:
            raise
        except Exception as exc:
            # Beside the agent's live processes the grader may meet a half-written file:
            # the frozen grade stands.
            logger.info("scorer '%s' failed with the agent's processes running: %s", scorer, exc)
            return
        finally:
            self.freeze.end_turn()
        if score > (self.score or 0.0):
            self.score, self.result.checkpoints = score, checkpoints
            self.freeze.note(
                env.name,
                f"scored {score:g} only with the agent's {stopped} processes running (frozen, "
                "it did not pass): they could have written what the grader read",
            )

    def _sandbox_envs(self) -> list[EpisodeEnv]:
        return [env for name, env in self.envs.items() if name != ROOT_ENV]

    def _record_grader_trust(self) -> None:
        """Record whether every sandbox that graded the episode did so by a trusted path.

        Left unset (unknown) when the episode never reached its agent, or the
        sandbox failed (an ``env_error``: the attempt is retried anyway).
        """
        if not hasattr(self, "evaluator_envs") or self.result.termination_reason.is_infra:
            return
        graders = {id(env): env for env in self.evaluator_envs.values()}
        if self.task.scorer is not None:
            env = self._env_for(self.task.scorer)
            graders[id(env)] = env
        try:
            sandboxes = [env for env in graders.values() if env.name != ROOT_ENV]
            reasons = [
                f"{env.name}: {reason}" for env in sandboxes for reason in self._distrust(env)
            ]
            self.result.grader_trusted = not reasons
            self.result.grader_untrusted_reason = "; ".join(reasons) or None
            replaced = [env.name for env in sandboxes if env.backend.grader_replaced()]
        except SandboxError as exc:
            logger.warning(
                "cannot tell whether episode %s was graded by a trusted path: %s",
                self.result.episode_id,
                exc,
            )
            return
        if replaced:
            self._grader_replaced(replaced)

    def _distrust(self, env: EpisodeEnv) -> list[str]:
        """Why the grades taken in ``env`` are unverified: its freezes' and its backend's."""
        reasons = self.freeze.reasons(env.name)
        backend = env.backend.grader_distrust(ran_commands=env.graded_by_command)
        return reasons if backend is None else [*reasons, backend]

    def _grader_replaced(self, envs: list[str]) -> None:
        """The agent killed the grader started before its first action: no verdict is the grade.

        What a guest started afterwards says comes from a sandbox the agent had
        the run of (a module it planted, an interpreter it swapped), so the
        episode is the agent's failure: it broke its sandbox's grading path.
        """
        self.grader_was_replaced = True
        self.result.grader_trusted = False
        self.result.grader_untrusted_reason = f"the grader of {', '.join(envs)} was replaced"
        if self.result.termination_reason is TerminationReason.SANDBOX_ERROR:
            return  # already the agent's broken sandbox, with what broke it
        self.result.termination_reason = TerminationReason.SANDBOX_ERROR
        self.result.error_type = "GraderReplacedError"
        self.result.error = (
            f"the grader of {', '.join(envs)} was replaced: the agent killed the guest process "
            "started before its first action, so what grades it now runs from what the agent "
            "could change; no pass (docs/isolation.md, 'The grading path')"
        )

    def _trajectory(self) -> str:
        """The agent's steps so far as a JSON array: what a scorer grading the process reads."""
        return json.dumps(
            [
                {
                    "step": step.step,
                    "env": step.env,
                    "action": step.action,
                    "arguments": json.loads(step.arguments_json),
                    "result": step.result,
                    "error": step.error,
                    "agent_message": step.agent_message,
                }
                for step in self.steps
            ],
            ensure_ascii=False,
        )

    def _teardown(self) -> None:
        for act in self.task.teardown:
            try:
                value = act.run(self._env_for(act))
                if isinstance(value, EpisodeFiles):
                    self._keep_files(value)
            except Exception as exc:
                logger.warning("teardown '%s' of task %s failed: %s", act.name, self.task.id, exc)
                if self.result.error is None:
                    self.result.error = f"teardown '{act.name}' failed: {exc}"

    def _keep_files(self, handed: EpisodeFiles) -> None:
        """Keep files a teardown step handed back as the episode's artifacts."""
        folder = f"{ARTIFACTS_DIR}/{self.settings.run_id}/{self.result.episode_id}"
        for name, data in handed.files.items():
            path = PurePosixPath(name)
            if path.is_absolute() or ".." in path.parts or not path.parts:
                raise ActionError(f"artifact name '{name}' must be a relative path without '..'")
            self.artifacts[f"{folder}/{path}"] = data

    def _end(
        self, reason: TerminationReason, error: BaseException | None, context: str | None = None
    ) -> None:
        self.result.termination_reason = reason
        if error is not None:
            message = str(error) if isinstance(error, CrabrayError) else repr(error)
            self.result.error = f"{context}: {message}" if context else message
            self.result.error_type = type(error).__name__

    def as_it_stands(self, reason: TerminationReason, error: BaseException) -> EpisodeRecord:
        """The record of this episode now, while a step of it may still be running elsewhere.

        Everything recorded so far is kept (steps, conversation, tokens, cost);
        nothing touches the sandboxes (a step may still hold them), so there is no
        grading past what the evaluator graph saw, no scorer and no teardown.
        """
        steps, artifacts = list(self.steps), dict(self.artifacts)
        if self.calling is not None:
            step, index, call, move, env_name, started = self.calling
            if not any(r.step == step and r.call_index == index for r in steps[-1:]):
                unfinished = f"unfinished: {error}"
                steps.append(
                    self._step_record(step, index, call, move, env_name, "", unfinished, started)
                )
        result = self.result.model_copy(deep=True)
        result.termination_reason = reason
        result.error = str(error)
        result.error_type = type(error).__name__
        self._fill(result, score=0.0)
        return EpisodeRecord(result=result, steps=steps, artifacts=artifacts)

    def _finish(self) -> None:
        self._fill(self.result, self.score)

    def _fill(self, result: EpisodeResult, score: float | None) -> None:
        """Put the outcome, the agent's usage and the times on ``result``."""
        usage = self.agent.usage
        if self.task.scorer is None:
            result.success = self.stats.success
            result.score = 1.0 if self.stats.success else 0.0
            result.completeness = self.stats.completeness
        else:
            result.score = score or 0.0
            result.success = result.score >= 1.0
            result.completeness = result.score
        if self.grader_was_replaced:
            result.success, result.score, result.completeness = False, 0.0, 0.0
        if result.attribution is not Attribution.AGENT:
            # The benchmark's or the infrastructure's fault: no verdict on the agent, so
            # never a pass (an oracle without a solution on a state that already passes).
            result.success, result.score = False, 0.0
        result.tokens_in = usage.tokens_in
        result.tokens_out = usage.tokens_out
        result.model_calls = usage.model_calls
        result.model_latency_sec = usage.model_latency_sec
        result.model_latencies_sec = list(usage.model_latencies_sec)
        result.model_retries = usage.model_retries
        result.model_rate_limited = usage.model_rate_limited
        result.model_wait_sec = usage.model_wait_sec
        result.cost_usd = usage.cost_usd
        if usage.conversation:
            result.conversation_json = conversation_json(
                list(usage.conversation), self.agent.spec.max_conversation_bytes
            )
        result.wall_time_sec = time.monotonic() - self.t0
        result.finished_at = utcnow()


def _graph_json(task: Task) -> str:
    """The task's evaluator graph by node labels, for viewers (nodes in topological order)."""
    nodes = task.evaluator.nodes
    index = {node: i for i, node in enumerate(nodes)}
    edges = [[index[u], index[v]] for u, v in task.evaluator.edges]
    return json.dumps({"nodes": [n.label for n in nodes], "edges": sorted(edges)})


def _observation_text(observations: list[Observation]) -> str | None:
    if not observations:
        return None
    return _short("\n".join(f"[{o.env}/{o.name}] {o.content}" for o in observations))


def _tool(bound: BoundAction) -> dict[str, Any]:
    schema = bound.action.to_openai_tool()
    schema["function"]["name"] = bound.call_name
    return schema


def _short(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, default=str)
    return text if len(text) <= _RESULT_CHARS else text[:_RESULT_CHARS] + " [...]"
