"""Writes /logs/verifier/reward.json: reward 1.0 when /app/count.txt holds the line count."""

import json
import os
from pathlib import Path

expected = os.environ["EXPECTED_LINES"]
try:
    found = Path("/app/count.txt").read_text().strip()
except OSError:
    found = None
reward = 1.0 if found == expected else 0.0
print(f"expected {expected}, found {found!r}")
Path("/logs/verifier/reward.json").write_text(json.dumps({"reward": reward, "lines_ok": reward}))
