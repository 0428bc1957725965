#!/bin/bash
# Harbor-style verifier: the reward goes to /logs/verifier/reward.txt.
mkdir -p /logs/verifier
if [ "$(cat /app/out.txt 2>/dev/null)" = "hello" ]; then
  echo "PASS: /app/out.txt holds hello"
  echo 1 > /logs/verifier/reward.txt
else
  echo "FAIL: /app/out.txt does not hold hello"
  echo 0 > /logs/verifier/reward.txt
fi
exit 0
