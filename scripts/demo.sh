#!/usr/bin/env bash
# Set up (if needed) and run the demo suite end to end on local Ray:
# the oracle agent (replays reference solutions) and the do-nothing baseline.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
OUT=${OUT:-results/demo-$(date -u +%Y%m%d-%H%M%S)}
.venv/bin/crabray tasks validate tasks/demo
.venv/bin/crabray run tasks/demo --agent oracle --agent noop --out "$OUT"
.venv/bin/crabray leaderboard "$OUT" --format md
