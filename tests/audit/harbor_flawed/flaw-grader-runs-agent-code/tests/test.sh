#!/bin/bash
# Harbor-style verifier: the reward goes to /logs/verifier/reward.txt.
mkdir -p /logs/verifier
if sh /app/check.sh; then echo 1 > /logs/verifier/reward.txt; else echo 0 > /logs/verifier/reward.txt; fi
exit 0
