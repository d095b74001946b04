"""A run's process group: who is still in it, ending it, and tying it to the relay.

The implementer leads its own process group, and everything it starts stays
in that group unless it leaves on purpose (a daemon that calls setsid). The
relay ends the group before it takes the read-only verdict, so nothing of
the run writes after `completed`; `runs wait` ends a group whose relay died.
On Linux the implementer is also started with a parent-death signal, so a
SIGKILLed relay takes its implementer with it.
"""

from __future__ import annotations

import os
import signal
import sys
import time

#: How often to look again while waiting for a group to empty.
_POLL_S = 0.01
#: The longest wait for processes that were sent SIGKILL (a process in
#: uninterruptible sleep takes as long as its I/O).
KILL_WAIT_S = 5.0


def stat_fields(pid: int | str) -> list[bytes] | None:
    """The fields of /proc/<pid>/stat after the command name (state first); None if unreadable."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            return handle.read().rsplit(b")", 1)[1].split()
    except (OSError, IndexError):
        return None


def members(pgid: int) -> list[int]:
    """Live (not zombie) processes in process group `pgid`."""
    if pgid <= 1:
        return []
    if not os.path.isdir("/proc/self"):
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return []
        except PermissionError:
            pass
        return [pgid]
    found = []
    try:
        names = os.listdir("/proc")
    except OSError:
        return []
    wanted = str(pgid).encode()
    for name in names:
        if not name.isdigit():
            continue
        fields = stat_fields(name)
        # fields[0] is the state, fields[2] the process group.
        if fields and len(fields) > 2 and fields[2] == wanted and fields[0] not in (b"Z", b"X"):
            found.append(int(name))
    return sorted(found)


def _signal(pgid: int, signum: int) -> None:
    try:
        os.killpg(pgid, signum)
    except OSError:
        pass


def wait_empty(pgid: int, seconds: float) -> bool:
    """Wait up to `seconds` for the group to empty; whether it did."""
    ends = time.monotonic() + seconds
    while members(pgid):
        if time.monotonic() >= ends:
            return False
        time.sleep(_POLL_S)
    return True


def sweep(pgid: int, grace_s: float) -> list[int]:
    """End every process left in the group: SIGTERM, `grace_s` to leave, then SIGKILL.

    Returns the processes that were still there; waits (bounded) until none is.
    """
    left = members(pgid)
    if not left:
        return []
    _signal(pgid, signal.SIGTERM)
    if not wait_empty(pgid, grace_s):
        _signal(pgid, signal.SIGKILL)
        wait_empty(pgid, KILL_WAIT_S)
    return left


def kill_all(pgid: int) -> None:
    """SIGKILL the group and wait (bounded) until it is empty."""
    _signal(pgid, signal.SIGKILL)
    wait_empty(pgid, KILL_WAIT_S)


#: prctl(2) option that sets the signal a process gets when its parent dies.
_PR_SET_PDEATHSIG = 1


def death_signal_hook():
    """A preexec function that makes the child die when the relay does (Linux), else None.

    Built once per relay: the version probe and the run share it.
    """
    if "hook" not in _HOOK:
        _HOOK["hook"] = _build_hook()
    return _HOOK["hook"]


_HOOK: dict = {}


def _build_hook():
    if not sys.platform.startswith("linux"):
        return None
    try:
        import ctypes

        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (ImportError, OSError, AttributeError):
        return None
    relay = os.getpid()

    def hook() -> None:
        prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
        # The relay may have died between fork and prctl: then die now.
        if os.getppid() != relay:
            os.kill(os.getpid(), signal.SIGKILL)

    return hook
