"""Android subtasks in crab-benchmark-v0's style: they need ``crab.actions.android_actions``
(an ADB device), which crabray does not have, and ``lxml`` in an annotation."""

import networkx as nx
from crab import SubTask, evaluator
from crab.actions.android_actions import execute_adb
from lxml.etree import _Element


def get_xml_etree(env) -> _Element | None:
    return execute_adb("exec-out uiautomator dump /dev/tty", env)


@evaluator(env_name="android", local=True)
def check_current_package_name(name: str, env) -> bool:
    return name in execute_adb("shell dumpsys window | grep mCurrentFocus", env)


android_subtasks = [
    SubTask(
        id="9e0b7a2c-51d4-4f6e-8c1a-2d3e4f5a6b01",
        description='Open the app "{name}" on the phone.',
        attribute_dict={"name": "package_name"},
        output_type="None",
        evaluator_generator=lambda name: nx.path_graph(
            [check_current_package_name(name)], create_using=nx.DiGraph
        ),
    ),
]
