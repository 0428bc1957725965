#!/usr/bin/env bash
# Build the image crabray/task-base:latest: what a task folder's Dockerfile
# builds on (its FROM ghcr.io/li-boxuan/task-base-image:1.0.0, or any other
# published name of TheAgentCompany's base image, is replaced by it).
#
# TheAgentCompany's base is python:3.12 with requests and more. This one is a
# Debian trixie root file system (Python 3.13, so evaluators written for 3.12
# parse) made by debootstrap from the mirror apt uses here, with the Debian
# packages of the third-party modules the 175 published evaluators import
# (requests, pandas, numpy, openpyxl, python-docx, odfpy, astor, Pillow,
# PyYAML, scikit-learn, BeautifulSoup, PyMuPDF, packaging, cryptography) and
# the tools its Dockerfile installs (ping, vim, git, curl), plus three pure
# Python wheels Debian does not package (python-pptx, PyPDF2, pdf2image),
# downloaded once from PyPI with pip and installed offline. Not included:
# torch, gremlin_python, litellm, sotopia, rocketchat_API (imported only by
# evaluators of tasks that need TheAgentCompany's services or an LLM SDK).
#
# Built once per machine: the image carries a label with the hash of its
# inputs (this script, the Dockerfile, the package list, the wheel pins), and
# a build whose inputs match the existing image does nothing (FORCE=1 rebuilds).
# The debootstrap download (~235 MB) is cached like envs/debian's.
#
# Needs: root and debootstrap (for the root file system), docker, pip (on the
# host, for the three wheels). Environment: CRABRAY_IMAGE overrides the image
# name; CRABRAY_CACHE_DIR the cache folder; FORCE=1 rebuilds.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
image="${CRABRAY_IMAGE:-crabray/task-base:latest}"
cache="${CRABRAY_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/crabray}"
suite=trixie
packages="python3 procps python3-pip python3-requests python3-cryptography python3-pandas
python3-numpy python3-odf python3-astor python3-pil python3-yaml python3-sklearn python3-bs4
python3-docx python3-openpyxl python3-fitz python3-packaging python3-lxml python3-xlsxwriter
python3-typing-extensions python3-cffi-backend poppler-utils iputils-ping vim git curl wget libgl1"
packages="$(echo $packages)"
wheels=(python-pptx==1.0.2 PyPDF2==3.0.1 pdf2image==1.17.0)

inputs="$(cat "$here/build.sh" "$here/Dockerfile"; echo "$suite $packages ${wheels[*]}")"
key="$(printf '%s' "$inputs" | sha256sum | cut -c1-12)"
if [ -z "${FORCE:-}" ] &&
  [ "$(docker image inspect -f '{{index .Config.Labels "crabray.inputs"}}' "$image" 2>/dev/null)" = "$key" ]; then
  echo "$image is up to date (inputs $key); FORCE=1 rebuilds it"
  exit 0
fi
started=$SECONDS

root="crabray/task-base-root:$key"
if ! docker image inspect "$root" >/dev/null 2>&1; then
  DEBIAN_SUITE="$suite" DEBIAN_PACKAGES="$packages" CRABRAY_IMAGE="$root" \
    bash "$here/../debian/build.sh"
fi

context="$(mktemp -d "${TMPDIR:-/tmp}/crabray-task-base.XXXXXX")"
trap 'rm -rf "$context"' EXIT
wheel_dir="$cache/wheels/task-base"
mkdir -p "$wheel_dir" "$context/wheels"
for pin in "${wheels[@]}"; do
  name="${pin%%==*}"; version="${pin##*==}"
  if ! ls "$wheel_dir" | grep -qiE "^${name//-/[-_]}-${version}-"; then
    python3 -m pip download --quiet --no-deps --only-binary=:all: -d "$wheel_dir" "$pin"
  fi
done
cp "$wheel_dir"/*.whl "$context/wheels/"
cp "$here/Dockerfile" "$context/"
BASE_IMAGE="$root" bash "$here/../debian/derive.sh" "$image" "$context" --label "crabray.inputs=$key"
echo "task-base: built in $((SECONDS - started)) s"
