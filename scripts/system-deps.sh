#!/usr/bin/env bash
# Install the Debian packages crabray's tests drive for real: Chromium for the
# site and viewer browser tests. Safe to run again: it installs only what is
# missing. Needs root (or sudo); without it, it prints what to install and the
# tests that need those packages skip with the same hint (outside CI).
set -euo pipefail
packages=(chromium)
missing=()
for pkg in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
done
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi
if [ "$(id -u)" -eq 0 ]; then
  SUDO=""
elif command -v sudo >/dev/null 2>&1; then
  SUDO="sudo"
else
  echo "crabray tests need: apt-get install -y ${missing[*]} (run as root)" >&2
  exit 0
fi
echo "installing ${missing[*]} ..."
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
