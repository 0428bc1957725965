#!/usr/bin/env bash
# Build the image crabray/jupyter:latest (see the Dockerfile beside this
# script): crabray/debian plus what the GUI-OS benchmark's VM provides to a
# task's init.sh: /home/user/Desktop, the shared folder /mnt/container,
# ~/Desktop/.action-env made with uv holding Jupyter, the Jupyter kernel
# gateway, ipykernel, numpy, pandas, matplotlib, seaborn, scipy, scikit-learn
# and nltk (the union of what the 44 jupyter tasks' init.sh scripts install,
# torch aside), and `unzip`, which some of them run. The wheels come from PyPI
# once, with pip on the host, into ~/.cache/crabray/wheels/jupyter
# ($CRABRAY_CACHE_DIR); unzip is Debian's package, fetched with apt-get download
# (crabray/debian is the host's Debian release); the image build has no network.
#
# Needs: docker, apt-get, pip on the host (Python 3.11 wheels, as crabray/debian's).
# Environment: CRABRAY_IMAGE overrides the image name.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
image="${CRABRAY_IMAGE:-crabray/jupyter:latest}"
cache="${CRABRAY_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/crabray}/wheels/jupyter"
packages=(uv jupyter jupyter_kernel_gateway ipykernel numpy pandas matplotlib seaborn scipy
  scikit-learn nltk)
debs=(unzip)
mkdir -p "$cache"
marker="$cache/.complete-$(echo "${packages[*]}" | sha256sum | cut -c1-12)"
if [ ! -f "$marker" ]; then
  echo "downloading the wheels of ${packages[*]} into $cache ..."
  python3 -m pip download --quiet --only-binary=:all: --python-version 3.11 \
    --platform manylinux2014_x86_64 --platform manylinux_2_17_x86_64 \
    --platform manylinux_2_28_x86_64 --platform any -d "$cache" "${packages[@]}"
  touch "$marker"
fi
mkdir -p "$cache/debs"
for deb in "${debs[@]}"; do
  ls "$cache/debs/${deb}"_*.deb >/dev/null 2>&1 || (cd "$cache/debs" && apt-get download "$deb")
done
context="$(mktemp -d "${TMPDIR:-/tmp}/crabray-jupyter.XXXXXX")"
trap 'rm -rf "$context"' EXIT
mkdir -p "$context/wheels"
cp "$cache"/*.whl "$context/wheels/"
mkdir -p "$context/debs"
cp "$cache"/debs/*.deb "$context/debs/"
cp "$here/Dockerfile" "$here/gnome-terminal" "$context/"
bash "$here/../debian/derive.sh" "$image" "$context"
