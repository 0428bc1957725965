"""The ``/etc`` a confined local sandbox sees: made for it, not the host's.

A sandbox gets a fresh ``/etc`` in bubblewrap's root file system with two
kinds of entries:

- files written for the sandbox (:func:`generated_files`): ``passwd`` and
  ``group`` naming only ``root``, the sandbox user (``user``, home
  ``/home/user``) and ``nobody``; ``hosts`` and ``hostname`` for the
  sandbox's own host name; ``nsswitch.conf`` reading those files;
- host entries programs need to run, read-only (:data:`HOST_ENTRIES`): the
  dynamic linker's cache, ``alternatives``, CA certificates (never
  ``/etc/ssl/private``), time zone, DNS resolver settings, fonts and the
  configuration of shells, Python, X and Chromium.

Nothing else of the host's ``/etc`` exists inside: no SSH host keys, no
``shadow``, no package manager credentials (``pip.conf``, ``npmrc``), no
``sudoers``, no ``machine-id``.
"""

from __future__ import annotations

import contextlib
import os

SANDBOX_HOSTNAME = "crabray"
"""The host name inside every confined sandbox (its own UTS namespace)."""

HOST_ENTRIES: tuple[str, ...] = (
    "alternatives",
    "bash.bashrc",
    "ca-certificates",
    "ca-certificates.conf",
    "chromium",
    "chromium.d",
    "debian_version",
    "fonts",
    "gai.conf",
    "gtk-2.0",
    "gtk-3.0",
    "host.conf",
    "inputrc",
    "ld.so.cache",
    "ld.so.conf",
    "ld.so.conf.d",
    "locale.alias",
    "localtime",
    "lsb-release",
    "magic",
    "magic.mime",
    "mime.types",
    "os-release",
    "perl",
    "pki/ca-trust",
    "pki/tls/certs",
    "profile",
    "protocols",
    "python3",
    "resolv.conf",
    "services",
    "shells",
    "ssl/certs",
    "ssl/openssl.cnf",
    "terminfo",
    "timezone",
    "vim",
    "X11",
    "xdg",
)
"""Entries of the host's ``/etc`` bound read-only into a sandbox, when they exist.

Besides these, versioned Python directories (``/etc/python3.N``) are bound too.
"""


def host_entries() -> list[str]:
    """The absolute host paths under ``/etc`` to bind into a sandbox: those that exist here."""
    names = list(HOST_ENTRIES)
    with contextlib.suppress(OSError):
        names += sorted(n for n in os.listdir("/etc") if n.startswith("python3."))
    return [f"/etc/{name}" for name in names if os.path.exists(f"/etc/{name}")]


def generated_files(uid: int, gid: int, *, host_hosts: bool) -> dict[str, bytes]:
    """The files written for a sandbox whose user has ``uid``/``gid`` inside: name -> content.

    Args:
        uid: The sandbox user's uid inside the sandbox.
        gid: Its gid inside the sandbox.
        host_hosts: Leave ``hosts`` out (the sandbox shares the host's network and
            gets the host's ``/etc/hosts`` instead).
    """
    passwd = [
        "root:x:0:0:root:/root:/usr/sbin/nologin",
        f"user:x:{uid}:{gid}:sandbox user:/home/user:/bin/sh",
        "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin",
    ]
    group = ["root:x:0:", f"user:x:{gid}:", "nogroup:x:65534:"]
    if uid in (0, 65534):
        passwd = [passwd[1]]
    if gid in (0, 65534):
        group = [group[1]]
    files = {
        "passwd": "\n".join(passwd) + "\n",
        "group": "\n".join(group) + "\n",
        "hostname": f"{SANDBOX_HOSTNAME}\n",
        "nsswitch.conf": "passwd: files\ngroup: files\nhosts: files dns\n",
    }
    if not host_hosts:
        files["hosts"] = (
            f"127.0.0.1\tlocalhost {SANDBOX_HOSTNAME}\n::1\tlocalhost ip6-localhost ip6-loopback\n"
        )
    return {name: text.encode() for name, text in files.items()}
