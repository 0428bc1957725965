"""TheAgentCompany's task folders as published: their base image's names, bool
checkpoints, and a base image that does not exist (a setup error, not retried)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from crabray.formats import load_suite, resolve_suite
from crabray.formats.task_folder import CRABRAY_BASE_IMAGE
from crabray.results import read_episodes
from tests.backends.docker.dockerd import require_env_image
from tests.conftest import crabray
from tests.formats.conftest import write_task_folder

TAC_FROM = "FROM ghcr.io/li-boxuan/task-base-image:1.0.0\n"

BOOL_EVALUATOR = """\
from typing import List

from common import grader
from scoring import Checkpoint, Result


@grader
def grade_checkpoint1() -> bool:
    with open("/workspace/answer.txt") as handle:
        return handle.read().strip() == "hello"


def grade_checkpoints(trajectory="") -> Result:
    checkpoints: List[Checkpoint] = []
    passed = grade_checkpoint1()
    checkpoints.append(Checkpoint(1, passed))
    checkpoints.append(Checkpoint(True, passed))
    return Result(checkpoints)
"""


@pytest.mark.parametrize(
    "image",
    [
        "ghcr.io/li-boxuan/task-base-image:1.0.0",
        "ghcr.io/theagentcompany/task-base-image:1.0.0",
        "ghcr.io/theagentcompany/task-base-image:latest",
        "ghcr.io/li-boxuan/task-base-image",
    ],
)
def test_every_published_base_image_name_maps_to_task_base(tmp_path: Path, image: str) -> None:
    write_task_folder(tmp_path / "suite" / "t", files={"Dockerfile": f"FROM {image}\n"})
    suite = load_suite(resolve_suite(tmp_path / "suite"))
    entry = suite.entry("t")
    (env,) = entry.benchmark.task_environments(entry.task)
    assert env.backend_settings["base_image"] == CRABRAY_BASE_IMAGE


@pytest.mark.ray
@pytest.mark.slow
def test_bool_checkpoints_score_and_a_missing_base_image_stops_the_run_before_it_starts(
    tmp_path: Path,
) -> None:
    require_env_image("task-base")
    suite = tmp_path / "suite"
    write_task_folder(
        suite / "bools", files={"Dockerfile": TAC_FROM, "evaluator.py": BOOL_EVALUATOR}
    )
    write_task_folder(suite / "absent", files={"Dockerfile": "FROM example.org/absent:1\n"})
    out = tmp_path / "out"
    refused = crabray("run", str(suite), "--agent", "oracle", "--out", str(out), timeout=900)
    assert refused.returncode == 2, f"{refused.stdout}\n{refused.stderr}"
    assert "example.org/absent:1" in refused.stderr and "--base-image" in refused.stderr
    assert "task absent" in refused.stderr, "the preflight names the task that needs it"
    assert not (out / "episodes").exists(), "nothing ran"
    done = crabray(
        "run", str(suite), "--agent", "oracle", "--task", "bools", "--out", str(out), timeout=900
    )
    assert done.returncode == 0, f"{done.stdout}\n{done.stderr}"
    episodes = read_episodes(out)
    solved = next(episodes.itertuples())
    assert len(episodes) == 1
    assert (solved.termination_reason, solved.score) == ("agent_complete", 1.0), solved.error
    assert [(int(c["total"]), int(c["result"])) for c in solved.checkpoints] == [(1, 1), (1, 1)]


PY312_EVALUATOR = """\
from scoring import Checkpoint, Result


def grade_checkpoints(trajectory="") -> Result:
    names = {"who": "hello"}
    said = f"{names["who"]}"  # the same quotes inside: Python 3.12 and later only
    return Result([Checkpoint(1, int(said == "hello"))])
"""


@pytest.mark.slow
def test_evaluator_syntax_is_checked_with_the_images_python(tmp_path: Path) -> None:
    """The host's Python may be older than the image's: 3.12 syntax validates, a real
    syntax error is still reported (naming the image), and a Result grades in the image."""
    require_env_image("task-base")
    suite = tmp_path / "suite"
    write_task_folder(
        suite / "py312", files={"Dockerfile": TAC_FROM, "evaluator.py": PY312_EVALUATOR}
    )
    write_task_folder(
        suite / "broken",
        files={"Dockerfile": TAC_FROM, "evaluator.py": "def grade_checkpoints(:\n"},
    )
    done = crabray("tasks", "validate", str(suite))
    assert done.returncode == 2
    problems = [line for line in done.stderr.splitlines() if line.startswith("✗")]
    assert len(problems) == 1, done.stderr
    assert "broken/evaluator.py" in problems[0] and CRABRAY_BASE_IMAGE in problems[0]
    (suite / "broken" / "evaluator.py").unlink()
    (suite / "broken" / "evaluator.py").write_text(PY312_EVALUATOR.replace("def grade_", "def no_"))
    done = crabray("tasks", "validate", str(suite))
    assert "defines no grade_checkpoints" in done.stderr
    shutil.rmtree(suite / "broken")
    last = crabray("tasks", "grade", str(suite), "py312", timeout=900)
    assert last.returncode == 0, last.stderr
    assert last.stdout.strip().splitlines()[-1] == "score 1"


SLIDES_EVALUATOR = """\
import pandas, requests, openpyxl  # what TheAgentCompany's evaluators import most
from pptx import Presentation

from common import get_all_texts_from_slide
from scoring import Checkpoint, Result


def grade_checkpoints(trajectory="") -> Result:
    deck = Presentation("/workspace/deck.pptx")
    texts = [get_all_texts_from_slide(slide) for slide in deck.slides]
    return Result([Checkpoint(1, texts == ["quarterly report"])])
"""

MAKE_DECK = """\
from pptx import Presentation

deck = Presentation()
slide = deck.slides.add_slide(deck.slide_layouts[5])
slide.shapes.title.text = "{title}"
deck.save("/workspace/deck.pptx")
"""


@pytest.mark.slow
def test_evaluator_modules_and_slide_texts_in_the_image(tmp_path: Path) -> None:
    """python-pptx, pandas, requests, openpyxl import in task-base, and common's
    get_all_texts_from_slide reads a deck as the original does (lower-cased)."""
    require_env_image("task-base")
    suite = tmp_path / "suite"
    for name, title in (("right", "Quarterly Report"), ("wrong", "Draft")):
        write_task_folder(
            suite / name,
            files={
                "Dockerfile": TAC_FROM,
                "evaluator.py": SLIDES_EVALUATOR,
                "post_init.py": MAKE_DECK.format(title=title),
            },
        )
    for name, score in (("right", "score 1"), ("wrong", "score 0")):
        done = crabray("tasks", "grade", str(suite), name, timeout=900)
        assert done.returncode == 0, done.stderr
        assert done.stdout.strip().splitlines()[-1] == score, f"{done.stdout}\n{done.stderr}"
