"""A CRAB-style environment module (modelled on CRAB's environments/template.py).

Written as a CRAB author would, with ``crab`` changed to ``crabray`` in the imports.
"""

from crabray.core import Environment, EnvironmentConfig, action


@action
def set_state(value: bool, env: Environment) -> None:
    """
    Set the system state to the given value.

    Args:
        value (bool): The new state.
    """
    env.state = value


@action
def current_state(env: Environment) -> bool:
    """
    Read the system state.
    """
    return env.state


template_environment_config = EnvironmentConfig(
    name="template_env",
    action_space=[set_state],
    observation_space=[current_state],
    description="A test environment",
    info=None,
    reset=set_state(False),
)
