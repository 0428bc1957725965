#!/usr/bin/env bash
# Install the Debian packages crabray's tests drive for real, and start the
# Docker engine if it does not answer:
#   chromium                                 site and viewer browser tests
#   xvfb xdotool x11-apps x11-utils          desktops: virtual screen, input, xwd, xmessage
#   openssh-server                           the SSH backend (a real sshd on loopback)
#   bubblewrap                               the confined local backend
#   passt iproute2                           its network: true (pasta; ip for the tests' namespaces)
#   docker.io busybox-static                 the Docker backend (images built from busybox)
#   iptables                                 its network crabray-net (host rule; docker.io pulls it in)
#   debootstrap                              crabray/debian and the images on it (envs/debian)
#   qemu-system-x86 qemu-utils dropbear-bin cpio   the VM backend (envs/vm/build.sh)
#   python3                                  Debian's interpreter, copied into the test VM
#                                            that runs plain-Python actions (CRABRAY_VM_PYTHON=1)
# Safe to run again: it installs only what is missing. Needs root (or sudo);
# without it, it prints what to install and the tests that need those packages
# skip with the same hint (outside CI, where they fail instead).
set -euo pipefail
packages=(chromium xvfb xdotool x11-apps x11-utils openssh-server bubblewrap passt iproute2
  docker.io iptables busybox-static debootstrap qemu-system-x86 qemu-utils dropbear-bin cpio python3)
start_dockerd() {
  # Runs on exit, whatever was installed: dockerd may be installed but not running.
  command -v dockerd >/dev/null 2>&1 || return 0
  local sudo=""
  if [ "$(id -u)" -ne 0 ]; then
    command -v sudo >/dev/null 2>&1 || { echo "start the Docker engine as root: dockerd &" >&2; return 0; }
    sudo="sudo"
  fi
  $sudo docker info >/dev/null 2>&1 && return 0
  echo "starting dockerd in the background (log: /tmp/dockerd.log) ..."
  $sudo sh -c 'nohup dockerd >/tmp/dockerd.log 2>&1 &'
  for _ in $(seq 60); do
    $sudo docker info >/dev/null 2>&1 && { echo "dockerd is up"; return 0; }
    sleep 1
  done
  echo "dockerd did not answer within 60 s; see /tmp/dockerd.log" >&2
  exit 1
}
trap start_dockerd EXIT
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
