"""Tasks with known flaws, and clean ones beside them, for ``crabray audit``'s tests.

Every task's reference solution is right; what differs is how the task can be
passed without doing it. The ids say which flaw each one has.
"""

from __future__ import annotations

import os
from pathlib import Path

from crabray import BenchmarkConfig, EnvironmentConfig, Task, evaluator
from crabray.actions import (
    FILE_ACTIONS,
    SHELL_ACTIONS,
    command_succeeds,
    file_equals,
    path_exists,
    run_command,
    submit,
    write_file,
)

CODE = "orchid-7731-tango"
"""An answer the agent cannot know: a release code only the grader has."""


@evaluator(local=True)
def warmed_up(path: str) -> bool:
    """Fails its first two grades, then passes: counted in a file of the harness's (``local``
    runs it there, not in the sandbox). Graded twice per episode, run one at a time,
    the first oracle episode fails and the others pass."""
    counter = Path(path)
    count = int(counter.read_text()) + 1 if counter.exists() else 1
    counter.write_text(str(count))
    return count > 2


@evaluator(require_submit=True, local=True)
def mentions_b(submission: str) -> bool:
    """A sloppy check: the answer B anywhere in the submission."""
    return "B" in submission.upper()


COUNTER = os.environ.get("FLAWED_SUITE_COUNTER", str(Path(__file__).with_name(".tally")))

WORKSTATION = EnvironmentConfig(
    name="workstation",
    backend="local",
    description="A Linux shell in a scratch working directory.",
    action_space=[*SHELL_ACTIONS, *FILE_ACTIONS],
)

TASKS = [
    Task(
        id="clean-reverse",
        description="Write the word 'stressed' spelled backwards to out.txt.",
        evaluator=file_equals(path="out.txt", content="desserts"),
        solution=[write_file(path="out.txt", content="desserts\n")],
    ),
    Task(
        id="clean-release-code",
        description="Write the release code printed by ./release.sh to code.txt.",
        setup=[write_file(path="release.sh", content="echo orchid-$((7000 + 731))-tango\n")],
        evaluator=file_equals(path="code.txt", content=CODE),
        solution=[run_command(command="sh release.sh > code.txt")],
    ),
    Task(
        id="flaw-do-nothing",
        description="Make sure no file named error.log is in the working directory.",
        evaluator=~path_exists(path="error.log"),
        solution=[run_command(command="rm -f error.log")],
    ),
    Task(
        id="flaw-answer-visible",
        description="Write the release code of the current build to code.txt.",
        setup=[write_file(path=".cache/build/expected.txt", content=CODE + "\n")],
        evaluator=file_equals(path="code.txt", content=CODE),
        solution=[write_file(path="code.txt", content=CODE + "\n")],
    ),
    Task(
        id="flaw-grader-runs-agent-code",
        description="Write the word ready to status.txt.",
        setup=[write_file(path="check.sh", content="grep -qx ready status.txt\n")],
        evaluator=command_succeeds(command="sh check.sh"),
        solution=[write_file(path="status.txt", content="ready\n")],
    ),
    Task(
        id="flaw-flaky-evaluator",
        description="Write the word done to done.txt.",
        evaluator=file_equals(path="done.txt", content="done") & warmed_up(path=COUNTER),
        solution=[write_file(path="done.txt", content="done\n")],
    ),
    Task(
        id="flaw-trivial-submission",
        description="Answer: which planet is largest? (A) Mars (B) Jupiter (C) Venus",
        evaluator=mentions_b(),
        solution=[submit(content="B")],
    ),
]

flawed = BenchmarkConfig(
    name="flawed",
    description="Known-flawed tasks beside clean ones (crabray audit's tests).",
    tasks=TASKS,
    environments=[WORKSTATION],
)
