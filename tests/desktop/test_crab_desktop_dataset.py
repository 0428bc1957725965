"""A composed-task dataset in crab-benchmark-v0's layout, end to end on crabray/crab-desktop.

``tests/desktop/crab_ubuntu`` is a ``crab-dataset`` suite: SubTask templates
in a module, task JSON files composing them, and a BenchmarkConfig putting
the ``ubuntu`` environment on the docker backend with the crab-desktop image.
The scripted solutions drive the desktop as an agent would, with CRAB's
Ubuntu actions (``search_application``, ``key_press``, ``write_text``,
``press_hotkey``): one edits a file with vim in xterm, one writes and saves a
document in LibreOffice Writer, one exports a new image from GIMP. Their
evaluator graphs run inside the container, after every step.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from crabray.core.images import png_size
from crabray.results import read_episodes, read_steps
from tests.conftest import ROOT, crabray

pytestmark = [pytest.mark.ray, pytest.mark.slow]

DATASET = ROOT / "tests" / "desktop" / "crab_ubuntu"


def test_oracle_passes_the_vim_writer_and_gimp_tasks_and_noop_passes_none(
    crab_desktop_image: str, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    done = crabray(
        "run", str(DATASET), "--agent", "oracle", "--agent", "noop", "--out", str(out),
        timeout=1500,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    everything = read_episodes(out)
    table = everything[["agent", "task_id", "score", "termination_reason", "completeness", "error"]]
    episodes = everything.set_index(["agent", "task_id"])
    oracle, noop = episodes.loc["oracle"], episodes.loc["noop"]
    assert sorted(oracle.index) == ["gimp-canvas", "vim-poem", "writer-report"]
    assert oracle.success.all() and (oracle.score == 1.0).all(), table.to_string()
    assert not noop.success.any() and (noop.score == 0.0).all(), table.to_string()
    assert (noop.completeness == 0.0).all(), "doing nothing opens no terminal, Writer or GIMP"
    steps = read_steps(out)
    vim = steps[(steps.agent == "oracle") & (steps.task_id == "vim-poem")]
    trace = vim[["action", "graph_passed", "error"]].to_string()
    # The graph's nodes pass in order: xterm focused, vim running, vim closed + the file written.
    assert [list(p) for p in vim.graph_passed][-1] == [0, 1, 2, 3], trace
    assert any(list(p) == [0, 1] for p in vim.graph_passed), f"vim was seen running:\n{trace}"
    for relative in steps[steps.agent == "oracle"].screenshot_path:
        assert png_size((out / relative).read_bytes()) == (1024, 768), "CRAB's mss screenshot"


CRAB_V0 = ROOT / "tests" / "crab_dataset" / "crab_v0"


def test_a_dataset_without_benchmark_py_runs_its_ubuntu_tasks_on_crab_desktop(
    crab_desktop_image: str, tmp_path: Path
) -> None:
    """crab-benchmark-v0's layout, no ``benchmark.py``: ``ubuntu`` is CRAB's Ubuntu environment
    on the crab-desktop image, the evaluators run in the container and noop scores 0; the
    Android and cross-platform tasks are skipped, and the run says so."""
    out = tmp_path / "out"
    done = crabray("run", str(CRAB_V0), "--agent", "noop", "--out", str(out), timeout=1200)
    assert done.returncode == 0, done.stdout + done.stderr
    said = " ".join((done.stdout + done.stderr).split())
    assert "skipping 2 tasks this installation cannot run: 2 (open-maps, maps-then-note)" in said
    episodes = read_episodes(out)
    table = episodes[["agent", "task_id", "score", "termination_reason", "error"]].to_string()
    assert sorted(episodes.task_id) == ["note-created", "note-written"], table
    assert episodes.score.tolist() == [0.0, 0.0], table
    assert episodes.error.isna().all(), table
    for relative in read_steps(out).screenshot_path.dropna():
        assert png_size((out / relative).read_bytes()) > (0, 0), "a desktop screenshot"
