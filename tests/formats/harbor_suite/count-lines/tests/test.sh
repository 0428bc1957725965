#!/bin/bash
# Harbor-style verifier: a Python check beside this script writes reward.json.
mkdir -p /logs/verifier
python3 "$(dirname "$0")/check_count.py"
