#!/usr/bin/env bash
# Build the image crabray/jupyter:latest (see the Dockerfile beside this
# script): crabray/debian plus what the GUI-OS benchmark's VM provides to a
# task's init.sh: /home/user/Desktop, the shared folder /mnt/container,
# ~/Desktop/.action-env made with uv holding Jupyter, the Jupyter kernel
# gateway, ipykernel, numpy, pandas, matplotlib, seaborn, scipy and
# scikit-learn. The wheels come from PyPI once, with pip on the host, into
# ~/.cache/crabray/wheels/jupyter ($CRABRAY_CACHE_DIR); the image build itself
# has no network.
#
# Needs: docker, pip on the host (Python 3.11 wheels, as crabray/debian's).
# Environment: CRABRAY_IMAGE overrides the image name.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
image="${CRABRAY_IMAGE:-crabray/jupyter:latest}"
cache="${CRABRAY_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/crabray}/wheels/jupyter"
packages=(uv jupyter jupyter_kernel_gateway ipykernel numpy pandas matplotlib seaborn scipy scikit-learn)
mkdir -p "$cache"
if [ ! -f "$cache/.complete" ]; then
  echo "downloading the wheels of ${packages[*]} into $cache ..."
  python3 -m pip download --quiet --only-binary=:all: --python-version 3.11 \
    --platform manylinux2014_x86_64 --platform manylinux_2_17_x86_64 \
    --platform manylinux_2_28_x86_64 --platform any -d "$cache" "${packages[@]}"
  touch "$cache/.complete"
fi
context="$(mktemp -d "${TMPDIR:-/tmp}/crabray-jupyter.XXXXXX")"
trap 'rm -rf "$context"' EXIT
mkdir -p "$context/wheels"
cp "$cache"/*.whl "$context/wheels/"
cp "$here/Dockerfile" "$context/"
bash "$here/../debian/derive.sh" "$image" "$context"
