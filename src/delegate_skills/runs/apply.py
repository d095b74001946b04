"""`runs apply`: a finished worktree run's recorded change, into its source work tree.

What lands is exactly what the run's change record shows (`runs diff`,
result.json's `changes`): the difference from the commit the run started
from to the `after` tree its relay recorded once every process of the run
had ended. The worktree itself is not read again, so a file written there
later (by --check, by anyone) does not land, and a file the run force-added
under an ignore rule does. Through git's own machinery only:

1. a private copy of the source's index takes the source's current version
   of every path the change touches (`add -u`, tracked files only: the
   source's untracked files are never hashed), giving `ours`;
2. the patch (`base` → `after`) is applied to that copy with `apply --3way`:
   a path both sides changed in overlapping ways stops everything, and the
   paths are named;
3. `read-tree -m -u ours merged` writes the result into the source work
   tree (gitland.switch): git's checkout, which refuses to overwrite what it
   does not track.

New objects go to the private object store, never the source's. The
source's index is never written: the change shows as unstaged edits for the
orchestrator to review and commit. A change to a submodule is refused.
Which worktree, branch and source a run has, and its trees, come from its
record in the store.

Part of a run lands with `only`/`exclude`: literal repository-relative paths,
each a file or a folder (everything under it); `exclude` wins over `only`.
The part is made a tree of its own (`base` with the chosen paths as the run
left them), and that tree lands as above, so the landing record, and `runs
undo` with it, covers exactly the paths that landed. A later apply of the
same run keeps in that record what an earlier one landed and is still in
place, so one undo takes back every part. Before anything is written, apply
names the paths it lands over the source's uncommitted changes (`overlap`);
those are merged as in step 2, never overwritten.
"""

from __future__ import annotations

import os
import posixpath
import shutil
import sys
import tempfile
from typing import NamedTuple

from ..errors import UserError
from ..gitmeta import BoundGit, repo_paths
from ..relay.worktree import BRANCH_PREFIX
from ..runstore import liveness, lookup
from ..snapshots.snapshot import Snapshotter, clear_flags, hidden_entries
from . import gitland
from .view import Run, show

GITLINK = "160000"
ZERO_OID = "0" * 40


class Change(NamedTuple):
    """One path of the run's change: its status letter, and its mode and object in `after`."""

    status: str
    path: str
    submodule: bool
    mode: str
    oid: str


class RunTree:
    """The worktree of one finished run: path, branch, base commit, source, git dir."""

    def __init__(self, run: Run, tree: dict) -> None:
        self.run = run
        self.record = run.record
        self.name = run.id
        self.out_dir = run.out_dir
        self.path: str = tree["path"]
        self.branch: str = tree["branch"]
        self.base: str = tree["base"]
        self.source: str = tree["source"]
        git_dir = tree.get("gitDir")
        self.git_dir: str | None = git_dir if isinstance(git_dir, str) else None
        gitfile = tree.get("gitfile")
        self.gitfile: str | None = gitfile if isinstance(gitfile, str) else None
        self.removed = tree.get("removed") is True


def finished_tree(ref: str, verb: str) -> RunTree:
    """The worktree of the finished run `ref` names. Raises UserError."""
    run = show(ref)
    record = run.record
    if liveness.status(record) == "orphaned":
        liveness.end_orphans(record, 2.0)
    status = liveness.status(record)
    if status in liveness.IN_FLIGHT:
        raise UserError(
            f"{ref}: the run is still {status}; wait for it (runs wait {run.id}) "
            f"before you {verb} it"
        )
    tree = lookup.worktree(record)
    if tree is None:
        where = record.text("workdir") or "its --cd"
        raise UserError(
            f"{ref}: not a --worktree run; its changes are already in {where}, "
            "nothing to apply or discard"
        )
    if not tree["branch"].startswith(BRANCH_PREFIX):
        raise UserError(f"{ref}: the run's record names branch {tree['branch']}, not a run's")
    return RunTree(run, tree)


def source_paths(tree: RunTree):
    paths = repo_paths(tree.source) if os.path.isdir(tree.source) else None
    if paths is None or paths.toplevel is None:
        raise UserError(f"{tree.source}: the run's source work tree is gone or no longer in git")
    if os.path.realpath(paths.toplevel) != os.path.realpath(tree.source):
        raise UserError(f"{tree.source}: no longer the top of a git work tree")
    return paths


