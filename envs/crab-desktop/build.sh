#!/usr/bin/env bash
# Build the image crabray/crab-desktop:latest: a Debian desktop for CRAB's
# Ubuntu environment (crab-benchmark-v0), on which CRAB's desktop actions
# (pyautogui, mss, xdotool) and its offline subtasks' programs run unchanged.
# See the Dockerfile beside this script and README.md.
#
# crabray/desktop (built first when missing) plus, without recommends, the
# Debian packages below from the mirror crabray/debian's apt names (the build
# step that installs them uses the host's network: no registry is needed),
# and pure-Python wheels from PyPI that Debian does not package, downloaded
# (or built from their sdists) once on the host with pip and installed offline.
#
# Built once per machine: the image carries a label with the hash of its
# inputs (these files, the package list, the wheel pins, the base image's id),
# and a build whose inputs match the existing image does nothing (FORCE=1
# rebuilds).
#
# Needs: docker (a running dockerd), pip on the host, the Debian mirror
# reachable from the host. Environment: CRABRAY_IMAGE overrides the image
# name; CRABRAY_CACHE_DIR the cache folder (wheels); FORCE=1 rebuilds.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
image="${CRABRAY_IMAGE:-crabray/crab-desktop:latest}"
base="crabray/desktop:latest"
cache="${CRABRAY_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/crabray}"
packages="openbox suckless-tools xterm gnome-terminal dbus-x11 vim xclip xsel gimp librsvg2-common libreoffice-writer libreoffice-calc
python3-pip python3-xlib python3-pil python3-pyperclip python3-tk python3-psutil python3-odf python3-numpy"
packages="$(echo $packages)"
wheels=(pyautogui==0.9.54 pymsgbox==2.0.1 pytweening==1.2.0 pyscreeze==1.0.1 pygetwindow==0.0.9
  pyrect==0.2.0 mouseinfo==0.1.3 mss==10.2.0)

if ! docker image inspect "$base" >/dev/null 2>&1; then
  echo "$base is missing: building it first ..."
  CRABRAY_IMAGE="$base" bash "$here/../desktop/build.sh"
fi
base_id="$(docker image inspect -f '{{.Id}}' "$base")"
inputs="$(cd "$here" && cat build.sh Dockerfile crab-desktop-session crab-desktop-ready openbox-rc.xml crabray.xcd
  echo "$packages ${wheels[*]} $base_id")"
key="$(printf '%s' "$inputs" | sha256sum | cut -c1-12)"
if [ -z "${FORCE:-}" ] &&
  [ "$(docker image inspect -f '{{index .Config.Labels "crabray.inputs"}}' "$image" 2>/dev/null)" = "$key" ]; then
  echo "$image is up to date (inputs $key); FORCE=1 rebuilds it"
  exit 0
fi
started=$SECONDS

context="$(mktemp -d "${TMPDIR:-/tmp}/crabray-crab-desktop.XXXXXX")"
trap 'rm -rf "$context"' EXIT
wheel_dir="$cache/wheels/crab-desktop"
mkdir -p "$wheel_dir" "$context/wheels"
for pin in "${wheels[@]}"; do
  name="${pin%%==*}"; version="${pin##*==}"
  if ! ls "$wheel_dir" | grep -qiE "^${name//-/[-_]}-${version}-"; then
    # Most of these are published as sdists only: pip builds their (pure-Python) wheels.
    python3 -m pip wheel --quiet --no-deps -w "$wheel_dir" "$pin"
  fi
  cp "$wheel_dir"/$(ls "$wheel_dir" | grep -iE "^${name//-/[-_]}-${version}-" | head -n1) "$context/wheels/"
done
cp "$here"/Dockerfile "$here"/crab-desktop-session "$here"/crab-desktop-ready \
  "$here"/openbox-rc.xml "$here"/crabray.xcd "$context/"

previous="$(docker image inspect -f '{{.Id}}' "$image" 2>/dev/null || true)"
echo "building $image from $base (Debian packages: $packages) ..."
# The classic builder (Debian's docker.io has no buildx); the host's network for apt-get.
DOCKER_BUILDKIT=0 docker build --network host --build-arg "BASE_IMAGE=$base" \
  --build-arg "PACKAGES=$packages" --label "crabray.inputs=$key" -t "$image" "$context"
# The image it replaces would linger untagged; drop it unless a container still uses it.
if [ -n "$previous" ] && [ "$previous" != "$(docker image inspect -f '{{.Id}}' "$image")" ]; then
  docker rmi "$previous" >/dev/null 2>&1 || true
fi
echo "built $image in $((SECONDS - started)) s"
