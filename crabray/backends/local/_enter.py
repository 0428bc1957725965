"""Entering a confined sandbox: one process joins the holder's namespaces and drops every privilege.

Why not ``nsenter`` then ``setpriv``: joining a user namespace (``setns``)
gives the caller a full capability bounding set in it (the kernel resets
it, as for a new namespace), and the process that joined keeps its
capabilities only until it executes a program as the sandbox user. So a
``setpriv --bounding-set=-all`` run after ``nsenter`` no longer holds
``CAP_SETPCAP`` and its drop does nothing (libcap-ng skips it silently): a
command's bounding set stayed full. Only the process that joined can empty
it, before it executes anything, and util-linux 2.38's ``nsenter`` has no
option for that (2.39's ``--keep-caps`` would hand the capabilities on).

So the entry is a short ``perl`` program (``perl-base`` is part of every
Debian and Ubuntu system) making the system calls itself: it joins the
namespaces as ``nsenter`` does, changes into the sandbox's root and
directory, forks (joining a pid namespace applies to children), and the
child empties the bounding and ambient sets, sets its groups, gid and uid,
sets no_new_privs and executes the command with the environment given. One
program in front of each command instead of two; it fails, and the command
does not run, if any step fails.

Nothing of the command's environment steers the program while it runs as the
driver's user (``LD_PRELOAD``, ``PERL5OPT``): each variable travels under a
prefixed name (:func:`entry_env`) that neither the dynamic linker nor perl
reads, and the command gets them back under their own names. Not as
arguments: any host user can read a process's command line, only its owner
its environment.
"""

from __future__ import annotations

import os
import platform
from collections.abc import Mapping
from dataclasses import dataclass

_GENERIC = (268, 167, 159, 149, 147, 97, 40)
SYSCALLS: dict[str, tuple[int, int, int, int, int, int, int]] = {
    "x86_64": (308, 157, 116, 119, 117, 272, 165),
    "aarch64": _GENERIC,
    "arm64": _GENERIC,
    "riscv64": _GENERIC,
}
"""Numbers of ``setns``, ``prctl``, ``setgroups``, ``setresgid``, ``setresuid``, ``unshare``
and ``mount`` per machine (the last two for :data:`STAGE_PROGRAM`)."""

ENV_PREFIX = "CRABRAY_ENV_"
"""What :func:`entry_env` puts before each of a command's variables."""

