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
# Types: default mode over crabray, strict on core and the public API (pyproject.toml).
.venv/bin/mypy
.venv/bin/python -m pytest "$@"
