"""The sandbox-side ``scoring`` module of the task-folder format: checkpoints and strategies.

The module runs inside task containers without crabray, so it is loaded here
by path, the way ``eval.py`` imports it from ``/utils``.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

UTILS = Path(__file__).resolve().parents[2] / "crabray" / "formats" / "task_folder" / "utils"


@pytest.fixture(scope="module")
def scoring() -> ModuleType:
    spec = importlib.util.spec_from_file_location("task_folder_scoring", UTILS / "scoring.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def cps(scoring: ModuleType, *pairs: tuple[int, int]) -> list:
    return [scoring.Checkpoint(total, result) for total, result in pairs]


def test_checkpoint_rejects_invalid_points(scoring: ModuleType) -> None:
    with pytest.raises(ValueError, match="result 3 is greater than its total 2"):
        scoring.Checkpoint(2, 3)
    with pytest.raises(ValueError, match="result must not be negative, got -1"):
        scoring.Checkpoint(1, -1)
    with pytest.raises(ValueError, match="total must not be negative, got -2"):
        scoring.Checkpoint(-2, 0)
    with pytest.raises(ValueError, match=r"result must be an int, got float 0\.5"):
        scoring.Checkpoint(1, 0.5)
    with pytest.raises(TypeError, match=r"total must be an int, got str '1'"):
        scoring.Checkpoint("1", 0)
    assert issubclass(scoring.CheckpointError, ValueError)
    assert scoring.Checkpoint(2, 2).complete and not scoring.Checkpoint(2, 1).complete


def test_checkpoint_takes_bools_as_the_original_does(scoring: ModuleType) -> None:
    """TheAgentCompany's evaluators write ``Checkpoint(1, int(passed))`` and also
    ``Checkpoint(1, passed)``; its scoring accepts the bool (an int subclass)."""
    passed, failed = scoring.Checkpoint(1, True), scoring.Checkpoint(True, False)
    assert (passed.total, passed.result, failed.total, failed.result) == (1, 1, 1, 0)
    result = scoring.Result([passed, failed], scoring.bonus_for_completing_final)
    assert result.to_dict()["checkpoints"] == [{"total": 1, "result": 1}, {"total": 1, "result": 0}]
    assert result.final_score == {"total": 2, "result": 1}
    with pytest.raises(ValueError, match="result 1 is greater than its total 0"):
        scoring.Checkpoint(False, True)


def test_default_strategy_sums(scoring: ModuleType) -> None:
    result = scoring.Result(cps(scoring, (1, 1), (2, 0), (3, 2)))
    assert result.final_score == {"total": 6, "result": 3}
    assert scoring.Result([]).final_score == {"total": 0, "result": 0}


def test_result_sees_checkpoints_appended_after_construction(scoring: ModuleType) -> None:
    """The seed's evaluators build Result(checkpoints, ...) first, then append."""
    checkpoints: list = []
    result = scoring.Result(checkpoints, scoring.bonus_for_completing_final)
    checkpoints.append(scoring.Checkpoint(1, 0))
    checkpoints.append(scoring.Checkpoint(2, 2))
    assert result.final_score == {"total": 3, "result": 3}


def test_to_dict_and_from_dict_round_trip(scoring: ModuleType) -> None:
    result = scoring.Result(cps(scoring, (1, 0), (2, 2)), scoring.bonus_for_completing_final)
    data = result.to_dict()
    assert data == {
        "checkpoints": [{"total": 1, "result": 0}, {"total": 2, "result": 2}],
        "final_score": {"total": 3, "result": 3},
    }
    assert scoring.Result.from_dict(data).final_score == {"total": 3, "result": 2}
    again = scoring.Result.from_dict(data, scoring.bonus_for_completing_final)
    assert again.to_dict() == data


def test_from_dict_rejects_bad_documents(scoring: ModuleType) -> None:
    with pytest.raises(ValueError, match="needs a dict with a 'checkpoints' list"):
        scoring.Result.from_dict({"final_score": {}})
    with pytest.raises(
        ValueError, match="checkpoint 2 must be an object with 'total' and 'result'"
    ):
        scoring.Result.from_dict({"checkpoints": [{"total": 1, "result": 1}, [1, 1]]})
    with pytest.raises(ValueError, match="result 2 is greater than its total 1"):
        scoring.Result.from_dict({"checkpoints": [{"total": 1, "result": 2}]})


@pytest.mark.parametrize("name", ["bonus_for_completing_final", "bonus_for_completing_all"])
def test_bonus_for_completing_final_and_its_alias(scoring: ModuleType, name: str) -> None:
    strategy = getattr(scoring, name)
    # Last checkpoint complete: everything counts as earned.
    assert strategy(cps(scoring, (1, 0), (2, 0), (2, 2))) == {"total": 5, "result": 5}
    # Last one incomplete: plain sum, even with earlier checkpoints complete.
    assert strategy(cps(scoring, (1, 1), (2, 2), (2, 1))) == {"total": 5, "result": 4}
    assert strategy(cps(scoring, (1, 0), (1, 0))) == {"total": 2, "result": 0}
    assert strategy([]) == {"total": 0, "result": 0}


def test_alias_is_the_same_function(scoring: ModuleType) -> None:
    assert scoring.bonus_for_completing_all is scoring.bonus_for_completing_final


def test_bonus_for_completing_any(scoring: ModuleType) -> None:
    strategy = scoring.bonus_for_completing_any
    # A later complete checkpoint gives the first one full credit, nothing else.
    assert strategy(cps(scoring, (2, 0), (1, 1), (3, 1))) == {"total": 6, "result": 4}
    # The first one complete by itself: plain sum.
    assert strategy(cps(scoring, (2, 2), (1, 0))) == {"total": 3, "result": 2}
    # None complete (partial points only): plain sum.
    assert strategy(cps(scoring, (2, 1), (3, 2))) == {"total": 5, "result": 3}
    assert strategy([]) == {"total": 0, "result": 0}


def test_bonus_for_completing_any_of_given_checkpoints(scoring: ModuleType) -> None:
    strategy = scoring.bonus_for_completing_any_of_given_checkpoints([2, 3])
    # Checkpoint 3 (1-based) is complete: the first one gets full credit.
    assert strategy(cps(scoring, (1, 0), (1, 0), (2, 2), (1, 0))) == {"total": 5, "result": 3}
    # Only checkpoint 4, which is not given, is complete: plain sum.
    assert strategy(cps(scoring, (1, 0), (1, 0), (2, 1), (1, 1))) == {"total": 5, "result": 2}
    assert strategy([]) == {"total": 0, "result": 0}


def test_any_of_given_checkpoints_rejects_bad_indices(scoring: ModuleType) -> None:
    with pytest.raises(ValueError, match="1-based checkpoint indices, got 0"):
        scoring.bonus_for_completing_any_of_given_checkpoints([0])
    strategy = scoring.bonus_for_completing_any_of_given_checkpoints([1, 4])
    with pytest.raises(ValueError, match="index 4 is out of range, the result has 2 checkpoint"):
        strategy(cps(scoring, (1, 0), (1, 1)))
