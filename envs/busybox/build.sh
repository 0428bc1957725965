#!/usr/bin/env bash
# Build the image crabray/busybox:latest from scratch, without any registry:
# a root file system holding Debian's static busybox (every applet as a
# symlink), the usual top-level directories and a root user, imported with
# `docker import`. Run by `crabray envs build busybox`, and by the docker
# backend on first use when the image is missing.
#
# Needs: docker (a running dockerd), busybox-static (apt-get install busybox-static).
# Environment: CRABRAY_IMAGE overrides the image name; BUSYBOX overrides the binary.
set -euo pipefail

image="${CRABRAY_IMAGE:-crabray/busybox:latest}"
busybox="${BUSYBOX:-/bin/busybox}"

if [ ! -x "$busybox" ] || ! "$busybox" --list >/dev/null 2>&1; then
  echo "error: $busybox is not a working busybox; install it with: apt-get install busybox-static" >&2
  exit 1
fi
if ldd "$busybox" >/dev/null 2>&1; then
  echo "error: $busybox is dynamically linked; the image needs the static one: apt-get install busybox-static" >&2
  exit 1
fi
if ! command -v docker >/dev/null 2>&1; then
  echo "error: the docker command is missing; install it with: apt-get install docker.io" >&2
  exit 1
fi

rootfs="$(mktemp -d "${TMPDIR:-/tmp}/crabray-busybox-rootfs.XXXXXX")"
trap 'rm -rf "$rootfs"' EXIT

mkdir -p "$rootfs"/{bin,sbin,usr/bin,usr/sbin,etc,root,tmp,proc,sys,dev,run,var/tmp,home,work}
chmod 1777 "$rootfs/tmp" "$rootfs/var/tmp"
chmod 700 "$rootfs/root"
cp "$busybox" "$rootfs/bin/busybox"
# Every applet as a symlink where busybox --install -s would put it.
for applet_path in $("$busybox" --list-full); do
  [ "$applet_path" = "bin/busybox" ] && continue
  mkdir -p "$rootfs/$(dirname "$applet_path")"
  ln -sf /bin/busybox "$rootfs/$applet_path"
done
cat >"$rootfs/etc/passwd" <<'PASSWD'
root:x:0:0:root:/root:/bin/sh
nobody:x:65534:65534:nobody:/nonexistent:/bin/false
PASSWD
cat >"$rootfs/etc/group" <<'GROUP'
root:x:0:
nogroup:x:65534:
GROUP
echo "crabray" >"$rootfs/etc/hostname"
printf '127.0.0.1 localhost\n' >"$rootfs/etc/hosts"
: >"$rootfs/etc/resolv.conf"

previous="$(docker image inspect -f '{{.Id}}' "$image" 2>/dev/null || true)"
echo "importing $(find "$rootfs" | wc -l) files as $image ..."
tar -C "$rootfs" -c . | docker import \
  --change 'ENV PATH=/usr/sbin:/usr/bin:/sbin:/bin' \
  --change 'ENV HOME=/root' \
  --change 'WORKDIR /root' \
  --change 'CMD ["/bin/sh"]' \
  --change 'LABEL crabray.env-build=busybox' \
  - "$image" >/dev/null
# The image it replaces would linger untagged; drop it unless a container still uses it.
if [ -n "$previous" ] && [ "$previous" != "$(docker image inspect -f '{{.Id}}' "$image")" ]; then
  docker rmi "$previous" >/dev/null 2>&1 || true
fi
echo "built $image"
