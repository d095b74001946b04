"""Whether a run still lives, from its record alone.

A record names the relay and the implementer's process group each with its
kernel start time, so a pid the kernel has since given to another process is
never taken for the run's. A run that has not ended is `running` while its
relay lives; once the relay is gone it is `orphaned` while a process of the
run still runs, and `lost` when none does. An ended run has the status its
relay recorded.
"""

from __future__ import annotations

import os

from ..isolation import linux, procgroup
from .record import TOKEN_ENV, Record

IN_FLIGHT = ("running", "orphaned")


def _int(value) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def pid_alive(pid: object, start: object) -> bool:
    """Whether `pid` is alive and (where the kernel tells) still the process started at `start`."""
    pid = _int(pid)
    if pid is None or pid <= 1:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    now = linux.process_start(pid)
    if isinstance(start, str) and now is not None and now != start:
        return False
    return linux.is_zombie(pid) is not True


def relay_of(record: Record) -> tuple[object, object]:
    """(pid, start time) of the run's relay."""
    relay = record.section("relay") or {}
    return relay.get("pid"), relay.get("start")


def relay_alive(record: Record) -> bool:
    return pid_alive(*relay_of(record))


def run_processes(record: Record) -> procgroup.RunProcesses:
    """What may be left of a run whose relay is gone.

    The process group counts only while its leader's start time matches; the
    cgroup only when it is one of ours; every process started with the run's
    token in its environment counts too.
    """
    group = record.section("group") or {}
    pgid = _int(group.get("pgid"))
    if pgid is not None and not _group_is_the_runs(pgid, group.get("start")):
        pgid = None
    cgroup = record.get("cgroup")
    cgroup = cgroup if linux.is_run_cgroup(cgroup) else None
    token = record.get("token")
    return procgroup.RunProcesses(
        pgid=pgid,
        cgroup=cgroup,
        token=f"{TOKEN_ENV}={token}" if isinstance(token, str) and token else None,
    )


def _group_is_the_runs(pgid: int, start: object) -> bool:
    """A process group is the run's while its leader is the process recorded, or gone."""
    now = linux.process_start(pgid)
    if now is None:
        return True  # the leader is gone (or the kernel does not say): members keep the group
    return isinstance(start, str) and now == start


def leftovers(record: Record) -> list[int]:
    """Live processes of a run whose relay is gone."""
    return run_processes(record).alive()


def ended(record: Record) -> dict | None:
    """How the run ended, as its relay recorded it; None while it has not."""
    found = record.section("ended")
    return found if found is not None and isinstance(found.get("status"), str) else None


def status(record: Record) -> str:
    """running | orphaned | lost, or the status the run ended with."""
    done = ended(record)
    if done is not None:
        return done["status"]
    if relay_alive(record):
        return "running"
    fresh = ended(record.reloaded())  # it may have ended between the two looks
    if fresh is not None:
        return fresh["status"]
    return "orphaned" if leftovers(record) else "lost"


def end_orphans(record: Record, grace_s: float) -> None:
    """End what is left of the run once its relay is gone (never while it lives)."""
    if relay_alive(record):
        return
    run_processes(record).end(grace_s)
    drop_cgroup(record)


def drop_cgroup(record: Record) -> None:
    """Remove the run's cgroup once its relay is gone and nothing is left in it (a relay
    killed outright could not)."""
    cgroup = record.get("cgroup")
    if linux.is_run_cgroup(cgroup) and not relay_alive(record) and not linux.cgroup_members(cgroup):
        linux.cgroup_remove(cgroup)
