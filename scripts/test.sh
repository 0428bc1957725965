#!/usr/bin/env bash
# Set up (if needed) and run the whole test suite, with the lint checks CI applies
# (ruff, lint-imports for the layer contract and mypy, configured in pyproject.toml).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/system-deps.sh
.venv/bin/ruff check .
.venv/bin/ruff format --check .
.venv/bin/lint-imports
# Types: --strict over the whole crabray package (pyproject.toml: strict = true).
.venv/bin/mypy
.venv/bin/python -m pytest "$@"