# The argument list: CALLS PID UID GID CLEAR CWD NS... -- COMMAND... (COMMAND "crabray:perl" CODE
# ARG...: the child evaluates perl CODE with ARG... as @ARGV instead of executing a program,
# one start fewer; CODE must exit).
# prctl options: 23 PR_CAPBSET_READ, 24 PR_CAPBSET_DROP, 38 PR_SET_NO_NEW_PRIVS,
# 47 PR_CAP_AMBIENT (4: CLEAR_ALL). Errors: 2 ENOENT, 22 EINVAL. No module is loaded.
PROGRAM = r"""
my ($calls, $pid, $uid, $gid, $clear, $cwd) = splice(@ARGV, 0, 6);
my ($SETNS, $PRCTL, $SETGROUPS, $SETRESGID, $SETRESUID) = map { $_ + 0 } split(/,/, $calls);
$uid += 0; $gid += 0;
my @ns;
while (@ARGV) { my $a = shift @ARGV; last if $a eq '--'; push @ns, $a; }
my %env = map { substr($_, 12) => $ENV{$_} } grep { index($_, 'CRABRAY_ENV_') == 0 } keys %ENV;
sub fail { print STDERR "crabray: $_[1]\n"; exit $_[0]; }
my %fd;
for my $n (@ns) {
    open(my $f, '<', "/proc/$pid/ns/$n") or fail(1, "cannot open the sandbox's $n namespace: $!");
    $fd{$n} = $f;
}
opendir(my $root, "/proc/$pid/root") or fail(1, "cannot open the sandbox's root: $!");
if ($clear) { syscall($SETGROUPS, 0, 0) == 0 or fail(1, "cannot clear the groups: $!"); }
# bwrap (with --dev) makes the other namespaces in an outer user namespace and puts the
# sandbox's processes in an inner one: join the outer first when it is not this process's own
# (NS_GET_PARENT), to hold capabilities over what it owns; then the rest, the user one last
# when that works (a root driver), else first; then what is left.
if ($fd{user}) {
    my $outer = ioctl($fd{user}, 0xb702, 0);
    if (defined($outer) && open(my $o, '<&=', $outer + 0)) {
        my @mine = stat('/proc/self/ns/user');
        my @theirs = stat($o);
        if ($mine[0] != $theirs[0] || $mine[1] != $theirs[1]) {
            syscall($SETNS, fileno($o), 0) == 0
                or fail(1, "cannot enter the sandbox's outer user namespace: $!");
        }
        close($o);
    }
}
for my $pass (0, 1) {
    for my $n (@ns) {
        next if !$fd{$n} || ($pass == 0 && $n eq 'user');
        if (syscall($SETNS, fileno($fd{$n}), 0) == 0) { close(delete $fd{$n}); }
        elsif ($pass) { fail(1, "cannot enter the sandbox's $n namespace: $!"); }
    }
}
chdir($root) && chroot('.') or fail(1, "cannot enter the sandbox's root: $!");
chdir($cwd) or fail(126, "cannot run in $cwd: $!");
my $child = fork();
defined($child) or fail(1, "cannot fork: $!");
if ($child == 0) {
    my $cap = 0;
    while (syscall($PRCTL, 24, $cap, 0, 0, 0) == 0) { $cap++; }
    $! == 22 && $cap > 0 or fail(1, "cannot drop capability $cap from the bounding set: $!");
    syscall($PRCTL, 23, 0, 0, 0, 0) == 0 or fail(1, "the bounding set is not empty");
    syscall($PRCTL, 47, 4, 0, 0, 0) == 0 or fail(1, "cannot clear the ambient set: $!");
    syscall($SETRESGID, $gid, $gid, $gid) == 0 or fail(1, "cannot set gid $gid: $!");
    syscall($SETRESUID, $uid, $uid, $uid) == 0 or fail(1, "cannot set uid $uid: $!");
    syscall($PRCTL, 38, 1, 0, 0, 0) == 0 or fail(1, "cannot set no_new_privs: $!");
    %ENV = %env;
    if ($ARGV[0] eq 'crabray:perl') {
        my (undef, $code) = splice(@ARGV, 0, 2);
        eval $code;
        fail(1, "the program did not exit: $@");
    }
    { exec { $ARGV[0] } @ARGV; }
    fail($! == 2 ? 127 : 126, "cannot run '$ARGV[0]': $!");
}
waitpid($child, 0);
if ($? & 127) { $SIG{$_} = 'DEFAULT' for keys %SIG; kill($? & 127, $$); }
exit($? >> 8);
"""


# The argument list: CALLS UID GID STAGE NAME SOURCE... -- BWRAP... (as root).
# 0x20000 CLONE_NEWNS; mount flags 0x4000 MS_REC, 0x40000 MS_PRIVATE, 0x1000 MS_BIND,
# 0xe MS_NOSUID | MS_NODEV | MS_NOEXEC.
STAGE_PROGRAM = r"""
my ($calls, $uid, $gid, $stage) = splice(@ARGV, 0, 4);
my (undef, undef, $SETGROUPS, $SETRESGID, $SETRESUID, $UNSHARE, $MOUNT) =
    map { $_ + 0 } split(/,/, $calls);
$uid += 0; $gid += 0;
sub fail { print STDERR "crabray: $_[0]: $!\n"; exit 1; }
syscall($UNSHARE, 0x20000) == 0 or fail("cannot make a mount namespace for the stage");
my ($none, $top) = ("none", "/");  # variables: perl hands syscall no read-only string
syscall($MOUNT, $none, $top, 0, 0x44000, 0) == 0 or fail("cannot make the stage's mounts private");
my ($tmpfs, $options) = ("tmpfs", "mode=0711");
syscall($MOUNT, $tmpfs, $stage, $tmpfs, 0xe, $options) == 0
    or fail("cannot mount a tmpfs on $stage");
while (@ARGV) {
    my $name = shift @ARGV; last if $name eq '--';
    my ($source, $target) = (shift @ARGV, "$stage/$name");
    mkdir($target, 0755) or fail("cannot make $target");
    syscall($MOUNT, $source, $target, 0, 0x1000, 0) == 0 or fail("cannot bind $source on $target");
}
syscall($SETGROUPS, 0, 0) == 0 or fail("cannot clear the groups");
syscall($SETRESGID, $gid, $gid, $gid) == 0 or fail("cannot set gid $gid");
syscall($SETRESUID, $uid, $uid, $uid) == 0 or fail("cannot set uid $uid");
{ exec { $ARGV[0] } @ARGV; }
fail("cannot run $ARGV[0]");
"""


