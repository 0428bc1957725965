#!/usr/bin/env bash
# Set up a fresh machine for crabray: a virtual environment in .venv with
# crabray installed (editable) from pyproject.toml.
#   bash scripts/setup.sh        the development install: every extra, the test,
#                                lint and type-checking tools (what CI uses)
#   SETUP=user bash scripts/setup.sh
#                                the user install: crabray and its viewer (the
#                                `site` extra), what running suites needs; the demo uses it
# Nothing is reinstalled when pyproject.toml has not changed since the last
# setup (a stamp in .venv keyed by its hash and the install; a development
# install serves a user one too); FORCE=1 reinstalls anyway.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
SETUP=${SETUP:-dev}
case "$SETUP" in
  dev) EXTRAS='.[dev]' ;;
  user) EXTRAS='.[site]' ;;
  *) echo "SETUP must be dev or user, not '$SETUP'" >&2; exit 2 ;;
esac
if [ ! -x .venv/bin/python ]; then
  "$PYTHON" -m venv .venv
fi
STAMP=.venv/.crabray-setup
HASH=$(sha256sum pyproject.toml | cut -d' ' -f1)
if [ "${FORCE:-0}" != 1 ] && [ -f "$STAMP" ] \
  && .venv/bin/python -c 'import crabray' 2>/dev/null; then
  read -r HAVE_HASH HAVE_SETUP < "$STAMP" || true
  if [ "$HAVE_HASH" = "$HASH" ] && { [ "${HAVE_SETUP:-dev}" = "$SETUP" ] || [ "${HAVE_SETUP:-dev}" = dev ]; }; then
    echo "crabray is up to date in .venv ($(.venv/bin/python --version), ${HAVE_SETUP:-dev} install)"
    exit 0
  fi
fi
.venv/bin/python -m pip install --quiet --upgrade pip
.venv/bin/python -m pip install --quiet -e "$EXTRAS"
echo "$HASH $SETUP" > "$STAMP"
echo "crabray is installed in .venv ($(.venv/bin/python --version), $SETUP install)"
