"""Ubuntu subtasks in crab-benchmark-v0's style, with CRAB's own imports (``from crab import``).

The evaluators are plain functions: they run in the ``ubuntu`` sandbox.
"""

import os

import networkx as nx
from crab import SubTask, evaluator


@evaluator(env_name="ubuntu")
def check_file_exist(file_path: str) -> bool:
    return os.path.isfile(file_path)


@evaluator(env_name="ubuntu")
def check_text_in_file(file_path: str, text: str) -> bool:
    if not os.path.isfile(file_path):
        return False
    with open(file_path) as f:
        return text in f.read()


ubuntu_subtasks = [
    SubTask(
        id="5c1a8b8e-0d6f-4a3c-9a43-7b1f2a6f0c01",
        description='Create a new file at "{file_path}".',
        attribute_dict={"file_path": "file_path"},
        output_type="file_path",
        evaluator_generator=lambda file_path: nx.path_graph(
            [check_file_exist(file_path)], create_using=nx.DiGraph
        ),
    ),
    SubTask(
        id="5c1a8b8e-0d6f-4a3c-9a43-7b1f2a6f0c02",
        description='Write "{text}" into the file "{file_path}".',
        attribute_dict={"file_path": "file_path", "text": "text"},
        output_type="None",
        evaluator_generator=lambda file_path, text: nx.path_graph(
            [check_text_in_file(file_path, text)], create_using=nx.DiGraph
        ),
    ),
]
