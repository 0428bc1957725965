"""A CRAB-style benchmark module (modelled on CRAB's benchmarks/template.py).

Written as a CRAB author would, with ``crab`` changed to ``crabray`` in the
imports; the only additions are the ``solution`` lists the oracle agent replays
(CRAB has no oracle; a CRAB ``Task`` ignores the field).
"""

import networkx as nx
from template_environment import set_state, template_environment_config

from crabray import BenchmarkConfig, Task, action, evaluator
from crabray.actions.crab_actions import check_submit, complete, submit, wait


@evaluator
def is_system_state(env) -> bool:
    return env.state


@evaluator(env_name="root")
def check_submit_true(env) -> bool:
    if env.trajectory:
        action_name, params, _ = env.trajectory[-1]
        if action_name == "_submit" and params["content"]:
            return True
    return False


@action(env_name="root")
def _submit(content: bool) -> None:
    """Submit your answer through this function.

    Args:
        content: the content to submit
    """
    pass


template_benchmark_config = BenchmarkConfig(
    name="template_benchmark",
    environments=[template_environment_config],
    tasks=[
        Task(
            id="0",
            description="Set the system state to True.",
            evaluator=is_system_state,
            setup=set_state(False),
            solution=[set_state(True)],
        ),
        Task(
            id="1",
            description="Submit True.",
            evaluator=check_submit_true,
            extra_action=[_submit],
            solution=[_submit(True)],
        ),
    ],
)


@evaluator(env_name="testenv0")
def check_sys0(env) -> bool:
    return env.state


@evaluator(env_name="testenv1")
def check_sys1(env) -> bool:
    return env.state


@evaluator(env_name="testenv2")
def check_sys2(env) -> bool:
    return env.state


eval_g = nx.DiGraph()
eval_g.add_edge(check_sys0, check_submit_true)
eval_g.add_edge(check_sys1, check_submit_true)
eval_g.add_edge(check_sys2, check_submit_true)

multienv_template_benchmark_config = BenchmarkConfig(
    name="multienv_template_benchmark",
    environments=[
        template_environment_config.model_copy(update={"name": f"testenv{idx}"}) for idx in range(3)
    ],
    tasks=[
        Task(
            id="0",
            description=(
                "Set the system state to True in all three environments. "
                "Then submit True to finish the project."
            ),
            evaluator=eval_g,
            extra_action=[_submit],
            solution=[
                set_state(True).on("testenv0"),
                set_state(True).on("testenv1"),
                set_state(True).on("testenv2"),
                _submit(True),
            ],
        )
    ],
    multienv=True,
)


@evaluator(env_name="template_env", local=True)
def state_was_set_true(env) -> bool:
    if env.trajectory:
        return any(name == "set_state" and params["value"] for name, params, _ in env.trajectory)
    return False


root_actions_benchmark_config = BenchmarkConfig(
    name="root_actions_benchmark",
    environments=[template_environment_config],
    root_action_space=[complete, wait],
    tasks=[
        Task(
            id="answer",
            description="Submit the word apple.",
            evaluator=check_submit("apple"),
            extra_action=[submit],
            solution=[submit("apple")],
        ),
        Task(
            id="trail",
            description="Set the state to True, then submit the word apple.",
            evaluator=[state_was_set_true, check_submit("apple")],
            extra_action=[submit],
            solution=[set_state(True), submit("apple")],
        ),
    ],
)
