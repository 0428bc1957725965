#!/usr/bin/env bash
# Set up (if needed) and run the demo suite end to end on local Ray:
# the oracle agent (replays reference solutions) and the do-nothing baseline;
# the run ends with their leaderboard. The run goes to the results root (results/, or $OUT),
# where `crabray leaderboard`, `crabray view` and `crabray runs list` find it
# with no path. Sets up the user install (SETUP=user scripts/setup.sh) unless
# a development install is there already.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v bwrap >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "installing bubblewrap, the sandbox of the local backend ..."
    apt-get install -y -qq bubblewrap >/dev/null 2>&1 \
      || { apt-get update -qq && apt-get install -y -qq bubblewrap >/dev/null; }
  else
    echo "the demo's sandboxes need bubblewrap (bwrap), which is not installed; run:" >&2
    echo "  sudo apt-get install bubblewrap      # Debian, Ubuntu" >&2
    echo "  sudo dnf install bubblewrap          # Fedora" >&2
    echo "then run this script again" >&2
    exit 1
  fi
fi
SETUP=user bash scripts/setup.sh
OUT=${OUT:-results}
.venv/bin/crabray tasks validate tasks/demo
.venv/bin/crabray run tasks/demo --agent oracle --agent noop --out "$OUT"