def _recorded_after(tree: RunTree) -> str:
    """The `after` tree of the run's change record. Raises UserError when it has none."""
    entry = tree.record.section("changes") or {}
    after = entry.get("after")
    if not isinstance(after, str) or not after:
        raise UserError(
            f"cannot apply {tree.name}: the run has no complete change record (its work tree "
            f"could not be snapshotted once it ended); merge branch {tree.branch} yourself"
        )
    return after


def apply(ref: str, only: tuple[str, ...] = (), exclude: tuple[str, ...] = (), notify=None) -> dict:
    """Bring the run's recorded change, or the part `only`/`exclude` choose, into its source
    work tree, uncommitted. `notify` gets the line said before landing over uncommitted
    changes (default: stderr). Raises UserError."""
    chosen = [_literal(path, "--only") for path in only]
    dropped = [_literal(path, "--exclude") for path in exclude]
    tree = finished_tree(ref, "apply")
    theirs = _recorded_after(tree)
    paths = source_paths(tree)
    overlap: list[str] | None = []
    with (
        gitland.landing_lock(paths.common_dir),
        tempfile.TemporaryDirectory(prefix="delegate-apply-") as scratch,
    ):
        source = Snapshotter(paths.toplevel, paths.git_dir, paths.common_dir, scratch).git()
        every = _changes(source, tree.base, theirs)
        changes = _select(every, chosen, dropped, tree.name)
        _refuse_submodules(changes)
        if len(changes) < len(every):
            theirs = _part(source, tree.base, changes, scratch)
        landing = {c.path for c in changes}
        left_out = [c.path for c in every if c.path not in landing]
        if changes:
            ours, target, overlap = _land(source, tree, theirs, changes, scratch, notify or _say)
            gitland.record_landing(
                tree.record, "applied", before=ours, after=target, workTree=paths.toplevel,
                gitDir=paths.git_dir, commonDir=paths.common_dir, leftOut=left_out,
                overlap=overlap, also={"overlap": overlap},
            )  # fmt: skip
    return {
        "id": tree.name,
        "outDir": tree.out_dir,
        "source": paths.toplevel,
        "branch": tree.branch,
        "applied": [c.path for c in changes],
        "added": [c.path for c in changes if c.status == "A"],
        "modified": [c.path for c in changes if c.status not in ("A", "D")],
        "deleted": [c.path for c in changes if c.status == "D"],
        "leftOut": left_out,
        "overlap": overlap,
    }


def _say(line: str) -> None:
    sys.stderr.write(line + "\n")
    sys.stderr.flush()


def _literal(path: str, flag: str) -> str:
    """A --only/--exclude path as the change record names it. Raises UserError."""
    text = posixpath.normpath(path.replace(os.sep, "/")) if path else ""
    if not text or text == "." or text.startswith(("/", "../")) or text == "..":
        raise UserError(
            f"{flag} {path}: give a path relative to the repository root, as "
            "runs diff --name-only prints it; nothing was applied"
        )
    return text


def _under(path: str, given: str) -> bool:
    return path == given or path.startswith(given + "/")


def _select(every: list[Change], only: list[str], exclude: list[str], name: str) -> list[Change]:
    """The changes `only` (all, when empty) and not `exclude` name. Raises UserError when a
    path names nothing the run changed, or nothing is left to apply."""
    if not only and not exclude:
        return every
    unknown = [
        f"{flag} {given}"
        for flag, given_paths in (("--only", only), ("--exclude", exclude))
        for given in given_paths
        if not any(_under(c.path, given) for c in every)
    ]
    if unknown:
        raise UserError(
            f"{', '.join(unknown)}: the run did not change that path (runs diff {name} "
            "--name-only lists what it changed); nothing was applied"
        )
    picked = [
        c
        for c in every
        if (not only or any(_under(c.path, p) for p in only))
        and not any(_under(c.path, p) for p in exclude)
    ]
    if not picked:
        raise UserError(
            "--only and --exclude leave nothing of the run's change to apply; nothing was applied"
        )
    return picked


def _part(git: BoundGit, base: str, changes: list[Change], scratch: str) -> str:
    """The tree of `base` with the `changes` paths as the run left them."""
    env = {"GIT_INDEX_FILE": os.path.join(scratch, "part.index")}
    read = git.run("read-tree", base, env=env, timeout=gitland.TIMEOUT)
    if not read.ok:
        raise UserError(f"cannot read the commit the run started from: {read.reason()}")
    # Removals first: a path the run turned from a file into a folder (or back) then fits.
    ordered = sorted(changes, key=lambda c: c.status != "D")
    lines = b"".join(
        (b"0 " + ZERO_OID.encode() if c.status == "D" else f"{c.mode} {c.oid}".encode())
        + b"\t" + os.fsencode(c.path) + b"\0"
        for c in ordered
    )  # fmt: skip
    done = git.run("update-index", "-z", "--index-info", env=env, input=lines)
    if not done.ok:
        raise UserError(f"cannot pick the part of the run's change to apply: {done.reason()}")
    return gitland.write_tree(git, env)


