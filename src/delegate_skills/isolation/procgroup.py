"""The processes of a run: finding every one of them, and ending them.

The relay makes itself the child subreaper (linux.become_subreaper), so every
process the implementer starts stays a descendant of the relay whatever it
does: a daemon that calls setsid or setpgid and whose parent exits is handed
to the relay, not to init. Where a writable cgroup v2 exists, the run also
has a cgroup of its own, which no process can leave. `end` takes all three
views (descendants, the implementer's process group, the cgroup), sends
SIGTERM, gives them `grace` seconds, then SIGKILLs whatever is left and waits
until nothing of the run is alive.

Without Linux's mechanisms the process group is what is found and ended.
"""

from __future__ import annotations

import os
import signal
import time

from . import linux

#: How often to look again while waiting for processes to go.
_POLL_S = 0.01
#: The longest wait for processes that were sent SIGKILL (a process in
#: uninterruptible sleep takes as long as its I/O).
KILL_WAIT_S = 5.0
#: Rounds of SIGKILL for a tree that keeps forking while it is being ended.
_KILL_ROUNDS = 5

stat_fields = linux.stat_fields


def members(pgid: int) -> list[int]:
    """Live (not zombie) processes in process group `pgid`."""
    if pgid <= 1:
        return []
    table = linux.processes()
    if not table:
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return []
        except PermissionError:
            pass
        return [pgid]
    return sorted(p.pid for p in table if p.pgid == pgid and not p.dead)


def descendants(root: int, table: list[linux.Proc] | None = None) -> list[int]:
    """Live descendants of `root` (the zombies among them left out)."""
    table = linux.processes() if table is None else table
    children: dict[int, list[linux.Proc]] = {}
    for proc in table:
        children.setdefault(proc.ppid, []).append(proc)
    found, todo = [], [root]
    while todo:
        for proc in children.get(todo.pop(), []):
            if proc.pid != root:
                todo.append(proc.pid)
                if not proc.dead:
                    found.append(proc.pid)
    return sorted(found)


class RunProcesses:
    """Everything of one run that may still be alive: seen three ways."""

    def __init__(
        self,
        *,
        pgid: int | None = None,
        ancestor: int | None = None,
        cgroup: str | None = None,
        token: str | None = None,
        spare: tuple[int, ...] = (),
    ) -> None:
        self.pgid = pgid if pgid and pgid > 1 else None
        #: NAME=value every process of the run was started with (found in /proc/<pid>/environ).
        self.token = token.encode() if token else None
        #: Processes below this one count (the relay, which is their subreaper).
        self.ancestor = ancestor
        self.cgroup = cgroup
        #: Pids never signalled (the relay itself, and git processes it runs).
        self.spare = {os.getpid(), *spare}

    def alive(self) -> list[int]:
        found: set[int] = set()
        if self.token is None and self.ancestor == os.getpid() and linux.childless():
            # The group's members descend from the relay too: only the cgroup is left to read.
            if self.cgroup is not None:
                found.update(linux.cgroup_members(self.cgroup) or [])
            return sorted(found - self.spare)
        table = linux.processes()
        if self.ancestor is not None and table:
            found.update(descendants(self.ancestor, table))
        if self.pgid is not None:
            if table:
                found.update(p.pid for p in table if p.pgid == self.pgid and not p.dead)
            else:
                found.update(members(self.pgid))
        if self.cgroup is not None:
            found.update(linux.cgroup_members(self.cgroup) or [])
        if self.token is not None:
            found.update(
                p.pid for p in table if not p.dead and linux.environ_has(p.pid, self.token)
            )
        return sorted(found - self.spare)

    def _signal(self, signum: int, pids: list[int]) -> None:
        if self.pgid is not None:
            try:
                os.killpg(self.pgid, signum)
            except OSError:
                pass
        if signum == signal.SIGKILL and self.cgroup is not None:
            linux.cgroup_kill(self.cgroup)
        for pid in pids:
            try:
                os.kill(pid, signum)
            except OSError:
                pass

    def wait_gone(self, seconds: float, keep: int | None = None) -> bool:
        """Wait up to `seconds` until nothing is alive; reap the orphans handed to us."""
        ends = time.monotonic() + seconds
        while True:
            reap_orphans(keep)
            if not self.alive():
                return True
            if time.monotonic() >= ends:
                return False
            time.sleep(_POLL_S)

    def end(self, grace: float, keep: int | None = None, settle: float = 0.0) -> list[int]:
        """SIGTERM everything, `grace` seconds, then SIGKILL; the pids that were alive.

        `keep` is a child the caller reaps itself (its Popen), never reaped here.
        `settle`: seconds in which what is left may still end by itself first
        (bubblewrap's namespace init reports the command's exit before it has
        exited itself); what ends then was not left running.
        """
        left = self.alive()
        if left and settle > 0 and self.wait_gone(settle, keep):
            return []
        left = self.alive() if left else left
        if not left:
            return []
        self._signal(signal.SIGTERM, left)
        if not self.wait_gone(grace, keep):
            self.kill(keep)
        return left

    def kill(self, keep: int | None = None) -> None:
        """SIGKILL everything, again while new processes appear, and wait (bounded)."""
        for _ in range(_KILL_ROUNDS):
            pids = self.alive()
            if not pids:
                return
            self._signal(signal.SIGKILL, pids)
            if self.wait_gone(KILL_WAIT_S / _KILL_ROUNDS, keep):
                return


def reap_orphans(keep: int | None = None) -> None:
    """Collect exited orphans the kernel handed to this subreaper (never `keep`'s status)."""
    if linux.childless():
        return
    me = os.getpid()
    for proc in linux.processes() if linux.enabled() else []:
        if proc.ppid == me and proc.dead and proc.pid != keep:
            try:
                os.waitpid(proc.pid, os.WNOHANG)
            except ChildProcessError:
                pass


def sweep(pgid: int, grace_s: float) -> list[int]:
    """End every process left in group `pgid` (no subreaper view); the pids that were there."""
    return RunProcesses(pgid=pgid).end(grace_s)


def kill_all(pgid: int) -> None:
    """SIGKILL group `pgid` and wait (bounded) until it is empty."""
    RunProcesses(pgid=pgid).kill()


def death_signal_hook(extra=None):
    """A preexec function that makes the child die when the relay does (Linux), else `extra`."""
    return linux.death_signal_hook(extra)
