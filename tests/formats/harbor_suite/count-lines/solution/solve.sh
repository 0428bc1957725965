#!/bin/bash
set -e
bash "$(dirname "$0")/count.sh" > "$COUNT_FILE"
