#!/usr/bin/env bash
# Build the image crabray/debian:latest from scratch, without any registry:
# a Debian bookworm root file system made by debootstrap (variant minbase)
# from the Debian mirror this machine's apt uses, with python3, procps and the
# X tools a desktop needs (xvfb, xdotool, x11-apps, x11-utils), plus a
# non-root `user` (uid 1000, home /home/user), imported with `docker import`.
# The other images under envs/ (task-base, desktop) derive from it without
# any network. Run by `crabray envs build debian`, and by the docker backend
# on first use when the image is missing.
#
# The packages debootstrap downloads are kept in a tarball
# ($CRABRAY_CACHE_DIR, default ~/.cache/crabray/debootstrap), so a rebuild
# needs no network and skips the download.
#
# Needs: root (debootstrap chroots and makes device nodes), docker (a running
# dockerd), debootstrap (apt-get install debootstrap).
# Environment:
#   CRABRAY_IMAGE       the image name (default crabray/debian:latest)
#   DEBIAN_MIRROR       the mirror (default: the one /etc/apt/sources.list{,.d} names)
#   DEBIAN_SUITE        the release (default bookworm)
#   DEBIAN_PACKAGES     the packages to include, space-separated (default: the list below);
#                       envs/task-base/build.sh builds its own root file system this way
#   CRABRAY_CACHE_DIR   where the package tarball is kept
set -euo pipefail

image="${CRABRAY_IMAGE:-crabray/debian:latest}"
suite="${DEBIAN_SUITE:-bookworm}"
variant=minbase
read -r -a packages <<<"${DEBIAN_PACKAGES:-python3 procps xvfb xdotool x11-apps x11-utils}"
cache_dir="${CRABRAY_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/crabray}/debootstrap"

fail() { echo "error: $*" >&2; exit 1; }

command -v debootstrap >/dev/null 2>&1 ||
  fail "the debootstrap command is missing; install it with: apt-get install debootstrap"
command -v docker >/dev/null 2>&1 ||
  fail "the docker command is missing; install it with: apt-get install docker.io"
[ "$(id -u)" -eq 0 ] ||
  fail "debootstrap needs root (it chroots and makes device nodes); run as root: sudo bash $0"
docker info >/dev/null 2>&1 ||
  fail "the Docker engine does not answer (docker info); start it with: dockerd &"

