#!/usr/bin/env bash
# Set up a fresh machine for crabray: a virtual environment in .venv with
# crabray and its development tools installed from pyproject.toml.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PYTHON" -m venv .venv
fi
.venv/bin/python -m pip install --quiet --upgrade pip
.venv/bin/python -m pip install --quiet -e '.[dev]'
echo "crabray is installed in .venv ($(.venv/bin/python --version))"
