"""The demo suite: small terminal and file tasks on the local backend.

Covers single evaluators, combined evaluators (&, |, ~), multi-stage
evaluator graphs, a task graded on the agent's submitted answer, and a task
spanning two environments. Every task carries a reference solution, so
``crabray run tasks/demo --agent oracle`` succeeds on all of them and
``--agent noop`` on none.
"""

from __future__ import annotations

from typing import Any

import networkx as nx

from crabray import BenchmarkConfig, EnvironmentConfig, Task, evaluator
from crabray.actions import (
    FILE_ACTIONS,
    SHELL_ACTIONS,
    command_output_contains,
    file_contains,
    file_equals,
    path_exists,
    run_command,
    submission_equals,
    submit,
    write_file,
)

WORKSTATION = EnvironmentConfig(
    name="workstation",
    description="A Linux shell in an empty working directory.",
    action_space=[*SHELL_ACTIONS, *FILE_ACTIONS],
)
SERVER = EnvironmentConfig(
    name="server",
    description="A second Linux machine: the deployment target.",
    action_space=[*SHELL_ACTIONS, *FILE_ACTIONS],
)


@evaluator
def line_count_is(path: str, lines: int, env: Any) -> bool:
    """The file has exactly this many non-empty lines.

    Args:
        path: The file.
        lines: The expected number of non-empty lines.
    """
    result = env.exec(["sh", "-c", f"grep -c . {path}"])
    return result.stdout.strip() == str(lines)


def _stages(*stages: Any) -> nx.DiGraph:
    graph = nx.DiGraph()
    nx.add_path(graph, stages)
    return graph


def _diamond() -> nx.DiGraph:
    """Two independent branches that must both pass before the final check."""
    has_src = path_exists(path="project/src")
    has_docs = path_exists(path="project/docs")
    readme = file_contains(path="project/docs/README.md", text="# Project")
    main = file_contains(path="project/src/main.py", text="print")
    runs = command_output_contains(command="python3 project/src/main.py", text="hello")
    graph = nx.DiGraph()
    graph.add_edges_from([(has_src, main), (has_docs, readme), (main, runs), (readme, runs)])
    return graph