# pid 1 of a sandbox (bwrap --as-pid-1), as the sandbox user. SIGCHLD ignored: the kernel reaps
# every process that ends orphaned in the sandbox, so no zombie outlives its parent. Not dumpable
# (prctl 4 PR_SET_DUMPABLE): no process of the sandbox may trace it, read its memory or its
# descriptors. It copies its stdin (the ready line) to stdout until its owner closes stdin. The
# kernel does not let processes of its pid namespace signal it, so an in-place reset's
# kill(-1) leaves it alone.
INIT_PROGRAM = r"""
my $PRCTL = (split(/,/, shift @ARGV))[1] + 0;
$SIG{CHLD} = 'IGNORE';
syscall($PRCTL, 4, 0, 0, 0, 0) == 0 or die "crabray: cannot make pid 1 undumpable: $!\n";
$| = 1;
my $chunk;
while (sysread(STDIN, $chunk, 4096)) { print $chunk; }
"""


def init_argv(perl: str) -> list[str]:
    """The command line of a sandbox's pid 1 (:data:`INIT_PROGRAM`)."""
    return [perl, "-e", INIT_PROGRAM, "--", ",".join(str(number) for number in syscalls())]


def stage_argv(
    perl: str, stage: str, binds: list[tuple[str, str]], uid: int, gid: int, command: list[str]
) -> list[str]:
    """The command line that runs ``command`` as ``uid``/``gid`` in a new mount namespace where
    a tmpfs covers directory ``stage`` and holds each ``(name, source)`` of ``binds`` bound at
    ``stage/name`` (a root driver's stage: nothing changes on the host, nothing to remove).

    One program instead of ``unshare``, a shell, ``mount`` and ``setpriv``.
    """
    calls = ",".join(str(number) for number in syscalls())
    pairs = [part for pair in binds for part in pair]
    head = [perl, "-e", STAGE_PROGRAM, "--", calls, str(uid), str(gid), stage]
    return [*head, *pairs, "--", *command]


@dataclass(frozen=True)
class Entry:
    """How commands enter one sandbox: who they become and which namespaces they join."""

    perl: str
    pid1: int
    uid: int
    gid: int
    clear_groups: bool
    """Drop the caller's supplementary groups first (a root driver; a user may not)."""
    namespaces: tuple[str, ...]
    """``/proc/PID/ns`` names to join, the user namespace first."""

    def argv(self, command: list[str], *, cwd: str) -> list[str]:
        """The host command line that runs ``command`` inside, in sandbox dir ``cwd``.

        Start it with :func:`entry_env` of the command's environment, never with that
        environment itself.
        """
        calls = ",".join(str(number) for number in syscalls())
        head = [self.perl, "-e", PROGRAM, "--", calls, str(self.pid1)]
        head += [str(self.uid), str(self.gid), "1" if self.clear_groups else "0", cwd]
        return [*head, *self.namespaces, "--", *command]


def entry_env(env: Mapping[str, str]) -> dict[str, str]:
    """The environment to start the entry program with, for a command that gets ``env``.

    Raises:
        ValueError: A name in ``env`` is empty or holds ``=``.
    """
    made = {}
    for name, value in env.items():
        if not name or "=" in name:
            raise ValueError(f"environment variable name {name!r} is empty or holds '='")
        made[ENV_PREFIX + name] = value
    return made


def syscalls() -> tuple[int, int, int, int, int, int, int]:
    """This machine's system call numbers the entry program makes.

    Raises:
        KeyError: A machine the table does not know (:func:`unsupported` says so first).
    """
    return SYSCALLS[platform.machine()]


def unsupported() -> str | None:
    """Why commands cannot enter a sandbox on this machine, or None when they can."""
    machine = platform.machine()
    if machine in SYSCALLS:
        return None
    known = ", ".join(sorted(SYSCALLS))
    return f"confinement knows the system calls of {known}, not of this machine ({machine})"


def namespaces_of(pid: int, names: tuple[str, ...]) -> tuple[str, ...]:
    """The namespaces among ``names`` that ``pid`` does not share with this process."""
    joined = []
    for name in names:
        try:
            theirs = os.readlink(f"/proc/{pid}/ns/{name}")
        except OSError:
            continue
        try:
            ours: str | None = os.readlink(f"/proc/self/ns/{name}")
        except OSError:
            ours = None
        if theirs != ours:
            joined.append(name)
    return tuple(joined)