# The Debian mirror apt already uses here (the only one reachable on these hosts):
# the first URI of a deb822 .sources stanza or a one-line `deb URI SUITE` entry
# serving Debian itself (not debian-security, not third-party repositories).
find_mirror() {
  local file uri
  for file in /etc/apt/sources.list.d/*.sources; do
    [ -f "$file" ] || continue
    uri="$(awk '/^URIs:/ { for (i = 2; i <= NF; i++) print $i }' "$file" |
      grep -E '/debian/?$' | head -n1 || true)"
    [ -n "$uri" ] && { echo "${uri%/}"; return; }
  done
  for file in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
    [ -f "$file" ] || continue
    uri="$(awk '$1 == "deb" { for (i = 2; i <= NF; i++) if ($i ~ /^[a-z]+:\/\//) { print $i; break } }' "$file" |
      grep -E '/debian/?$' | head -n1 || true)"
    [ -n "$uri" ] && { echo "${uri%/}"; return; }
  done
  echo "http://deb.debian.org/debian"
}
mirror="${DEBIAN_MIRROR:-$(find_mirror)}"

include="$(IFS=,; echo "${packages[*]}")"
key="$(printf '%s %s %s\n' "$suite" "$variant" "$include" | sha256sum | cut -c1-12)"
tarball="$cache_dir/$suite-$variant-$key.tgz"

work="$(mktemp -d "${TMPDIR:-/tmp}/crabray-debian-build.XXXXXX")"
rootfs="$work/rootfs"
cleanup() {
  # debootstrap mounts /proc and /sys in the chroot; a failed run may leave them
  # mounted, and rm -rf must never descend into the host's /proc or /sys.
  local mount
  for mount in $(awk -v root="$rootfs" 'index($2, root) == 1 { print $2 }' /proc/mounts | sort -r); do
    umount -l "$mount" 2>/dev/null || true
  done
  rm -rf --one-file-system "$work"
}
trap cleanup EXIT

started=$SECONDS
if [ ! -s "$tarball" ]; then
  echo "downloading Debian $suite ($variant + ${packages[*]}) from $mirror ..."
  mkdir -p "$cache_dir"
  if ! debootstrap --variant="$variant" --include="$include" --make-tarball="$work/packages.tgz" \
    "$suite" "$work/download" "$mirror" >"$work/download.log" 2>&1 || [ ! -s "$work/packages.tgz" ]; then
    tail -n 20 "$work/download.log" >&2
    fail "debootstrap could not download Debian $suite from $mirror (the lines above); set DEBIAN_MIRROR to a reachable mirror"
  fi
  mv "$work/packages.tgz" "$tarball"
  echo "downloaded in $((SECONDS - started)) s (kept in $tarball)"
else
  echo "using the cached packages $tarball"
fi

echo "installing Debian $suite into a root file system ..."
if ! debootstrap --variant="$variant" --include="$include" --unpack-tarball="$tarball" \
  "$suite" "$rootfs" "$mirror" >"$work/debootstrap.log" 2>&1; then
  tail -n 20 "$work/debootstrap.log" >&2
  [ -f "$rootfs/debootstrap/debootstrap.log" ] && tail -n 20 "$rootfs/debootstrap/debootstrap.log" >&2
  fail "debootstrap failed (the lines above); remove $tarball if the cached packages are stale"
fi
echo "installed in $((SECONDS - started)) s"

# The unprivileged account tasks may use, and a tidy root file system.
chroot "$rootfs" useradd --create-home --home-dir /home/user --shell /bin/bash --uid 1000 --user-group user
rm -rf "$rootfs"/var/lib/apt/lists/* "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/debootstrap
# Documentation and translations (~70 MB) are of no use in a sandbox; packages
# installed later leave theirs out too, as Debian's slim images do.
rm -rf "$rootfs"/usr/share/doc/* "$rootfs"/usr/share/man/* "$rootfs"/usr/share/info/* \
  "$rootfs"/usr/share/locale/*
cat >"$rootfs/etc/dpkg/dpkg.cfg.d/crabray-nodoc" <<'NODOC'
path-exclude /usr/share/doc/*
path-exclude /usr/share/man/*
path-exclude /usr/share/info/*
path-exclude /usr/share/locale/*
NODOC
# The mirror apt used here, so `apt-get install` works in containers that have a network.
printf 'deb %s %s main\n' "$mirror" "$suite" >"$rootfs/etc/apt/sources.list"
echo "crabray" >"$rootfs/etc/hostname"
printf '127.0.0.1 localhost\n' >"$rootfs/etc/hosts"
: >"$rootfs/etc/resolv.conf"

previous="$(docker image inspect -f '{{.Id}}' "$image" 2>/dev/null || true)"
echo "importing the root file system as $image ..."
# /dev, /proc and /sys are the engine's to fill; their mount points stay.
tar -C "$rootfs" --numeric-owner --exclude='./dev/*' --exclude='./proc/*' --exclude='./sys/*' -c . |
  docker import \
    --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    --change 'ENV HOME=/root' \
    --change 'ENV LANG=C.UTF-8' \
    --change 'WORKDIR /root' \
    --change 'CMD ["/bin/bash"]' \
    --change 'LABEL crabray.env-build=debian' \
    --change "LABEL crabray.debian-suite=$suite" \
    - "$image" >/dev/null
# The image it replaces would linger untagged; drop it unless a container still uses it.
if [ -n "$previous" ] && [ "$previous" != "$(docker image inspect -f '{{.Id}}' "$image")" ]; then
  docker rmi "$previous" >/dev/null 2>&1 || true
fi
echo "built $image in $((SECONDS - started)) s"
