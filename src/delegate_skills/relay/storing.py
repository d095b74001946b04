"""What the relay writes to the run store as the run goes (runstore/record.py).

A run goes on without a record when the state dir cannot be written; it is
then one no later command can act on.
"""

from __future__ import annotations

import os

from ..errors import UserError
from ..isolation import linux
from .artifacts import launcher_files
from .console import say


def make_record(
    relay, out_dir: str, started: str, made_dir: bool = True, here: bool = True
) -> None:
    """The run's record in the store, naming the run's cgroup; a run goes on without one,
    unrecorded (and then without a cgroup). A run that runs elsewhere (`here` False: a
    --host run) has no cgroup here."""
    from ..gitmeta import repo_paths
    from ..runstore import record

    adapter, opts = relay.adapter, relay.opts
    reserved = relay.worktree.run_id if relay.worktree is not None else relay.reserved_id
    run_id = reserved if record.valid_id(reserved) else record.new_id()
    if here:
        _host_cgroup(relay, run_id)  # first: the relay's move into it runs beside what follows
    worktree = None
    if relay.worktree is not None:
        tree = relay.worktree
        worktree = {**tree.record(), "gitDir": tree.git_dir, "gitfile": tree.gitfile,
                    "commonDir": tree.common_dir}  # fmt: skip
        repository = tree.source
    else:
        if relay.paths is None:
            relay.paths = repo_paths(opts["cd"])
        repository = relay.paths.toplevel or opts["cd"]
    try:
        relay.record = record.new(
            out_dir,
            reserved=reserved,
            wanted=run_id,
            implementer=adapter.key,
            lane=opts["lane"],
            laneSource=opts["laneSource"],
            readOnly=adapter.read_only(opts),
            workdir=opts["cd"],
            repository=os.path.realpath(repository),
            startedAt=started,
            relay={"pid": os.getpid(), "start": linux.process_start(os.getpid())},
            worktree=worktree,
            previousRun=relay.previous_run,
            outDirMade=made_dir,
            launcherFiles=launcher_files(),
            **({"cgroup": relay.cgroup} if relay.cgroup else {}),
        )
    except OSError as problem:
        relay.release_cgroup()
        relay.cgroup = relay.cgroup_host = None
        say(f"cannot write the run's private record: {problem}; runs cannot follow it")


def _host_cgroup(relay, run_id: str) -> None:
    """Make the run's cgroup (where one can be made) and start moving the relay into it."""
    relay.cgroup = linux.cgroup_create(run_id)
    if relay.cgroup:
        from ..isolation.cgrouphost import CgroupHost

        relay.cgroup_host = CgroupHost(relay.cgroup)
        relay.cgroup_host.enter()


def update_record(relay, **fields) -> None:
    if relay.record is None:
        return
    try:
        relay.record.update(**fields)
    except (OSError, UserError):
        pass  # the record keeps what it had; the result still says everything


def forget_record(relay) -> None:
    """Remove the record of a run that never wrote a result."""
    if relay.record is None:
        return
    import shutil

    relay.release_cgroup()
    shutil.rmtree(relay.record.dir, ignore_errors=True)
    relay.record = None


def keep_index(relay) -> None:
    """A copy of the work tree's own index before the run, for `runs undo` to put back."""
    from ..runstore import record
    from ..store import copy_with_times

    try:
        copy_with_times(os.path.join(relay.paths.git_dir, "index"),
                        os.path.join(relay.record.dir, record.INDEX_BEFORE))  # fmt: skip
    except OSError:
        pass  # no index yet, or unreadable: undo then leaves the index as it finds it


def changes_entry(relay, totals: dict | None = None) -> dict:
    """The change record's trees and where they were taken, for the store."""
    paths = relay.paths
    entry = {
        "before": relay.changes.before,
        "after": relay.changes.after,
        "workTree": paths.toplevel,
        "gitDir": paths.git_dir,
        "commonDir": paths.common_dir,
    }
    if totals is not None:
        entry.update(totals)
    return entry
