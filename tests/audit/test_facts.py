"""What the audit reads of a task before probing it: answers, answer files, options, solution."""

from __future__ import annotations

from crabray import Task
from crabray.actions import (
    command_succeeds,
    file_contains,
    file_equals,
    path_exists,
    run_command,
    submission_equals,
    submit,
    write_file,
)
from crabray.audit.facts import task_facts


def test_expected_values_are_secrets_unless_the_instruction_states_them() -> None:
    task = Task(
        id="t",
        description="Write the release code to code.txt; it starts with 'orchid'.",
        evaluator=file_equals(path="code.txt", content="orchid-7731-tango")
        & file_contains(path="code.txt", text="orchid"),
        solution=[write_file(path="code.txt", content="orchid-7731-tango\n")],
    )
    facts = task_facts(task)
    assert facts.secrets == ["orchid-7731-tango"]
    assert facts.files == ["code.txt"]
    assert not facts.answer_stated


def test_a_file_whose_existence_is_the_task_is_no_answer_file() -> None:
    task = Task(
        id="t",
        description="Create the directory logs/2026 and an empty file logs/2026/.keep.",
        evaluator=path_exists(path="logs/2026/.keep") & command_succeeds(command="test -d logs"),
        solution=[run_command(command="mkdir -p logs/2026 && touch logs/2026/.keep")],
    )
    facts = task_facts(task)
    assert facts.files == [] and facts.secrets == []
    assert facts.solution_script == "mkdir -p logs/2026 && touch logs/2026/.keep"


def test_an_answer_the_instruction_gives_is_stated_and_short_values_are_no_secrets() -> None:
    task = Task(
        id="t",
        description="Write 42 to answer.txt.",
        evaluator=file_equals(path="answer.txt", content="42"),
        solution=[write_file(path="answer.txt", content="42\n")],
    )
    facts = task_facts(task)
    assert facts.answer_stated and facts.secrets == []
    assert facts.solution_script == "printf '%s' '42\n' > answer.txt"


def test_lettered_options_inline_or_one_per_line_and_yes_no() -> None:
    inline = Task(
        id="t",
        description="Which planet is largest? (A) Mars (B) Jupiter (C) Venus",
        evaluator=submission_equals(expected="B"),
        solution=[submit(content="B")],
    )
    assert task_facts(inline).options == ["A", "Mars", "B", "Jupiter", "C", "Venus"]
    assert task_facts(inline).answer_stated
    lines = Task(
        id="t",
        description="Pick one:\nA. red\nB. green\nIs it sorted? Answer yes or no.",
        evaluator=submission_equals(expected="green"),
    )
    assert task_facts(lines).options == ["A", "red", "B", "green", "yes", "no"]
    single = Task(
        id="t",
        description="Write 'mode=production' to settings.ini.",
        evaluator=file_contains(path="settings.ini", text="mode=production"),
    )
    assert task_facts(single).options == []
