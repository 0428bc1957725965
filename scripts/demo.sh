#!/usr/bin/env bash
# Set up (if needed) and run the demo suite end to end on local Ray:
# the oracle agent (replays reference solutions) and the do-nothing baseline.
# The run goes to the results root (results/, or $OUT), where `crabray
# leaderboard`, `crabray view` and `crabray runs list` find it with no path.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
OUT=${OUT:-results}
.venv/bin/crabray tasks validate tasks/demo
.venv/bin/crabray run tasks/demo --agent oracle --agent noop --out "$OUT"
