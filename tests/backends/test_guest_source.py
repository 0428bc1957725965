"""How a plain function travels to a guest: as source text, with what it reads from its module."""

from __future__ import annotations

import pickle

import pytest

from crabray import action
from crabray.backends.guest import GuestCallError, python_call
from crabray.backends.guest._source import function_units
from crabray.core.errors import ActionError
from tests.backends.guest_fixtures.seed_actions import check_file_exist, divide


def test_the_source_drops_decorators_and_keeps_line_numbers() -> None:
    *helpers, (filename, first_line, text) = function_units(divide.entry)
    assert filename.endswith("seed_actions.py")
    assert text.startswith("def divide(a: int, b: int) -> float:")
    with open(filename) as handle:
        assert handle.read().splitlines()[first_line - 1] == "def divide(a: int, b: int) -> float:"
    assert any("def _ratio" in unit[2] for unit in helpers)  # a same-module helper travels


def test_modules_it_uses_become_imports_and_arguments_json() -> None:
    call = python_call(check_file_exist, {"file_path": "made.txt"})
    assert any(unit[2] == "import os\n" for unit in call.units)
    assert call.arguments_json == '{"file_path": "made.txt"}'
    assert call.function == "check_file_exist"


def test_a_function_without_source_is_refused_with_the_way_out() -> None:
    namespace: dict[str, object] = {}
    exec("def made_up(x: int) -> int:\n    return x\n", namespace)
    built = action(namespace["made_up"])  # type: ignore[arg-type]
    with pytest.raises(ActionError, match=r"source of .*made_up.* is unavailable.*'env'"):
        python_call(built, {"x": 1})


def test_a_guest_error_survives_pickling_between_processes() -> None:
    error = GuestCallError("boom", error_type="ZeroDivisionError", guest_traceback="tb")
    copy = pickle.loads(pickle.dumps(error))
    assert (str(copy), copy.error_type, copy.guest_traceback) == ("boom", "ZeroDivisionError", "tb")