def _changes(git: BoundGit, base: str, theirs: str) -> list[Change]:
    """Every path that differs from `base` to `theirs`."""
    listed = git.run("diff-tree", "-r", "-z", "--raw", "--no-renames", base, theirs)
    if not listed.ok:
        raise UserError(f"cannot compare the run's change with its start: {listed.reason()}")
    fields = listed.out.split(b"\0")
    found = []
    for i in range(0, len(fields) - 1, 2):
        meta = fields[i].decode("ascii", "replace").lstrip(":").split()
        if len(meta) < 5:
            continue
        found.append(
            Change(meta[4][:1], os.fsdecode(fields[i + 1]), GITLINK in meta[:2], meta[1], meta[3])
        )
    return found


def _refuse_submodules(changes: list[Change]) -> None:
    submodules = [c.path for c in changes if c.submodule]
    if submodules:
        raise UserError(
            f"cannot apply: the run changes the submodule {', '.join(submodules)}; submodules "
            "are never landed for you (your checkout of it is left alone); merge branch "
            "yourself"
        )


def _land(
    git: BoundGit, tree: RunTree, theirs: str, changes: list[Change], scratch: str, notify
) -> tuple[str, str, list[str] | None]:
    """Merge in a private index, then let git's checkout write the work tree.

    Returns (ours, target, overlap): the source's tree before and after, and the
    paths landed over its uncommitted changes (None when git could not say).
    """
    touched = [c.path for c in changes]
    env = {"GIT_INDEX_FILE": os.path.join(scratch, "ours.index"), "GIT_LITERAL_PATHSPECS": "1"}
    tracked = _seed(git, env, touched)
    earlier = _earlier_apply(git, env, tree, tracked)
    ours = gitland.write_tree(git, env)
    before = _with_earlier_part(git, env, scratch, earlier, ours)
    overlap = _overlap(git, env, before, touched)
    merge_env = {**env, "GIT_INDEX_FILE": os.path.join(scratch, "merge.index")}
    shutil.copyfile(env["GIT_INDEX_FILE"], merge_env["GIT_INDEX_FILE"])
    patch = git.run(
        "diff-tree", "-r", "-p", "--binary", "--full-index", "--no-renames", "--no-ext-diff",
        "--no-textconv", tree.base, theirs, timeout=gitland.TIMEOUT,
    )  # fmt: skip
    if not patch.ok:
        raise UserError(f"cannot read the run's change: {patch.reason()}")
    merged = git.run(
        "apply", "--cached", "--3way", "--binary", env=merge_env, input=patch.out,
        timeout=gitland.TIMEOUT,
    )  # fmt: skip
    if not merged.ok:
        _refuse(git, tree, merge_env, merged.reason())
    target = gitland.write_tree(git, merge_env)
    what = f"cannot apply {tree.name}"
    gitland.guard_untracked(git, env, tracked, ours, target, what)
    restore_env = {**env, "GIT_INDEX_FILE": os.path.join(scratch, "restore.index")}
    shutil.copyfile(env["GIT_INDEX_FILE"], restore_env["GIT_INDEX_FILE"])
    if overlap:  # merged cleanly; said before the work tree is written
        notify(
            f"note: {', '.join(overlap)} hold(s) uncommitted changes of yours: the run's change "
            "is merged into them, never over them (runs undo puts back what they hold now)"
        )
    gitland.switch(git, env, restore_env, ours, target, touched, what)
    return before, target, overlap


