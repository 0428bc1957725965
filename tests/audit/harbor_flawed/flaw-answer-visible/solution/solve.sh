#!/bin/bash
set -e
echo "tok-5521-violet-harbor" > /app/token.txt
