#!/bin/bash
set -e
echo hello > /app/out.txt
