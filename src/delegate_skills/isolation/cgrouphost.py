"""The relay inside its run's cgroup while it starts the run's processes.

Every process the implementer starts must be in the run's cgroup from its
first instruction, so that `runs cancel` finds it even after the relay died.
A process moved between cgroups makes the kernel wait for an RCU grace period
(5–20 ms, nearly all of it idle); one forked by a process already inside is
born there at no cost. So the relay does not have each child join the cgroup
before it execs: it moves itself in, in a background thread, while it
snapshots the work tree; starts the version probe and the implementer from
inside; and moves itself back out, in the background again, while the
implementer runs. Before a child is started, and before the cgroup is
removed, the move under way is waited for.

While the relay is inside, `linux.cgroup_kill` refuses (it would kill the
relay too): what is left is ended by pid, as the subreaper finds it. Where the
relay cannot move itself, each child joins the cgroup as before
(child.py), and the kernel's answer, not this object, says where the relay is.
"""

from __future__ import annotations

import threading

from . import linux


class CgroupHost:
    """Moves the relay into the run's cgroup at `path` and back to where it was."""

    def __init__(self, path: str) -> None:
        self.path = path
        #: The cgroup the relay was in when the run began: where it goes back to.
        self.home = linux.own_cgroup_path()
        self._move: threading.Thread | None = None

    def enter(self) -> None:
        """Start moving the relay into the run's cgroup (never where it could not come back)."""
        if self.home is not None:
            self._start(self.path)

    def leave(self) -> None:
        """Start moving the relay back out (its next children are born outside)."""
        self.settle()
        if self.home is not None and linux.in_cgroup(self.path):
            self._start(self.home)

    def settle(self) -> None:
        """Wait until the move under way, if any, has ended."""
        if self._move is not None:
            self._move.join()
            self._move = None

    def release(self) -> None:
        """Out of the cgroup, now: before it is removed (a relay inside keeps it busy)."""
        self.leave()
        self.settle()

    def _start(self, target: str) -> None:
        self.settle()
        self._move = threading.Thread(
            target=linux.move_self, args=(target,), name="cgroup-move", daemon=True
        )
        self._move.start()
