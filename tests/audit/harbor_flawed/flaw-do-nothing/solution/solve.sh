#!/bin/bash
set -e
rm -f /app/core.dump
