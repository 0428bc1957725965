"""The docker demo suite: shell and file tasks in busybox containers.

Every environment is a container of ``crabray/busybox:latest`` (built from
Debian's ``busybox-static`` by ``envs/busybox/build.sh``, automatically on
first use), with no network and the docker backend's default limits. The
image has a POSIX shell and the busybox applets but no Python, so tasks and
their reference solutions stick to shell and file actions. Every task has a
reference solution: ``crabray run tasks/docker_demo --agent oracle`` succeeds
on all of them and ``--agent noop`` on none.
"""

from __future__ import annotations

import hashlib

import networkx as nx

from crabray import BenchmarkConfig, EnvironmentConfig, Task
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

BUSYBOX = {"image": "crabray/busybox:latest", "build": "busybox"}
"""Backend settings of every environment: the busybox image, built from envs/ if missing."""

BOX = EnvironmentConfig(
    name="box",
    description="A minimal Linux container (busybox, no network); you are root in /root.",
    action_space=[*SHELL_ACTIONS, *FILE_ACTIONS],
    backend="docker",
    backend_settings=BUSYBOX,
)
TARGET = EnvironmentConfig(
    name="target",
    description="A second busybox container: the deployment target.",
    action_space=[*SHELL_ACTIONS, *FILE_ACTIONS],
    backend="docker",
    backend_settings=BUSYBOX,
)

PAYLOAD = "crabray in a container\n" * 3
PAYLOAD_MD5 = hashlib.md5(PAYLOAD.encode()).hexdigest()


def _stages(*stages: object) -> nx.DiGraph:
    graph = nx.DiGraph()
    nx.add_path(graph, stages)
    return graph


TASKS = [
    Task(
        id="hello-file",
        description="Create a file named hello.txt containing exactly the text: Hello, container!",
        evaluator=file_equals(path="hello.txt", content="Hello, container!"),
        solution=[write_file(path="hello.txt", content="Hello, container!\n")],
        tags=["files", "easy"],
    ),
    Task(
        id="system-file",
        description="Write the line 'welcome to crabray' to /etc/motd (replace what is there).",
        evaluator=file_equals(path="/etc/motd", content="welcome to crabray"),
        solution=[run_command(command="echo 'welcome to crabray' > /etc/motd")],
        tags=["shell", "easy"],
    ),
    Task(
        id="sorted-names",
        description=(
            "Write the names alice, carol and bob to names.txt, one per line, "
            "sorted alphabetically."
        ),
        evaluator=file_equals(path="names.txt", content="alice\nbob\ncarol"),
        solution=[run_command(command="printf 'carol\\nalice\\nbob\\n' | sort > names.txt")],
        tags=["shell", "easy"],
    ),
    Task(
        id="checksum",
        description=(
            "Write the MD5 checksum (the 32 hex digits only) of data.txt to checksum.txt."
        ),
        setup=[write_file(path="data.txt", content=PAYLOAD)],
        evaluator=file_equals(path="checksum.txt", content=PAYLOAD_MD5),
        solution=[run_command(command="md5sum data.txt | cut -d' ' -f1 > checksum.txt")],
        tags=["shell", "files"],
    ),
    Task(
        id="clean-up",
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
        id="sum-stages",
        description=(
            "Create numbers.txt with the integers 1 to 10, one per line; then write their sum "
            "to sum.txt; then create done.flag."
        ),
        evaluator=_stages(
            command_output_contains(command="wc -l < numbers.txt", text="10"),
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
        id="interfaces",
        description=(
            "Find out which network interfaces this machine has and submit their names, "
            "separated by single spaces, sorted."
        ),
        evaluator=submission_equals(expected="lo"),
        extra_actions=[submit],
        solution=[run_command(command="ls /sys/class/net"), submit(content="lo")],
        tags=["shell", "submit"],
    ),
    Task(
        id="deploy-config",
        description=(
            "On box, write settings.ini containing 'mode=production'. Then put a copy with the "
            "same content on target as deploy/settings.ini, and on target create deploy/READY."
        ),
        environments=["box", "target"],
        evaluator=_stages(
            file_contains(path="settings.ini", text="mode=production").on("box"),
            file_contains(path="deploy/settings.ini", text="mode=production").on("target"),
            path_exists(path="deploy/READY").on("target"),
        ),
        solution=[
            write_file(path="settings.ini", content="mode=production\n").on("box"),
            write_file(path="deploy/settings.ini", content="mode=production\n").on("target"),
            run_command(command="touch deploy/READY").on("target"),
        ],
        tags=["multienv", "graph"],
    ),
]

docker_demo = BenchmarkConfig(
    name="docker_demo",
    tasks=TASKS,
    environments=[BOX, TARGET],
    default_env="box",
    step_limit=15,
)
