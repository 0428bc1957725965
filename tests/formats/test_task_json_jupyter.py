"""The ``jupyter`` snapshot on docker: an ``init.sh`` written for the GUI-OS VM (its
``~/.profile``, ``/mnt/container`` log, ``~/Desktop/.action-env`` with ``uv``, Jupyter
kernel registration, a background editor launch, the terminal it opens for the agent)
runs unchanged, and an ``eval.sh`` in the same style grades the kernel it registered."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.backends.docker.dockerd import require_env_image
from tests.conftest import crabray
from tests.formats.test_task_json import write_task

pytestmark = [pytest.mark.slow]

INIT_SH = """\
#!/bin/bash
set -euo pipefail
if [ -f "${HOME}/.profile" ]; then source "${HOME}/.profile"; fi
: "${TASK_SETUP_LOG:=task-setup.log}"
LOG_PATH="/mnt/container/$TASK_SETUP_LOG"
echo "" >"$LOG_PATH"
exec > >(tee -a "$LOG_PATH") 2>&1
cd "$HOME/Desktop"
if [ ! -d ".action-env/bin" ]; then echo "no .action-env"; exit 1; fi
source "$HOME/Desktop/.action-env/bin/activate"
uv pip install jupyter ipykernel pandas
python -m ipykernel install --user --name .action-env --display-name ".action-env"
export DISPLAY=":0"
nohup code . notebook.ipynb >> /mnt/container/editor.log 2>&1 &
gnome-terminal --working-directory=/home/user
gnome-terminal --working-directory=/home/user -- sh -c 'echo opened > /mnt/container/terminal.log'
echo "setup complete"
"""

EVAL_SH = """\
#!/bin/bash
set -euo pipefail
source "$HOME/Desktop/.action-env/bin/activate"
jupyter kernelspec list > "$HOME/eval.log" 2>&1
grep -q "setup complete" /mnt/container/task-setup.log && echo "SETUP-LOGGED" >> "$HOME/eval.log"
"""

NOTEBOOK = '{"cells": [], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}'


def kernel_task(root: Path) -> None:
    doc = {
        "instruction": "Open the notebook.",
        "snapshot": "jupyter",
        "config": [
            {
                "func": "upload_file_to_vm",
                "arguments": {
                    "local_path": "notebook.ipynb",
                    "remote_path": "/home/user/Desktop/notebook.ipynb",
                },
            },
            {
                "func": "upload_script_and_execute",
                "arguments": {"local_path": "init.sh", "remote_path": "/home/user/init.sh"},
            },
        ],
        "evaluation": {
            "func": "compare_script_logs",
            "arguments": {
                "eval_script": "eval.sh",
                "vm_eval_logs": "/home/user/eval.log",
                "rules": {"include": [".action-env", "SETUP-LOGGED"], "exclude": ["Error"]},
            },
        },
    }
    files = {"init.sh": INIT_SH, "eval.sh": EVAL_SH, "notebook.ipynb": NOTEBOOK}
    write_task(root, doc, tool="jupyter", task_id="kernel", files=files)


def test_a_vm_style_init_sh_runs_unchanged_in_the_jupyter_image(tmp_path: Path) -> None:
    require_env_image("jupyter")
    kernel_task(tmp_path)
    done = crabray("tasks", "grade", str(tmp_path), "kernel", "--backend", "docker", timeout=900)
    assert done.returncode == 0, f"{done.stdout}\n{done.stderr}"
    assert done.stdout.strip().splitlines()[-1] == "score 1", f"{done.stdout}\n{done.stderr}"


@pytest.mark.ray
def test_the_shared_folder_comes_back_as_artifacts(tmp_path: Path) -> None:
    require_env_image("jupyter")
    suite, out = tmp_path / "suite", tmp_path / "out"
    kernel_task(suite)
    # No --backend: a suite whose every snapshot has a docker image runs on docker.
    done = crabray("run", str(suite), "--agent", "noop", "--out", str(out), timeout=900)
    assert done.returncode == 0, f"{done.stdout}\n{done.stderr}"
    (log,) = out.glob("artifacts/*/*/mnt-container/task-setup.log")
    assert "setup complete" in log.read_text()
    (editor,) = out.glob("artifacts/*/*/mnt-container/editor.log")
    assert "code" in editor.read_text()  # nothing stands in for VS Code: its launch failed
    # The terminal stand-in ran the command the script gave it, in the background.
    (terminal,) = out.glob("artifacts/*/*/mnt-container/terminal.log")
    assert terminal.read_text() == "opened\n"
