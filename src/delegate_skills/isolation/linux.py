"""Every Linux-only mechanism the relay uses, behind one switch.

- `/proc`: a process's state, parent, group and start time, and every process;
- `prctl`: a parent-death signal for the implementer, and the relay as the
  child subreaper (every descendant, whatever its session, stays the relay's);
- pidfd: waking the moment the implementer exits;
- cgroup v2: a cgroup per run where one is writable, emptied with `cgroup.kill`;
- bubblewrap (see sandbox.py), found here.

Elsewhere each answer is "not available" (None, False, an empty list) and the
callers fall back to POSIX: process groups, `ps`, polling. Setting
DELEGATE_RELAY_POSIX_ONLY=1 switches every one of these off on Linux too; it is
for the test suite, which runs its process and read-only tests both ways.
"""

from __future__ import annotations

import os
import signal
import sys

POSIX_ONLY_ENV = "DELEGATE_RELAY_POSIX_ONLY"


def enabled() -> bool:
    """Whether the Linux mechanisms may be used here."""
    return sys.platform.startswith("linux") and os.environ.get(POSIX_ONLY_ENV) != "1"


# ---------------------------------------------------------------- /proc


def stat_fields(pid: int | str) -> list[bytes] | None:
    """The fields of /proc/<pid>/stat after the command name (state first); None if unreadable."""
    if not enabled():
        return None
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            return handle.read().rsplit(b")", 1)[1].split()
    except (OSError, IndexError):
        return None


def is_zombie(pid: int) -> bool | None:
    """Whether `pid` has exited and waits to be reaped: /proc on Linux, else `ps`.

    None when neither can tell (no such process, or no `ps`).
    """
    fields = stat_fields(pid)
    if fields:
        return fields[0] in (b"Z", b"X")
    for proc in _ps_table() if not enabled() else []:
        if proc.pid == pid:
            return proc.dead
    return None


def process_start(pid: int) -> str | None:
    """The kernel's start time of `pid`, to tell a process from a later one with its pid."""
    fields = stat_fields(pid)
    return fields[19].decode() if fields and len(fields) > 19 else None


class Proc:
    """One process as a table row: pid, parent, process group, state letter."""

    __slots__ = ("pgid", "pid", "ppid", "state")

    def __init__(self, pid: int, ppid: int, pgid: int, state: str) -> None:
        self.pid, self.ppid, self.pgid, self.state = pid, ppid, pgid, state

    @property
    def dead(self) -> bool:
        return self.state[:1] in ("Z", "X")


def processes() -> list[Proc]:
    """Every process visible here: /proc on Linux, else `ps` (empty when neither answers)."""
    if enabled():
        try:
            names = os.listdir("/proc")
        except OSError:
            names = []
        table = []
        for name in names:
            if not name.isdigit():
                continue
            fields = stat_fields(name)
            if fields and len(fields) > 2:
                table.append(Proc(int(name), int(fields[1]), int(fields[2]), fields[0].decode()))
        if table:
            return table
    return _ps_table()


