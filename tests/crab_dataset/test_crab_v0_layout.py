"""crab-benchmark-v0's dataset folder as shipped: ``crab_v0/`` is written in its layout.

Subtask modules at the root with CRAB's own imports (``from crab import``), task files in
``ubuntu/``, ``android/`` and ``cross/``, and no ``benchmark.py``. The Android module imports
``crab.actions.android_actions``, which crabray does not have: the Android and cross-platform
tasks are unsupported (listed with the reason, never run); the Ubuntu ones get CRAB's Ubuntu
environment on the crab-desktop image.
"""

from __future__ import annotations

import sys
from pathlib import Path

from crabray.formats.crab_dataset import load
from tests.conftest import ROOT, crabray

DATASET = ROOT / "tests" / "crab_dataset" / "crab_v0"
UBUNTU = ["note-created", "note-written"]
UNSUPPORTED = {"open-maps", "maps-then-note"}


def _flat(text: str) -> str:
    return " ".join(text.split())


def test_the_folder_loads_with_android_tasks_unsupported_and_ubuntu_on_crab_desktop() -> None:
    suite = load(DATASET)
    assert suite.task_ids == UBUNTU
    assert set(suite.unsupported) == UNSUPPORTED
    assert all("'android' environment" in r for r in suite.unsupported.values())
    (ubuntu,) = suite.entry("note-written").benchmark.environments
    assert (ubuntu.name, ubuntu.backend) == ("ubuntu", "docker")
    assert ubuntu.backend_settings["build"] == "crab-desktop"
    assert "search_application" in {a.name for a in ubuntu.action_space}
    # The stand-ins for crab, crab.actions.android_actions and lxml are gone again.
    assert not any(n == "crab" or n.startswith(("crab.", "lxml")) for n in sys.modules)
    assert not hasattr(sys.modules["crabray.actions"], "android_actions")


def test_validate_passes_and_names_the_unsupported_tasks_and_why() -> None:
    done = crabray("tasks", "validate", str(DATASET))
    assert done.returncode == 0, done.stdout + done.stderr
    shown = _flat(done.stdout)
    assert "2 tasks in" in shown and "are valid" in shown
    assert "unsupported 2 (open-maps, maps-then-note): uses CRAB's 'android' environment" in shown
    assert "crabray has no backend for (listed, not run)" in shown


def test_list_shows_the_ubuntu_tasks_and_the_unsupported_ones() -> None:
    done = crabray("tasks", "list", str(DATASET), check=True)
    shown = _flat(done.stdout)
    assert all(task in shown for task in UBUNTU)
    assert "unsupported 2 (open-maps, maps-then-note)" in shown


def test_asking_to_run_an_unsupported_task_is_an_error_naming_the_reason(tmp_path: Path) -> None:
    done = crabray(
        "run", str(DATASET), "--agent", "noop", "--task", "open-maps", "--out", str(tmp_path)
    )
    assert done.returncode == 2, done.stdout + done.stderr
    said = _flat(done.stdout + done.stderr)
    assert "cannot run the task(s) asked for: 1 (open-maps)" in said
    assert "'android' environment" in said
    assert not list(tmp_path.iterdir()), "nothing is recorded for a refused run"


def test_crab_names_are_crabray_modules_which_keep_their_own_spec() -> None:
    """``crab.actions`` (imported on the way to android_actions) is crabray's, not a copy."""
    import crabray.actions

    load(DATASET)
    assert crabray.actions.__spec__ is not None
    assert crabray.actions.__spec__.name == "crabray.actions"
    assert crabray.actions.__spec__.loader is not None
    assert "_CrabAlias" not in type(crabray.actions.__spec__.loader).__name__
