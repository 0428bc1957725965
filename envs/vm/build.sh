#!/usr/bin/env bash
# Build the small bootable test VM that crabray's VM backend boots in its tests.
#
# Everything comes from Debian packages (no other download): a Debian kernel
# (`apt-get download linux-image-<version>-amd64`), busybox-static for the
# userland, dropbear for SSH and OpenSSH's sftp-server for file transfer, all
# packed into one initramfs that runs from RAM (the VM has no disk).
#
# Output in envs/vm/out/ (or $1):
#   vmlinuz               the kernel
#   initramfs.cpio.gz     busybox + dropbear + sftp-server + network modules + /init
#   id_ed25519[.pub]      a throwaway client key; its public half is root's authorized key
#                         (reused when it already exists, or taken from $CRABRAY_VM_KEY)
#   host_key.pub          the VM's SSH host key (public), for a known_hosts entry
#
# CRABRAY_VM_PYTHON=1 adds Debian's python3 (interpreter and standard library): the
# guest process that runs plain-Python actions needs it (the tests build that variant
# into envs/vm/out-python).
#
# Host packages: qemu-system-x86 qemu-utils dropbear-bin busybox-static cpio
# (scripts/system-deps.sh installs them). Safe to run again; it rebuilds.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
out="${1:-$here/out}"
mkdir -p "$out"
out="$(cd "$out" && pwd)"

need() { command -v "$1" >/dev/null 2>&1 || { echo "build.sh: '$1' is missing; apt-get install -y $2" >&2; exit 1; }; }
need busybox busybox-static
need dropbearkey dropbear-bin
need cpio cpio
need apt-get apt
need dpkg-deb dpkg
[ -x /usr/sbin/dropbear ] || { echo "build.sh: /usr/sbin/dropbear is missing; apt-get install -y dropbear-bin" >&2; exit 1; }
file_is_static() { ! ldd "$1" >/dev/null 2>&1; }
file_is_static "$(command -v busybox)" || { echo "build.sh: busybox is not static; apt-get install -y busybox-static" >&2; exit 1; }

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
cd "$work"

# --- kernel ---------------------------------------------------------------
kernel_pkg="${CRABRAY_VM_KERNEL_PKG:-}"
if [ -z "$kernel_pkg" ]; then
  kernel_pkg="$(apt-cache depends linux-image-amd64 | awk '/Depends: linux-image-/ {print $2; exit}')"
fi
[ -n "$kernel_pkg" ] || { echo "build.sh: cannot find the kernel package linux-image-amd64 depends on (run apt-get update)" >&2; exit 1; }
debs="$out/.debs"  # downloaded packages are kept, so a rebuild needs no network
mkdir -p "$debs"
if ! ls "$debs/$kernel_pkg"_*.deb >/dev/null 2>&1; then
  echo "build.sh: downloading $kernel_pkg"
  (cd "$debs" && { apt-get download -q "$kernel_pkg" >/dev/null 2>&1 || apt-get download "$kernel_pkg"; })
fi
dpkg-deb -x "$(ls "$debs/$kernel_pkg"_*.deb | head -n1)" kernel
vmlinuz="$(ls kernel/boot/vmlinuz-* | head -n1)"
moddir="$(ls -d kernel/lib/modules/* | head -n1)"
kver="$(basename "$moddir")"

# --- sftp-server (dropbear hands the sftp subsystem to /usr/lib/sftp-server) ---
sftp=/usr/lib/openssh/sftp-server
if [ ! -x "$sftp" ]; then
  echo "build.sh: downloading openssh-sftp-server"
  apt-get download -q openssh-sftp-server >/dev/null 2>&1 || apt-get download openssh-sftp-server
  dpkg-deb -x ./openssh-sftp-server_*.deb sftppkg
  sftp="$work/sftppkg/usr/lib/openssh/sftp-server"
fi

# --- root file system -----------------------------------------------------
root="$work/root"
mkdir -p "$root"/{bin,sbin,usr/bin,usr/sbin,usr/lib,etc/dropbear,root/.ssh,proc,sys,dev,tmp,run,var/log,lib/modules}
chmod 1777 "$root/tmp"
chmod 700 "$root/root" "$root/root/.ssh"
cp "$(command -v busybox)" "$root/bin/busybox"
for applet in $(busybox --list-full); do
  [ -e "$root/$applet" ] || ln -s /bin/busybox "$root/$applet"