def _earlier_apply(git: BoundGit, env: dict, tree: RunTree, tracked: set[str]):
    """(tree before, its entries as `diff-tree --raw` lists them) of an earlier apply of this run
    into this work tree, or None. The private index in `env` takes the current bytes of the paths
    it landed, so they can be compared with what it landed."""
    landing = tree.record.reloaded().section("landing") or {}
    first, landed = landing.get("before"), landing.get("after")
    if landing.get("state") != "applied" or landing.get("workTree") != git.work_tree:
        return None
    if not isinstance(first, str) or not isinstance(landed, str):
        return None
    listed = git.run("diff-tree", "-r", "-z", "--raw", "--no-renames", first, landed, env=env)
    if not listed.ok:
        return None
    fields = listed.out.split(b"\0")
    entries = [
        (meta, fields[i + 1])
        for i in range(0, len(fields) - 1, 2)
        if len(meta := fields[i].lstrip(b":").split()) >= 5
    ]
    root = git.work_tree
    present = [
        path
        for _, path in entries
        if os.fsdecode(path) in tracked or os.path.lexists(os.path.join(root, os.fsdecode(path)))
    ]
    if present:
        added = git.run("add", "-A", "-f", "--pathspec-from-file=-", "--pathspec-file-nul",
                        env=env, input=b"".join(p + b"\0" for p in present),
                        timeout=gitland.TIMEOUT)  # fmt: skip
        if not added.ok:
            return None
    return landed, entries


def _with_earlier_part(git: BoundGit, env: dict, scratch: str, earlier, ours: str) -> str:
    """`ours`, with the paths an earlier apply of this run landed, and that still hold what it
    landed, as they were before it: `runs undo` then takes back both applies.

    `ours` itself when there is no earlier apply in this work tree, or none of it is left.
    """
    if earlier is None:
        return ours
    landed, entries = earlier
    moved = git.run("diff-tree", "-r", "-z", "--name-only", "--no-renames", landed, ours, env=env)
    if not moved.ok:
        return ours
    since = set(moved.out.split(b"\0"))
    lines = b""
    for meta, path in entries:
        if path not in since:
            mode, oid = (b"0", ZERO_OID.encode()) if meta[0] == b"000000" else (meta[0], meta[2])
            lines += mode + b" " + oid + b"\t" + path + b"\0"
    if not lines:
        return ours
    kept_env = {**env, "GIT_INDEX_FILE": os.path.join(scratch, "before.index")}
    shutil.copyfile(env["GIT_INDEX_FILE"], kept_env["GIT_INDEX_FILE"])
    done = git.run("update-index", "-z", "--index-info", env=kept_env, input=lines)
    return gitland.write_tree(git, kept_env) if done.ok else ours


def _overlap(git: BoundGit, env: dict, ours: str, touched: list[str]) -> list[str] | None:
    """The `touched` paths where the source differs from its HEAD, edited or staged. (An
    untracked file where the run writes is refused before anything lands: guard_untracked.)"""
    listed = git.run("diff-tree", "-r", "-z", "--name-only", "--no-renames", "HEAD", ours,
                     env=env, plain=True, timeout=gitland.TIMEOUT)  # fmt: skip
    if not listed.ok:
        return None
    return sorted({os.fsdecode(p) for p in listed.out.split(b"\0") if p} & set(touched))


def _seed(git: BoundGit, env: dict, touched: list[str]) -> set[str]:
    """The private index: the source's, with the source's current bytes of `touched` paths.

    Returns every path the source tracks.
    """
    real = os.path.join(git.git_dir, "index")
    try:
        shutil.copy2(real, env["GIT_INDEX_FILE"])
    except FileNotFoundError:
        git.run("read-tree", "--empty", env=env)
    except OSError as problem:
        raise UserError(f"cannot copy {real}: {problem.strerror or problem}") from None
    tracked = gitland.tracked_paths(git, env)
    hidden = set(hidden_entries(git, env) or [])
    wanted = [p for p in (os.fsencode(t) for t in touched) if p in hidden]
    if wanted:
        clear_flags(git, wanted, env)
    present = [path for path in touched if path in tracked]
    if present:
        added = git.run(
            "add", "-u", "--pathspec-from-file=-", "--pathspec-file-nul", env=env,
            input=b"".join(os.fsencode(p) + b"\0" for p in present), timeout=gitland.TIMEOUT,
        )  # fmt: skip
        if not added.ok:
            raise UserError(f"cannot read the source's files the run touches: {added.reason()}")
    return tracked


def _refuse(git: BoundGit, tree: RunTree, env: dict, reason: str) -> None:
    unmerged = git.run("ls-files", "-u", "-z", env=env)
    names = sorted(
        {
            os.fsdecode(entry.split(b"\t", 1)[1])
            for entry in unmerged.out.split(b"\0")
            if b"\t" in entry
        }
    )
    if names:
        raise UserError(
            f"cannot apply {tree.name}: {tree.source} has changes that conflict with the "
            f"run's in {', '.join(names)}; nothing was changed. Commit or stash them and apply "
            f"again, or merge branch {tree.branch} yourself"
        )
    raise UserError(f"cannot apply {tree.name} to {tree.source}: {reason}; nothing was changed")
