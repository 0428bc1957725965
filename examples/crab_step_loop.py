"""Drive a CRAB-style benchmark one step at a time from your own loop.

``create_benchmark(config)`` returns CRAB's ``Benchmark``: ``start_task`` gives
the task and its action space, ``step`` runs one action and the evaluators
that are ready, ``observe`` shows what the agent would see, and a step whose
result says ``terminated`` ends the task. Replace ``choose`` with your agent
(an LLM call, a policy being trained) to run it on your own terms.

Run it: ``python examples/crab_step_loop.py`` (prints one line per step and
the outcome of each task). The same file runs under ``crabray run`` too:
``crabray run examples/crab_step_loop.py --agent oracle``.
"""

from __future__ import annotations

from typing import Any

import networkx as nx

from crabray import BenchmarkConfig, EnvironmentConfig, Task, action, create_benchmark, evaluator
from crabray.core import Environment


@action
def set_state(value: bool, env: Environment) -> None:
    """Set the machine's state.

    Args:
        value: The state to set.
    """
    env.state = value  # type: ignore[attr-defined]


@action
def current_state(env: Environment) -> bool:
    """The machine's state."""
    return bool(env.state)  # type: ignore[attr-defined]


@action(env_name="root")
def _submit(content: bool) -> None:
    """Submit your answer.

    Args:
        content: The answer.
    """


@evaluator
def state_is_set(env: Environment) -> bool:
    return bool(env.state)  # type: ignore[attr-defined]


@evaluator(env_name="root")
def submitted_true(env: Environment) -> bool:
    return any(name == "_submit" and args["content"] for name, args, _ in env.trajectory)


machine = EnvironmentConfig(
    name="machine",
    action_space=[set_state],
    observation_space=[current_state],
    description="A machine with one boolean state.",
    reset=set_state(False),
)
graph = nx.DiGraph()
for index in range(2):
    graph.add_edge(state_is_set.on(f"machine{index}"), submitted_true)

single = BenchmarkConfig(
    name="step_loop_single",
    environments=[machine],
    tasks=[
        Task(
            id="set",
            description="Set the state to True.",
            evaluator=state_is_set,
            solution=[set_state(True)],
        )
    ],
)
multi = BenchmarkConfig(
    name="step_loop_multi",
    environments=[machine.model_copy(update={"name": f"machine{i}"}) for i in range(2)],
    tasks=[
        Task(
            id="set_both",
            description="Set the state of both machines to True, then submit True.",
            evaluator=graph,
            extra_action=[_submit],
            solution=[
                set_state(True).on("machine0"),
                set_state(True).on("machine1"),
                _submit(True),
            ],
        )
    ],
    multienv=True,
)


def choose(observations: dict[str, dict[str, Any]]) -> tuple[str, dict[str, Any], str | None]:
    """A scripted agent: set the first machine still False, else submit True.

    Returns:
        (action name, parameters, environment name).
    """
    for env_name, seen in observations.items():
        if seen.get("current_state") is False:
            return "set_state", {"value": True}, env_name
    return "_submit", {"content": True}, "root"


def main() -> None:
    """Run every task of both benchmarks with the scripted agent."""
    for config in (single, multi):
        benchmark = create_benchmark(config)
        for task in benchmark.tasks:
            benchmark.start_task(task.id)
            print(f"{config.name}/{task.id}: {task.description}")
            while True:
                name, parameters, env_name = choose(benchmark.observe())
                result = benchmark.step(name, parameters, env_name)
                progress = result.evaluation_results["completeness"]
                print(f"  {env_name}.{name}({parameters}) -> completeness {progress:.2f}")
                if result.terminated:
                    outcome = "success" if result.success else "failure"
                    print(f"  {outcome}: {result.info['terminate_reason']}")
                    break


if __name__ == "__main__":
    main()