def _ps_table() -> list[Proc]:
    """Every process `ps` sees, except that `ps` itself (a child of the caller's)."""
    import subprocess

    try:
        proc = subprocess.Popen(
            ["ps", "-A", "-o", "pid=,ppid=,pgid=,stat="],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
        )
    except OSError:
        return []
    try:
        out, _ = proc.communicate(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        return []
    table = []
    for line in out.decode("ascii", "replace").splitlines():
        parts = line.split()
        if len(parts) >= 4 and all(p.isdigit() for p in parts[:3]) and int(parts[0]) != proc.pid:
            table.append(Proc(int(parts[0]), int(parts[1]), int(parts[2]), parts[3]))
    return table


def environ_has(pid: int, entry: bytes) -> bool:
    """Whether `pid` was started with `entry` (NAME=value) in its environment (Linux)."""
    if not enabled():
        return False
    try:
        with open(f"/proc/{pid}/environ", "rb") as handle:
            return entry in handle.read().split(b"\0")
    except OSError:
        return False


def cmdline(pid: int | str) -> list[bytes] | None:
    if not enabled():
        return None
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as handle:
            return handle.read().split(b"\0")
    except OSError:
        return None


# ---------------------------------------------------------------- prctl

_PR_SET_PDEATHSIG = 1
_PR_SET_CHILD_SUBREAPER = 36
_LIBC: dict = {}
#: Whether this process has made itself the subreaper of its descendants.
_REAPER: dict = {"on": False}


def _prctl():
    if "prctl" not in _LIBC:
        _LIBC["prctl"] = None
        if enabled():
            try:
                import ctypes

                _LIBC["prctl"] = ctypes.CDLL(None, use_errno=True).prctl
            except (ImportError, OSError, AttributeError):
                pass
    return _LIBC["prctl"]


def become_subreaper() -> bool:
    """Make this process the reaper of every orphaned descendant; whether that worked."""
    prctl = _prctl()
    _REAPER["on"] = prctl is not None and prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    return _REAPER["on"]


def childless() -> bool:
    """Whether this subreaper has no child at all, and so no descendant.

    Every descendant of a subreaper is a child of it or of another
    descendant, so an empty set of children proves the tree is gone without
    reading every process in /proc. False whenever that cannot be shown.
    """
    if not _REAPER["on"]:
        return False
    try:
        os.waitid(os.P_ALL, 0, os.WEXITED | os.WNOHANG | os.WNOWAIT)
    except ChildProcessError:
        return True
    return False


def death_signal_hook(extra=None):
    """A preexec function: the child gets SIGKILL when the relay dies (Linux), then `extra`.

    None when there is nothing to do.
    """
    prctl = _prctl()
    if prctl is None:
        return extra
    relay = os.getpid()

    def hook() -> None:
        prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
        # The relay may have died between fork and prctl: then die now.
        if os.getppid() != relay:
            os.kill(os.getpid(), signal.SIGKILL)
        if extra is not None:
            extra()

    return hook


def pidfd_open(pid: int) -> int | None:
    if not enabled():
        return None
    try:
        return os.pidfd_open(pid)
    except (AttributeError, OSError):
        return None


# ---------------------------------------------------------------- cgroup v2

CGROUP_PREFIX = "delegate-run-"


#: Where cgroup v2 is mounted, read once per process.
_MOUNT: dict = {}


def cgroup2_mount() -> str | None:
    """Where cgroup v2 is mounted (None: nowhere)."""
    if "cgroup2" not in _MOUNT:
        _MOUNT["cgroup2"] = _read_cgroup2_mount()
    return _MOUNT["cgroup2"]


def _read_cgroup2_mount() -> str | None:
    try:
        with open("/proc/self/mountinfo", "rb") as handle:
            lines = handle.read().decode("utf-8", "replace").splitlines()
    except OSError:
        return None
    for line in lines:
        left, _, right = line.partition(" - ")
        if right.split(" ", 1)[0] == "cgroup2":
            fields = left.split()
            if len(fields) > 4:
                return fields[4].replace("\\040", " ")
    return None


def _own_cgroup() -> str | None:
    try:
        with open("/proc/self/cgroup", "rb") as handle:
            lines = handle.read().decode("utf-8", "replace").splitlines()
    except OSError:
        return None
    for line in lines:
        if line.startswith("0::"):
            return line[3:]
    return None


def own_cgroup_path() -> str | None:
    """The directory of the cgroup v2 this process is in; None where there is none."""
    if not enabled():
        return None
    mount, own = cgroup2_mount(), _own_cgroup()
    if mount is None or own is None:
        return None
    return os.path.normpath(os.path.join(mount, own.lstrip("/")))


def in_cgroup(path: str) -> bool:
    """Whether this process is in the cgroup at `path` (the kernel's word, read now)."""
    return own_cgroup_path() == os.path.normpath(path)


def cgroup_create(run_id: str) -> str | None:
    """A new cgroup v2 directory for one run, beside nothing else; None where none can be made."""
    home = own_cgroup_path()
    if home is None:
        return None
    path = os.path.join(home, CGROUP_PREFIX + run_id)
    try:
        os.mkdir(path)
    except OSError:
        return None
    if not os.access(os.path.join(path, "cgroup.kill"), os.W_OK) or not os.access(
        os.path.join(path, "cgroup.procs"), os.W_OK
    ):
        cgroup_remove(path)
        return None
    return path


def move_self(path: str) -> bool:
    """Move this process (every thread of it) into the cgroup at `path`; whether that worked.

    The kernel makes a move wait for an RCU grace period (several milliseconds
    of idle time); a child forked afterwards is born in the cgroup for nothing.
    """
    try:
        fd = os.open(os.path.join(path, "cgroup.procs"), os.O_WRONLY)
    except OSError:
        return False
    try:
        os.write(fd, b"0")
        return True
    except OSError:
        return False
    finally:
        os.close(fd)


def cgroup_join_hook(path: str):
    """A preexec function that moves the new process into the cgroup at `path`.

    Where that fails the run goes on, swept by the subreaper instead.
    """

    def join() -> None:
        move_self(path)

    return join


def cgroup_members(path: str) -> list[int] | None:
    """The processes in the cgroup; None when it cannot be read (gone, or not a cgroup)."""
    try:
        with open(os.path.join(path, "cgroup.procs"), "rb") as handle:
            return [int(line) for line in handle.read().split() if line.isdigit()]
    except (OSError, ValueError):
        return None


def cgroup_kill(path: str) -> bool:
    """SIGKILL everything in the cgroup, descendants included, at once.

    Refused (False) while this process is in it itself: the relay starts a
    run's processes from inside the run's cgroup (cgrouphost.py), and a
    process of the run may move the relay in too; the caller's own rounds of
    kill by pid end the rest.
    """
    if in_cgroup(path):
        return False
    try:
        fd = os.open(os.path.join(path, "cgroup.kill"), os.O_WRONLY)
    except OSError:
        return False
    try:
        os.write(fd, b"1")
        return True
    except OSError:
        return False
    finally:
        os.close(fd)


def cgroup_remove(path: str) -> bool:
    try:
        os.rmdir(path)
        return True
    except FileNotFoundError:
        return True
    except OSError:
        return False


def is_run_cgroup(path: object) -> bool:
    """Whether `path` names one of our run cgroups (nothing else is ever killed or removed)."""
    return (
        isinstance(path, str)
        and os.path.isabs(path)
        and os.path.basename(path).startswith(CGROUP_PREFIX)
        and "/../" not in path + "/"
        and os.path.isfile(os.path.join(path, "cgroup.kill"))
    )
