"""Preparing a run: its directory and store record, the first snapshot, the read-only sandbox.

The run's record in the store (runstore/record.py) is made before anything
is written to the run directory; the run directory gets the artifacts a
reader expects (run.json, the brief, an empty events file), and the work tree
its first snapshot before the implementer can touch it.
"""

from __future__ import annotations

import os

from .artifacts import LAUNCHER_MADE_DIR_ENV, STDERR_NAME, artifact_names
from .console import say
from .rundir import FINAL, RESERVE, RESULT, RunDir, default_out_dir, iso_now
from .storing import changes_entry, forget_record, keep_index, make_record, update_record


def open_run(relay, brief: str) -> int | None:
    """Make the run directory, its record and fresh artifacts; an exit code when it cannot."""
    adapter, opts = relay.adapter, relay.opts
    started = iso_now()
    try:
        out_dir = opts["outDir"] or default_out_dir(opts["cd"], started)
    except OSError as problem:
        say(f"cannot prepare run artifacts: {problem}")
        return not_started(relay)
    relay.run = RunDir(out_dir, started, brief)
    relay.state = adapter.new_state(opts)
    relay.state.run = relay.run
    made = not os.path.isdir(out_dir) or os.environ.get(LAUNCHER_MADE_DIR_ENV) == "1"
    make_record(relay, out_dir, started, made_dir=made)
    relay.state.scratch = relay.record.dir if relay.record is not None else None
    if relay.record is not None:
        from ..runstore.record import BRIEF_COPY

        try:
            relay.record.keep(BRIEF_COPY, brief)
        except OSError:
            pass  # a review of the run then says its brief cannot be read
    fresh = fresh_artifacts(relay, brief)
    foreign = relay.run.foreign_artifact({*fresh, RESULT, FINAL, RESERVE})
    if foreign is not None:
        say(
            f"--out-dir {out_dir} already holds {os.path.basename(foreign)}, which no relay "
            f"run wrote; move {foreign} aside or choose a new --out-dir"
        )
        return not_started(relay)
    try:
        relay.run.prepare(fresh)
    except OSError as problem:
        say(f"cannot prepare run artifacts: {problem}")
        return not_started(relay)
    relay.run.reserve()
    try:
        info = os.stat(relay.run.path)
        update_record(relay, outDirId=[info.st_dev, info.st_ino], artifacts=sorted(fresh))
    except OSError:
        pass
    run_id = f" · run id {relay.record.id}" if relay.record else ""
    say(f"{adapter.label} run started · {relay.run.path} · relay pid {os.getpid()}{run_id}")
    if relay.worktree is not None:
        say_worktree(relay)
    return None


def fresh_artifacts(relay, brief: str) -> dict[str, bytes]:
    from .marker import RUN_FILE, run_marker

    adapter, opts, run = relay.adapter, relay.opts, relay.run
    marker = run_marker(
        adapter.key, opts["lane"], opts["cd"], run.path, run.started_at, run_id=relay.run_id()
    )
    fresh = {RUN_FILE: marker, adapter.brief_name: brief.encode("utf-8", errors="replace")}
    if adapter.events_name:
        fresh[adapter.events_name] = b""
    if adapter.stderr_file:
        fresh[STDERR_NAME] = b""
    fresh.update(adapter.extra_artifacts(opts, run))
    relay.fresh_names = list(fresh)
    return fresh


def say_worktree(relay) -> None:
    tree = relay.worktree
    say(f"worktree {tree.path} · branch {tree.branch} from {tree.base[:12]}")
    if tree.source_changes:
        say(
            f"{tree.source} has {tree.source_changes} uncommitted change(s); they are "
            f"not in the worktree, which starts from commit {tree.base[:12]}"
        )


def not_started(relay) -> int:
    """A run that stops before it starts: usage exit, and no worktree left behind."""
    from .configure import drop_worktree

    drop_worktree(relay)
    forget_record(relay)
    return 2


def drop_unlaunched_worktree(relay) -> None:
    """A --worktree run that never launched its implementer leaves no worktree behind."""
    from .configure import drop_worktree

    if relay.worktree is not None and relay.worktree_owned:
        relay.dropped_worktree = {**relay.worktree.record(), "removed": True}
        drop_worktree(relay)
        update_record(relay, worktree=relay.dropped_worktree)


def begin_changes(relay) -> None:
    """Snapshot the work tree before the implementer can touch it."""
    from ..gitmeta import repo_paths

    if relay.paths is None:
        relay.paths = repo_paths(relay.opts["cd"])
    if relay.paths.toplevel is None or relay.record is None:
        return
    from ..snapshots.changes import ChangeRecord

    relay.changes = ChangeRecord.for_run(
        relay.paths, relay.record.dir, [relay.run.file(name) for name in artifact_names(relay)]
    )
    keep_index(relay)
    relay.changes.begin()
    relay.state.changes = relay.changes
    if relay.changes.before is not None:
        update_record(relay, changes=changes_entry(relay))


def arm_read_only(relay) -> None:
    """The tripwire baseline of a read-only run (its sandbox is relay/confine.py's)."""
    from ..runstore.paths import worktrees_root
    from ..snapshots.gitprint import RepoSpec
    from ..snapshots.gitstate import Excluded, Tripwire

    paths = relay.paths
    adapter = relay.adapter
    spec = None
    if paths.toplevel is not None:
        spec = RepoSpec(
            paths.toplevel,
            paths.git_dir,
            paths.common_dir,
            own_branch=relay.worktree.branch if relay.worktree is not None else None,
            sibling_root=worktrees_root(),
            cli_state=list(adapter.git_dir_state),
        )
    excluded = Excluded(relay.changes.excluded if relay.changes is not None else [])
    sandbox = relay.sandbox
    enforced = sandbox is not None and sandbox.enforced is not None
    # Enforced with nothing of the repository writable, its refs, index and git dirs cannot
    # change: their fingerprint (six git queries, before and after) proves nothing more.
    whole = enforced and not sandbox.lets_write_inside(
        [paths.toplevel, paths.git_dir, paths.common_dir]
    )
    relay.tripwire = Tripwire(
        spec, relay.changes, excluded, enforced=enforced, fingerprint=not whole
    )
