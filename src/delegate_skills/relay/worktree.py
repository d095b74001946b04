"""Runs in a git worktree of their own (`--worktree`), and what they changed.

A worktree run starts in a new linked worktree of `--cd`'s repository, on a
new branch `delegate/<run id>` made from the source's HEAD, where the run id
is the one the run store gives the run (reserved here, before the run's
record is written, so branch, worktree and record share it). The worktree lives
under the state dir (`$XDG_STATE_HOME/delegate-skills/worktrees/`), outside
the source work tree, so the source's `git status` never shows it, and the
source tree itself is never written. What the run changed is measured
against the commit it started from: the worktree's files as they are now
(commits made in it, edits, new files git does not ignore) are hashed into a
tree through a private index, and that tree is diffed against `base`. The
worktree's own index is never touched. The ignored files the source's
`.worktreeinclude` names are copied in when the worktree is made
(worktreeinclude.py); git ignores them there too, so they are never the run's change.

Modules needed only at the end of a run (shutil, tempfile) or only when there
is a project config to approve (approval, and hashlib with it) are imported
where they are used: eight parallel relays then hold about 4 MB less each
while their implementers run (benchmarks/fanout.py).
"""

from __future__ import annotations

import os

from ..errors import UserError
from ..gitmeta import GitOutcome, git_outcome, repo_paths, run_git
from ..reading import CONFIG_LIMIT, read_limited
from ..snapshots.gitstate import touched_files

BRANCH_PREFIX = "delegate/"
WORKTREES_DIR = "worktrees"
#: `git worktree add` checks out a whole tree; a big repository needs time.
CHECKOUT_TIMEOUT_S = 600.0
SNAPSHOT_TIMEOUT_S = 600.0
#: Hooks of the source repository do not run for the worktree the relay makes.
NO_HOOKS = ("-c", "core.hooksPath=/dev/null")
#: The lock (in the common git dir's delegate-skills folder) our worktree changes wait in.
ADMIN_LOCK = "worktrees.lock"


class WorktreeError(Exception):
    """A worktree that cannot be made or read; the message is one line for the user."""


class Worktree:
    """A run's worktree: where it is, its branch, the commit it started from."""

    __slots__ = (
        "base", "branch", "cd", "common_dir", "git_dir", "gitfile", "include_skipped", "included",
        "path", "run_id", "source", "source_changes",
    )  # fmt: skip

    def __init__(
        self, path: str, branch: str, base: str, source: str, cd: str, source_changes: int
    ) -> None:
        #: The worktree's own git dir, and the text of the `.git` file that names it.
        self.git_dir: str | None = None
        self.gitfile: str | None = None
        #: The source repository's common git dir, where admin_lock lives.
        self.common_dir: str | None = None
        #: The run id reserved in the run store for the run this worktree was made for.
        self.run_id: str | None = None
        self.path = path
        self.branch = branch
        self.base = base
        #: The source work tree's root.
        self.source = source
        #: Where the implementer runs: --cd's place inside the worktree.
        self.cd = cd
        #: Uncommitted changes in the source, which the worktree does not have.
        self.source_changes = source_changes
        #: The ignored files `.worktreeinclude` named that were copied in when the worktree
        #: was made, and those left out ({path, reason}).
        self.included: list[str] = []
        self.include_skipped: list[dict] = []

    def record(self) -> dict:
        """The `worktree` field of result.json."""
        return {
            "path": self.path,
            "branch": self.branch,
            "base": self.base,
            "source": self.source,
            "sourceUncommitted": self.source_changes,
            "worktreeIncluded": list(self.included),
            **({"worktreeIncludeSkipped": list(self.include_skipped)} if self.include_skipped
               else {}),
        }  # fmt: skip


def worktrees_root() -> str:
    """`<state dir>/worktrees`, outside every work tree."""
    from ..runstore.paths import worktrees_root as root

    return root()


