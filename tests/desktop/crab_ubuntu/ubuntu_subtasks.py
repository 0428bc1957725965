"""Subtasks of CRAB's Ubuntu environment that run offline, in crab-benchmark-v0's form.

Modelled on its "open a file with vim in a terminal, write, save and exit"
subtask (gnome-terminal-server is xterm here), its LibreOffice Writer "save
as an ODT file" subtask and its GIMP subtasks (an image saved from GIMP); the
evaluator graphs are stepped after every action, as in CRAB, so each node
checks a state the agent passes through.
"""

import networkx as nx

from crabray import SubTask

from .ubuntu_actions import (
    check_current_window_process,
    check_file_content,
    check_file_exist,
    check_image_format,
    check_odt_text,
    check_text_in_current_window_name,
    is_process_open,
)

ubuntu_subtasks = [
    SubTask(
        id="3c9d8f2e-6b0a-4e57-9a41-0d2f7b6c5e18",
        description='Open "{file_path}" using vim in a terminal, write "{content}", then save '
        "and exit vim.",
        attribute_dict={"file_path": "file_path", "content": "message"},
        output_type="file_path",
        output_generator=lambda file_path, content: file_path,
        evaluator_generator=lambda file_path, content: nx.path_graph(
            [
                check_current_window_process("xterm"),
                is_process_open("vim"),
                ~is_process_open("vim"),
                check_file_content(file_path, content),
            ],
            create_using=nx.DiGraph,
        ),
    ),
    SubTask(
        id="a51f0c7d-2e84-4b9b-8d36-7e1c4f9a2b60",
        description='Write "{content}" in LibreOffice Writer and save it as an ODT file at '
        '"{file_path}".',
        attribute_dict={"content": "message", "file_path": "file_path"},
        output_type="file_path",
        output_generator=lambda content, file_path: file_path,
        evaluator_generator=lambda content, file_path: nx.path_graph(
            [
                check_text_in_current_window_name("LibreOffice Writer"),
                check_file_exist(file_path),
                check_odt_text(file_path, content),
            ],
            create_using=nx.DiGraph,
        ),
    ),
    SubTask(
        id="e2b7c4a9-1f36-4d8e-b05a-9c3d6f2e7a41",
        description="Create a new image in GIMP (GNU Image Manipulation Program) and export it "
        'as a PNG file at "{file_path}".',
        attribute_dict={"file_path": "photo_path"},
        output_type="photo_path",
        output_generator=lambda file_path: file_path,
        evaluator_generator=lambda file_path: nx.path_graph(
            [
                check_text_in_current_window_name("GNU Image Manipulation Program"),
                check_file_exist(file_path),
                check_image_format(file_path, "PNG"),
            ],
            create_using=nx.DiGraph,
        ),
    ),
]
