"""File subtasks, written as crab-benchmark-v0's ``ubuntu_subtasks.py`` is (crab -> crabray).

The evaluators are plain functions: they run inside the sandbox, where the files are.
"""

import os

import networkx as nx

from crabray import SubTask, evaluator


@evaluator(env_name="ubuntu")
def check_file_exist(file_path: str) -> bool:
    return os.path.isfile(file_path)


@evaluator(env_name="ubuntu")
def check_file_content(file_path: str, content: str) -> bool:
    if not os.path.isfile(file_path):
        return False
    with open(file_path) as file:
        return file.read().strip() == content


@evaluator(env_name="ubuntu")
def check_directory_exists(dir_path: str) -> bool:
    return os.path.isdir(dir_path)


@evaluator(env_name="ubuntu")
def check_file_copied(source: str, dir_path: str) -> bool:
    target = os.path.join(dir_path, os.path.basename(source))
    if not (os.path.isfile(source) and os.path.isfile(target)):
        return False
    with open(source, "rb") as a, open(target, "rb") as b:
        return a.read() == b.read()


file_subtasks = [
    SubTask(
        id="31ddd59c-6d48-40dd-b482-b0faf11cf688",
        description='Create the file "{file_path}" holding "{content}".',
        attribute_dict={"file_path": "file_path", "content": "message"},
        output_type="file_path",
        output_generator=lambda file_path, content: file_path,
        evaluator_generator=lambda file_path, content: nx.path_graph(
            [check_file_exist(file_path), check_file_content(file_path, content)],
            create_using=nx.DiGraph,
        ),
    ),
    SubTask(
        id="9856d6bc-522f-4e91-90ed-5a6fbb03e1b2",
        description='Make the directory "{dir_path}".',
        attribute_dict={"dir_path": "dir_path"},
        output_type="dir_path",
        output_generator=lambda dir_path: dir_path,
        evaluator_generator=lambda dir_path: nx.path_graph(
            [check_directory_exists(dir_path)], create_using=nx.DiGraph
        ),
    ),
    SubTask(
        id="1b7b31ea-7ff3-420e-9b94-691e52fe6b47",
        description='Copy "{source}" into the directory "{dir_path}".',
        attribute_dict={"source": "file_path", "dir_path": "dir_path"},
        output_type="None",
        evaluator_generator=lambda source, dir_path: nx.path_graph(
            [check_directory_exists(dir_path), check_file_copied(source, dir_path)],
            create_using=nx.DiGraph,
        ),
    ),
]