def create(cd: str) -> Worktree:
    """Make a worktree of `cd`'s repository on a new branch from HEAD. Raises WorktreeError."""
    paths = repo_paths(cd)
    if paths.toplevel is None or paths.git_dir is None:
        raise WorktreeError(f"--worktree needs --cd inside a git work tree; {cd} is not in one")
    top = paths.toplevel
    head = run_git(top, "rev-parse", "--verify", "--quiet", "HEAD^{commit}")
    if not head:
        raise WorktreeError(
            f"--worktree starts from the current commit, and {top} has none yet; commit first"
        )
    base = head.decode("ascii", "replace").strip()
    from ..runstore.record import create_dir

    try:
        run_id, _ = create_dir()
    except OSError as problem:
        raise WorktreeError(f"cannot reserve a run id in the run store: {problem}") from None
    branch = BRANCH_PREFIX + run_id
    root = worktrees_root()
    try:
        os.makedirs(root, mode=0o700, exist_ok=True)
    except OSError as problem:
        _release_run_id(branch)
        raise WorktreeError(f"cannot create {root}: {problem.strerror or problem}") from None
    path = os.path.join(root, f"{os.path.basename(top) or 'repo'}-{run_id}")
    common_dir = paths.common_dir or paths.git_dir
    try:
        added = add(top, common_dir, path, base, branch=branch)
        if not added.ok:
            remove(top, common_dir, path, branch)
    except UserError as problem:  # the admin lock could not be taken
        _release_run_id(branch)
        raise WorktreeError(str(problem)) from None
    if not added.ok:
        raise WorktreeError(f"git worktree add failed in {top}: {added.reason()}")
    inside = os.path.relpath(os.path.realpath(cd), os.path.realpath(top))
    run_cd = os.path.normpath(os.path.join(path, inside))
    os.makedirs(run_cd, exist_ok=True)  # --cd was a folder git does not track
    tree = Worktree(path, branch, base, top, run_cd, len(touched_files(top) or []))
    tree.run_id = run_id
    tree.git_dir = repo_paths(path).git_dir
    tree.common_dir = common_dir
    tree.gitfile = read_gitfile(path)
    include_files(tree)
    carry_approval(paths.git_dir, path)
    return tree


def include_files(tree: Worktree) -> None:
    """Copy the ignored files `.worktreeinclude` names from the source into the new worktree."""
    from ..worktreeinclude import copy_into, said
    from .console import say

    tree.included, tree.include_skipped = copy_into(tree.source, tree.path)
    for line in said(tree.included, tree.include_skipped):
        say(line)


def read_gitfile(worktree: str) -> str | None:
    """The text of a worktree's `.git` file (None when it is not a small regular file)."""
    try:
        raw = read_limited(os.path.join(worktree, ".git"), 4096)
    except UserError:
        return None
    return None if raw is None else raw.decode("utf-8", "replace")


def admin_lock(common_dir: str):
    """Our `git worktree add`, `remove`, `prune` and `branch -D` on one repository, one at a time.

    Each of them reads the admin files of every registered worktree (is the
    branch checked out elsewhere?) and fails on one that another of them has
    half written or half removed ("failed to read .git/worktrees/<name>/
    commondir"): parallel runs of one repository must not meet there. Raises
    UserError when the lock cannot be taken.
    """
    from .. import store

    return store.queue((), os.path.join(common_dir, "delegate-skills", ADMIN_LOCK), by_hand=True)


def add(
    repo: str, common_dir: str, path: str, commit: str, branch: str | None = None
) -> GitOutcome:
    """`git worktree add` at `path` of `commit` (on a new `branch` when given), hooks off.

    The registration runs without a checkout under admin_lock; the checkout,
    the long part on a big repository, runs after it as git itself runs it
    (`reset --hard` in the new worktree). Raises UserError from admin_lock.
    """
    new = ("-b", branch) if branch else ()
    with admin_lock(common_dir):
        added = git_outcome(
            repo, *NO_HOOKS, "worktree", "add", "--quiet", "--no-checkout", *new, path, commit
        )
    if not added.ok:
        return added
    return git_outcome(
        path, *NO_HOOKS, "reset", "--hard", "--quiet", "--no-recurse-submodules",
        timeout=CHECKOUT_TIMEOUT_S,
    )  # fmt: skip


def remove(source: str, common_dir: str, path: str, branch: str) -> GitOutcome:
    """Remove the worktree at `path` and delete `branch`; the first failure, else success.

    The run id the branch names goes back to the store when no record was written under it.
    """
    with admin_lock(common_dir):
        removed = git_outcome(source, "worktree", "remove", "--force", "--force", path)
        if not removed.ok and not os.path.exists(path):
            removed = git_outcome(source, "worktree", "prune")
        deleted = git_outcome(source, "branch", "-D", "--quiet", branch)
    _release_run_id(branch)
    if not removed.ok:
        return removed
    return deleted


