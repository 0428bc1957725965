#!/usr/bin/env bash
# Build an image from a Dockerfile that derives from crabray/debian with local
# steps only (no registry, no package mirror, no network): what
# envs/task-base/build.sh and envs/desktop/build.sh run.
#
# Usage: derive.sh IMAGE CONTEXT_DIR [DOCKER_BUILD_OPTION...]
# Builds crabray/debian first when it is missing (envs/debian/build.sh: needs
# root and debootstrap), under the same lock `crabray envs build debian` takes.
# Environment: BASE_IMAGE replaces crabray/debian:latest (the Dockerfile's ARG).
set -euo pipefail

image="$1"
context="$2"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
base="${BASE_IMAGE:-crabray/debian:latest}"

command -v docker >/dev/null 2>&1 ||
  { echo "error: the docker command is missing; install it with: apt-get install docker.io" >&2; exit 1; }

if ! docker image inspect "$base" >/dev/null 2>&1; then
  if [ "$base" != "crabray/debian:latest" ]; then
    echo "error: the base image $base (BASE_IMAGE) does not exist on this engine" >&2
    exit 1
  fi
  echo "$base is missing: building it first with $here/build.sh ..."
  flock "${TMPDIR:-/tmp}/crabray-envs-build-debian.lock" bash -c \
    'docker image inspect "$1" >/dev/null 2>&1 || CRABRAY_IMAGE="$1" bash "$2"' \
    _ "$base" "$here/build.sh"
fi

started=$SECONDS
previous="$(docker image inspect -f '{{.Id}}' "$image" 2>/dev/null || true)"
echo "building $image from $base ..."
# The classic builder: BuildKit may be missing (Debian's docker.io has no buildx).
DOCKER_BUILDKIT=0 docker build --network none --build-arg "BASE_IMAGE=$base" \
  -t "$image" -f "$context/Dockerfile" "${@:3}" "$context"
# The image it replaces would linger untagged; drop it unless a container still uses it.
if [ -n "$previous" ] && [ "$previous" != "$(docker image inspect -f '{{.Id}}' "$image")" ]; then
  docker rmi "$previous" >/dev/null 2>&1 || true
fi
echo "built $image in $((SECONDS - started)) s"
