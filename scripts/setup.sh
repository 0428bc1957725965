#!/usr/bin/env bash
# Set up a fresh machine for crabray: a virtual environment in .venv with
# crabray and its development tools installed from pyproject.toml.
# Nothing is reinstalled when pyproject.toml has not changed since the last
# setup (a stamp in .venv keyed by its hash); FORCE=1 reinstalls anyway.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PYTHON" -m venv .venv
fi
STAMP=.venv/.crabray-setup
WANT=$(sha256sum pyproject.toml | cut -d' ' -f1)
if [ "${FORCE:-0}" != 1 ] && [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$WANT" ] \
  && .venv/bin/python -c 'import crabray' 2>/dev/null; then
  echo "crabray is up to date in .venv ($(.venv/bin/python --version))"
  exit 0
fi
.venv/bin/python -m pip install --quiet --upgrade pip
.venv/bin/python -m pip install --quiet -e '.[dev]'
echo "$WANT" > "$STAMP"
echo "crabray is installed in .venv ($(.venv/bin/python --version))"