def _release_run_id(branch: str) -> None:
    """Remove the run id a branch was named for from the store while nothing is under it."""
    from ..runstore.record import release

    if branch.startswith(BRANCH_PREFIX):
        release(branch[len(BRANCH_PREFIX) :])


def carry_approval(source_git_dir: str, worktree: str) -> bool:
    """Approve the worktree's project config when its bytes are the ones approved in the source.

    Any difference leaves the worktree untrusted, as a new worktree always
    is. True when the approval was recorded.
    """
    from .. import store
    from ..fleet import project_config_path

    try:
        raw = read_limited(project_config_path(worktree), CONFIG_LIMIT)
    except UserError:  # unreadable or too big: not carried over, so untrusted
        return False
    if raw is None:
        return False
    from .. import approval

    config_digest = approval.digest(raw)
    if not approval.is_approved(source_git_dir, config_digest):
        return False
    git_dir = repo_paths(worktree).git_dir
    if git_dir is None:
        return False
    lock = approval.queue_lock_path(git_dir)
    try:
        with store.queue((approval.approval_path(git_dir),), lock, by_hand=True):
            approval.approve(git_dir, config_digest)
    except (UserError, OSError):  # the run goes on untrusted, which fails closed
        return False
    return True


# ---------------------------------------------------------------- what changed


def snapshot_tree(work: str, scratch: str, leave_out: list[str] | tuple = ()) -> str:
    """The tree of `work`'s files as they are now, made through a private index in `scratch`.

    Tracked edits, deletions and new files git does not ignore are all in
    it, less the paths `leave_out`; the work tree's own index is left as it
    was. Raises WorktreeError.
    """
    import shutil

    paths = repo_paths(work)
    if paths.toplevel is None or paths.git_dir is None:
        raise WorktreeError(f"{work} is no longer a git work tree")
    index = os.path.join(scratch, "index")
    env = {**os.environ, "GIT_INDEX_FILE": index}
    try:
        # copy2 keeps the index mtime too, which git needs to tell racily clean files
        shutil.copy2(os.path.join(paths.git_dir, "index"), index)
    except OSError:
        _git_or_fail(paths.toplevel, "read-tree", "HEAD", env=env)
    _git_or_fail(paths.toplevel, "add", "-A", env=env, timeout=SNAPSHOT_TIMEOUT_S)
    if leave_out:
        names = b"".join(os.fsencode(name) + b"\0" for name in leave_out)
        _git_or_fail(paths.toplevel, "update-index", "--force-remove", "-z", "--stdin", env=env,
                     input=names)  # fmt: skip
    return _git_or_fail(paths.toplevel, "write-tree", env=env).out.decode().strip()


def _git_or_fail(cwd: str, *args: str, **kw) -> GitOutcome:
    done = git_outcome(cwd, *args, **kw)
    if not done.ok:
        raise WorktreeError(f"git {args[0]} failed in {cwd}: {done.reason()}")
    return done


def diffstat_between(cwd: str, base: str, tree: str) -> dict:
    """Files, lines added and lines removed from `base` to `tree` (binary files count no lines)."""
    out = _git_or_fail(cwd, "diff", "--numstat", "-z", "--no-renames", base, tree).out
    files = []
    for entry in out.split(b"\0"):
        if not entry:
            continue
        added, removed, path = entry.split(b"\t", 2)
        files.append(
            {
                "path": os.fsdecode(path),
                "added": None if added == b"-" else int(added),
                "removed": None if removed == b"-" else int(removed),
            }
        )
    return {
        "filesChanged": len(files),
        "linesAdded": sum(f["added"] or 0 for f in files),
        "linesRemoved": sum(f["removed"] or 0 for f in files),
        "files": files,
    }


def diffstat(work: str, base: str) -> dict | None:
    """What the run changed in `work` since `base`; None when git cannot say."""
    import tempfile

    try:
        with tempfile.TemporaryDirectory(prefix="delegate-diffstat-") as scratch:
            return diffstat_between(work, base, snapshot_tree(work, scratch))
    except (WorktreeError, OSError, ValueError):
        return None
