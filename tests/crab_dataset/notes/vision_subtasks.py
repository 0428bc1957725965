"""Subtasks of a module that imports a heavy package this machine lacks (as CRAB's import cv2).

``notes_ocr_engine`` is installed nowhere: the subtask whose evaluator runs in the
episode and reads the screen with it cannot run; the other subtask of this module,
which never uses it, runs as usual.
"""

import os

import networkx as nx
import notes_ocr_engine as ocr

from crabray import SubTask, evaluator


@evaluator(env_name="ubuntu", local=True)
def screen_shows(text: str, env) -> bool:
    return text in ocr.read_text(env.screenshot())


@evaluator(env_name="ubuntu")
def screen_has_text() -> bool:
    import subprocess

    shot = subprocess.run(["import", "-window", "root", "png:-"], capture_output=True).stdout
    return bool(ocr.read_text(shot))


@evaluator(env_name="ubuntu")
def file_not_empty(file_path: str) -> bool:
    return os.path.isfile(file_path) and os.path.getsize(file_path) > 0


vision_subtasks = [
    SubTask(
        id="0e7bbbc9-9af5-4364-b701-ce038c6bcebc",
        description='Show "{text}" on the screen.',
        attribute_dict={"text": "message"},
        output_type="None",
        evaluator_generator=lambda text: nx.path_graph(
            [screen_shows(text)], create_using=nx.DiGraph
        ),
    ),
    SubTask(
        id="bbd58e57-7877-4df9-a694-dc92233491d6",
        description="Clear the screen of any text.",
        attribute_dict={},
        output_type="None",
        # ~ runs in the episode, its part in the sandbox: the module is imported there.
        evaluator_generator=lambda: nx.path_graph([~screen_has_text], create_using=nx.DiGraph),
    ),
    SubTask(
        id="df28c475-9331-4fc1-a442-14ad4904a146",
        description='Save anything at all in "{file_path}".',
        attribute_dict={"file_path": "file_path"},
        output_type="file_path",
        evaluator_generator=lambda file_path: nx.path_graph(
            [file_not_empty(file_path)], create_using=nx.DiGraph
        ),
    ),
]