done

copy_with_libs() {  # copy a dynamically linked program and every library it loads
  local src="$1" dest="$2"
  install -D -m 755 "$src" "$root$dest"
  ldd "$src" | awk '/=> \// {print $3} /^\t\/[^ ]+ \(/ {print $1}' | while read -r lib; do
    [ -e "$root$lib" ] || install -D -m 755 "$lib" "$root$lib"
  done
}
copy_with_libs /usr/sbin/dropbear /usr/sbin/dropbear
copy_with_libs "$sftp" /usr/lib/openssh/sftp-server
ln -s openssh/sftp-server "$root/usr/lib/sftp-server"
# GNU grep instead of busybox's: busybox grep stops a line at a NUL byte, so it cannot
# search /proc/*/environ, which the SSH backend's kill-by-marker relies on. And dash
# (Debian's own /bin/sh) as /bin/sh, because busybox's ash runs its built-in applets
# ahead of PATH, so with it `grep` would still be busybox's.
rm -f "$root/bin/grep" "$root/usr/bin/grep" "$root/bin/sh"
copy_with_libs "$(command -v grep)" /bin/grep
copy_with_libs "$(readlink -f "$(command -v dash)")" /bin/sh

# python3 (only with CRABRAY_VM_PYTHON=1): Debian's interpreter and standard library
# (without tests, IDLE and tkinter; with its bytecode caches, which save seconds of
# compiling at every start in an emulated VM), so plain-Python actions can run in the VM.
if [ "${CRABRAY_VM_PYTHON:-0}" = 1 ]; then
  [ -x /usr/bin/python3 ] || { echo "build.sh: /usr/bin/python3 is missing; apt-get install -y python3" >&2; exit 1; }
  py="$(readlink -f /usr/bin/python3)"
  ver="$(basename "$py")"
  copy_with_libs "$py" "/usr/bin/$ver"
  ln -sf "$ver" "$root/usr/bin/python3"
  (cd /usr/lib && tar -cf - --exclude="$ver/test" --exclude="$ver/idlelib" \
      --exclude="$ver/tkinter" --exclude="$ver/turtledemo" --exclude="$ver/ensurepip" \
      --exclude="$ver/lib2to3" --exclude="$ver/pydoc_data" --exclude="$ver/config-*" \
      --exclude="$ver/site-packages" --exclude="$ver/dist-packages" "$ver") | (cd "$root/usr/lib" && tar -xf -)
  for so in "$root/usr/lib/$ver"/lib-dynload/*.so; do
    ldd "$so" | awk '/=> \// {print $3}' | while read -r lib; do
      [ -e "$root$lib" ] || install -D -m 755 "$lib" "$root$lib"
    done
  done
fi

# network drivers that Debian builds as modules, each after what it depends on
modules=(failover net_failover virtio_ring virtio virtio_pci_legacy_dev virtio_pci_modern_dev virtio_pci virtio_net e1000)
: >"$root/lib/modules/load-order"
for mod in "${modules[@]}"; do
  ko="$(find "$moddir" -name "$mod.ko" -o -name "$mod.ko.xz" | head -n1)"
  if [ -z "$ko" ]; then
    echo "build.sh: module $mod not in $kernel_pkg; assuming it is built in" >&2
    continue
  fi
  case "$ko" in *.xz) xz -dc "$ko" >"$root/lib/modules/$mod.ko" ;; *) cp "$ko" "$root/lib/modules/$mod.ko" ;; esac
  echo "$mod" >>"$root/lib/modules/load-order"
done

# --- keys -------------------------------------------------------------------
if [ -n "${CRABRAY_VM_KEY:-}" ]; then
  cp "$CRABRAY_VM_KEY" "$out/id_ed25519"
  cp "$CRABRAY_VM_KEY.pub" "$out/id_ed25519.pub"
elif [ ! -f "$out/id_ed25519" ] || [ ! -f "$out/id_ed25519.pub" ]; then
  rm -f "$out/id_ed25519" "$out/id_ed25519.pub"
  if command -v ssh-keygen >/dev/null 2>&1; then
    ssh-keygen -q -t ed25519 -N '' -C crabray-test-vm -f "$out/id_ed25519"
  else  # dropbear's own tools, converted to the OpenSSH format paramiko reads
    dropbearkey -t ed25519 -f "$work/client.dropbear" >/dev/null
    dropbearconvert dropbear openssh "$work/client.dropbear" "$out/id_ed25519" >/dev/null
    dropbearkey -y -f "$work/client.dropbear" | grep '^ssh-' | sed 's/ [^ ]*$/ crabray-test-vm/' >"$out/id_ed25519.pub"
  fi
fi
chmod 600 "$out/id_ed25519"
cp "$out/id_ed25519.pub" "$root/root/.ssh/authorized_keys"
chmod 600 "$root/root/.ssh/authorized_keys"
dropbearkey -t ed25519 -f "$root/etc/dropbear/dropbear_ed25519_host_key" >/dev/null 2>&1
dropbearkey -y -f "$root/etc/dropbear/dropbear_ed25519_host_key" | grep '^ssh-' | awk '{print $1, $2}' >"$out/host_key.pub"

# --- /etc and /init ------------------------------------------------------------
cat >"$root/etc/passwd" <<'PASSWD'
root:x:0:0:root:/root:/bin/sh
PASSWD
echo 'root:x:0:' >"$root/etc/group"
echo 'root:*:19000:0:99999:7:::' >"$root/etc/shadow"
chmod 600 "$root/etc/shadow"
printf '/bin/sh\n/bin/ash\n' >"$root/etc/shells"
echo crabray-vm >"$root/etc/hostname"
printf '127.0.0.1 localhost\n10.0.2.15 crabray-vm\n' >"$root/etc/hosts"
echo 'nameserver 10.0.2.3' >"$root/etc/resolv.conf"

cat >"$root/init" <<'INIT'
#!/bin/busybox sh
# crabray test VM: mount, load the network drivers, configure QEMU user networking,
# start dropbear on port 22, then keep a shell on the console.
export PATH=/usr/sbin:/usr/bin:/sbin:/bin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev 2>/dev/null || mount -t tmpfs tmpfs /dev
mkdir -p /dev/pts /dev/shm
mount -t devpts devpts /dev/pts
mount -t tmpfs tmpfs /dev/shm
mount -t tmpfs tmpfs /run
hostname -F /etc/hostname
for pass in 1 2; do  # a second pass loads what missed a dependency in the first
  while read -r mod; do
    [ -d "/sys/module/$mod" ] || insmod "/lib/modules/$mod.ko" 2>/dev/null
  done </lib/modules/load-order
done
ip link set lo up
iface=""
for i in $(seq 1 50); do
  for dev in /sys/class/net/*; do
    name="${dev##*/}"
    [ "$name" = lo ] && continue
    iface="$name"
    break
  done
  [ -n "$iface" ] && break
  sleep 0.1
done
if [ -n "$iface" ]; then
  ip link set "$iface" up
  ip addr add 10.0.2.15/24 dev "$iface"
  ip route add default via 10.0.2.2
else
  echo "crabray-vm: no network interface found" >/dev/console
fi
dropbear -s -p 22 -r /etc/dropbear/dropbear_ed25519_host_key -P /run/dropbear.pid
echo "crabray-vm: ready (network on ${iface:-none}, dropbear on port 22)" >/dev/console
while true; do
  setsid /bin/ash -c 'exec /bin/ash </dev/console >/dev/console 2>&1'
  sleep 1
done
INIT
chmod 755 "$root/init"

# --- pack -----------------------------------------------------------------------
(cd "$root" && find . -print0 | cpio --null -o -H newc --owner 0:0 --quiet) | gzip -6 >"$out/initramfs.cpio.gz.tmp"
mv "$out/initramfs.cpio.gz.tmp" "$out/initramfs.cpio.gz"
cp "$vmlinuz" "$out/vmlinuz"
echo "$kver" >"$out/kernel-version"
echo "build.sh: built the test VM in $out (kernel $kver, initramfs $(du -h "$out/initramfs.cpio.gz" | cut -f1))"