TASKS = [
    Task(
        id="hello-file",
        description="Create a file named hello.txt containing exactly the text: Hello, world!",
        evaluator=file_equals(path="hello.txt", content="Hello, world!"),
        solution=[write_file(path="hello.txt", content="Hello, world!\n")],
        tags=["files", "easy"],
    ),
    Task(
        id="make-dirs",
        description="Create the directory tree logs/2026/november (all three levels).",
        evaluator=path_exists(path="logs/2026/november"),
        solution=[run_command(command="mkdir -p logs/2026/november")],
        tags=["shell", "easy"],
    ),
    Task(
        id="sorted-names",
        description=(
            "Write the names alice, carol and bob to names.txt, one per line, "
            "sorted alphabetically."
        ),
        evaluator=file_equals(path="names.txt", content="alice\nbob\ncarol"),
        solution=[
            run_command(command="printf 'carol\\nalice\\nbob\\n' | sort > names.txt"),
        ],
        tags=["shell", "easy"],
    ),
    Task(
        id="config-and",
        description=(
            "Create app.conf with a line 'port=8080' and a line 'debug=false', "
            "and make it readable only by its owner (mode 600)."
        ),
        evaluator=(
            file_contains(path="app.conf", text="port=8080")
            & file_contains(path="app.conf", text="debug=false")
            & command_output_contains(command="stat -c %a app.conf", text="600")
        ),
        solution=[
            write_file(path="app.conf", content="port=8080\ndebug=false\n"),
            run_command(command="chmod 600 app.conf"),
        ],
        tags=["files", "combined"],
    ),
    Task(
        id="either-archive",
        description="Pack data.txt (create it with any content) into data.tar or data.zip.",
        evaluator=(path_exists(path="data.tar") | path_exists(path="data.zip"))
        & path_exists(path="data.txt"),
        solution=[
            write_file(path="data.txt", content="payload\n"),
            run_command(command="tar -cf data.tar data.txt"),
        ],
        tags=["shell", "combined"],
    ),
    Task(
        id="no-temp-files",
        description=(
            "Create report.md containing the word 'Summary', and make sure no file named "
            "draft.tmp remains in the working directory."
        ),
        setup=[write_file(path="draft.tmp", content="scratch\n")],
        evaluator=file_contains(path="report.md", text="Summary") & ~path_exists(path="draft.tmp"),
        solution=[
            write_file(path="report.md", content="# Summary\nAll good.\n"),
            run_command(command="rm draft.tmp"),
        ],
        tags=["files", "combined"],
    ),
    Task(
        id="pipeline-stages",
        description=(
            "Create numbers.txt with the integers 1 to 10, one per line; then write their sum "
            "to sum.txt; then create done.flag."
        ),
        evaluator=_stages(
            line_count_is(path="numbers.txt", lines=10),
            file_equals(path="sum.txt", content="55"),
            path_exists(path="done.flag"),
        ),
        solution=[
            run_command(command="seq 1 10 > numbers.txt"),
            run_command(command="awk '{s+=$1} END {print s}' numbers.txt > sum.txt"),
            run_command(command="touch done.flag"),
        ],
        tags=["shell", "graph"],
    ),
    Task(
        id="project-layout",
        description=(
            "Create a project with project/src/main.py that prints 'hello' when run with "
            "python3, and project/docs/README.md whose first line is '# Project'."
        ),
        evaluator=_diamond(),
        solution=[
            write_file(path="project/src/main.py", content="print('hello')\n"),
            write_file(path="project/docs/README.md", content="# Project\n"),
        ],
        tags=["files", "graph"],
    ),
    Task(
        id="count-lines",
        description=(
            "The file words.txt lists words, one per line. Count how many lines contain the "
            "letter 'a' and submit that number as your answer."
        ),
        setup=[write_file(path="words.txt", content="apple\nberry\nbanana\ncherry\ndate\n")],
        evaluator=submission_equals(expected="3"),
        extra_actions=[submit],
        solution=[run_command(command="grep -c a words.txt"), submit(content="3")],
        tags=["shell", "submit"],
    ),
    Task(
        id="script-then-answer",
        description=(
            "Write an executable shell script greet.sh that prints 'hi'. Then run it and "
            "submit its output."
        ),
        evaluator=_stages(
            command_output_contains(command="./greet.sh", text="hi"),
            submission_equals(expected="hi"),
        ),
        extra_actions=[submit],
        solution=[
            write_file(path="greet.sh", content="#!/bin/sh\necho hi\n"),
            run_command(command="chmod +x greet.sh"),
            submit(content="hi"),
        ],
        tags=["shell", "submit", "graph"],
    ),
]

DEPLOY = Task(
    id="deploy-config",
    description=(
        "On the workstation, write settings.ini containing 'mode=production'. Then put a copy "
        "with the same content on the server as deploy/settings.ini, and on the server "
        "create deploy/READY."
    ),
    environments=["workstation", "server"],
    evaluator=_stages(
        file_contains(path="settings.ini", text="mode=production").on("workstation"),
        file_contains(path="deploy/settings.ini", text="mode=production").on("server"),
        path_exists(path="deploy/READY").on("server"),
    ),
    solution=[
        write_file(path="settings.ini", content="mode=production\n").on("workstation"),
        write_file(path="deploy/settings.ini", content="mode=production\n").on("server"),
        run_command(command="touch deploy/READY").on("server"),
    ],
    tags=["multienv", "graph"],
)

demo = BenchmarkConfig(
    name="demo",
    description="Small terminal and file tasks on the local backend, one spanning two "
    "machines; every task has a reference solution.",
    tasks=[*TASKS, DEPLOY],
    environments=[WORKSTATION, SERVER],
    default_env="workstation",
    step_limit=15,
)
