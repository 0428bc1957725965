#!/bin/bash
# Harbor-style verifier: the reward goes to /logs/verifier/reward.txt.
mkdir -p /logs/verifier
if grep -qx 'tok-5521-violet-harbor' /app/token.txt 2>/dev/null; then echo 1 > /logs/verifier/reward.txt; else echo 0 > /logs/verifier/reward.txt; fi
exit 0
