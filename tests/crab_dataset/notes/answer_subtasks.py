"""A subtask answered by submitting, as crab-benchmark-v0's "Submit content" subtask is."""

import networkx as nx

from crabray import SubTask
from crabray.actions.crab_actions import check_submit, submit

answer_subtasks = [
    SubTask(
        id="36baaf2b-2b9f-4e4b-a37c-f93cad9ef65d",
        description='Submit content "{content}".',
        attribute_dict={"content": "message"},
        output_type="None",
        output_generator="manual",
        evaluator_generator=lambda content: nx.path_graph(
            [check_submit(content)], create_using=nx.DiGraph
        ),
        extra_action=[submit],
    ),
]
