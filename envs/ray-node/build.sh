#!/usr/bin/env bash
# Build crabray/ray-node:latest: crabray/debian (bookworm, Python 3.11) with
# ray[default] at the version this checkout pins and crabray installed from a
# wheel built from this checkout. What tests/cluster_jobs/ starts as the head
# and worker machines of a two-node cluster on a docker network.
#
# Built once per machine and per crabray source: the image carries a label
# with the hash of its inputs (this script, the Dockerfile, the Ray version,
# crabray's sources), and a build whose inputs match does nothing (FORCE=1
# rebuilds). The dependency wheels are downloaded once from PyPI with pip into
# $CRABRAY_CACHE_DIR/wheels/ray-node-<hash> and installed offline.
#
# Needs: docker, python3 with pip on a Debian bookworm host (Python 3.11 and glibc 2.36,
# as the image's: the wheels pip picks here are the image's), and crabray/debian
# (envs/debian/build.sh builds it when missing: root and debootstrap).
# Environment: CRABRAY_IMAGE overrides the image name; PYTHON the python3 (with Ray)
# used to download wheels and build crabray's (default: the checkout's .venv, else
# python3); FORCE=1 rebuilds.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
image="${CRABRAY_IMAGE:-crabray/ray-node:latest}"
cache="${CRABRAY_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/crabray}"
python="${PYTHON:-python3}"
# The checkout's virtualenv (scripts/setup.sh) has Ray; a bare python3 may not.
if [ -z "${PYTHON:-}" ] && [ -x "$repo/.venv/bin/python" ]; then python="$repo/.venv/bin/python"; fi
ray_version="$("$python" -c 'import ray; print(ray.__version__)')"

sources="$(cd "$repo" && find crabray pyproject.toml -type f ! -name '*.pyc' | sort | xargs sha256sum)"
inputs="$(cat "$here/build.sh" "$here/Dockerfile"; echo "ray $ray_version"; echo "$sources")"
key="$(printf '%s' "$inputs" | sha256sum | cut -c1-12)"
if [ -z "${FORCE:-}" ] &&
  [ "$(docker image inspect -f '{{index .Config.Labels "crabray.inputs"}}' "$image" 2>/dev/null)" = "$key" ]; then
  echo "$image is up to date (inputs $key); FORCE=1 rebuilds it"
  exit 0
fi
started=$SECONDS
context="$(mktemp -d "${TMPDIR:-/tmp}/crabray-ray-node.XXXXXX")"
trap 'rm -rf "$context"' EXIT
mkdir -p "$context/crabray" "$context/deps"
"$python" -m pip wheel --quiet --no-deps -w "$context/crabray" "$repo"

# The dependencies: keyed by crabray's requirements and Ray's version only.
requirements="$("$python" - "$context"/crabray/*.whl "$ray_version" <<'PY'
import sys, zipfile
wheel, ray_version = sys.argv[1], sys.argv[2]
with zipfile.ZipFile(wheel) as z:
    meta = next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))
    lines = z.read(meta).decode().splitlines()
reqs = [l.split(":", 1)[1].strip() for l in lines if l.startswith("Requires-Dist:")]
reqs = [r for r in reqs if "extra ==" not in r and not r.startswith("ray")]
print("\n".join([f"ray[default]=={ray_version}", *reqs]))
PY
)"
deps_key="$(printf '%s' "$requirements" | sha256sum | cut -c1-12)"
deps="$cache/wheels/ray-node-$deps_key"
if [ ! -f "$deps/.complete" ]; then
  mkdir -p "$deps"
  printf '%s\n' "$requirements" >"$deps/requirements.txt"
  "$python" -m pip download --quiet -d "$deps" -r "$deps/requirements.txt"
  "$python" -m pip download --quiet --no-deps -d "$deps" pip
  touch "$deps/.complete"
fi
cp "$deps"/*.whl "$deps/requirements.txt" "$context/deps/"
cp "$here/Dockerfile" "$context/"
bash "$here/../debian/derive.sh" "$image" "$context" --label "crabray.inputs=$key"
echo "ray-node: built in $((SECONDS - started)) s"
