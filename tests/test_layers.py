"""The layer contract: ``lint-imports`` with the contracts in ``pyproject.toml``.

CI runs it from ``scripts/test.sh``; this test runs it too, so that a developer
who runs only pytest sees a layer that imports one above it (or an import
cycle) before CI does.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def test_every_import_contract_is_kept() -> None:
    lint_imports = Path(sys.executable).parent / "lint-imports"
    if not lint_imports.exists():
        pytest.fail(f"{lint_imports} is missing: install the dev extra (bash scripts/setup.sh)")
    done = subprocess.run(
        [str(lint_imports)], cwd=ROOT, capture_output=True, text=True, timeout=300, check=False
    )
    assert done.returncode == 0, done.stdout + done.stderr
