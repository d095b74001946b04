"""`runs prune`: drop the runs, worktrees and branches that hold no unlanded work.

It works on the runs of the repository it is run in (`everywhere` for every
repository on the machine), and only from the run store: a run directory no
record names is never touched.

What goes (each with its reason):

- a run that worked in place, once it ended (its change is in the tree
  already), or whose change was undone;
- a worktree run that was applied or discarded, or that ended with no
  change: its worktree and branch, if still there and no other run that has
  not landed works in them (a continuation), and its files;
- an orphan: a worktree under our worktrees root that no record names,
  whose tree is clean and whose branch holds no commit the source's other
  branches lack.

What stays: running runs; a --host run that has not come back (`runs wait`
still fetches it); every worktree run whose worktree or branch holds work
nobody landed (listed with the commands that land or drop it), unless
`force`; and a run that ended less than the minimum age ago (default
DEFAULT_MIN_AGE, `--older-than` sets it; 0 for none), unless it was applied
or discarded. In a run directory only the files the record says our relay
wrote are removed, and the directory itself only when the relay made it and
nothing else is left in it.
"""

from __future__ import annotations

import os
import stat
import time

from ..errors import UserError
from ..gitmeta import git_outcome, repo_paths
from ..runstore import liveness, lookup
from ..runstore import record as records
from ..runstore.record import Record
from .view import Run, parse_iso

#: Runs that ended less than this long ago are kept, unless applied or discarded.
DEFAULT_MIN_AGE = "15m"
DEFAULT_MIN_AGE_S = 15 * 60.0
_DECIDED = ("applied", "discarded")


def parse_age(text: str) -> float | None:
    """Seconds for `--older-than`: days (7d) or an h/m/s duration (12h, 90m), 0 for none;
    None if malformed."""
    from .. import durations

    if text.rstrip("smhd").strip("0") == "" and text[:1] == "0" and len(text) <= 8:
        return 0.0
    if text.endswith("d") and text[:-1].isdigit() and len(text) <= 6:
        return int(text[:-1]) * 86400.0
    ms = durations.parse_timeout_ms(text)
    return None if ms is None else ms / 1000


def _repository(cwd: str) -> str:
    top = repo_paths(cwd).toplevel
    if top is None:
        raise UserError(
            f"runs prune works on the runs of the repository it is run in, and {cwd} is not "
            "in one; run it there, or pass --all for every repository's runs"
        )
    return os.path.realpath(top)


def prune(
    dry_run: bool = False,
    older_than_s: float | None = None,
    force: bool = False,
    everywhere: bool = False,
    cwd: str | None = None,
) -> dict:
    """Plan (and unless `dry_run`, do) the clean-up. Raises UserError for a bad argument."""
    if older_than_s is not None and older_than_s < 0:
        raise UserError("--older-than must not be negative")
    min_age = DEFAULT_MIN_AGE_S if older_than_s is None else older_than_s
    repo = None if everywhere else _repository(cwd or os.getcwd())
    now = time.time()
    removed, kept = [], []
    every = records.all_records()
    for record in every:
        run = Run.of(record)
        if repo is not None and os.path.realpath(run.repository or "") != repo:
            continue
        status = liveness.status(record)
        if status in liveness.IN_FLIGHT:
            continue
        entry = {"id": record.id, "outDir": run.out_dir, "status": status}
        reason, work, hold = _verdict(record, status)
        if hold is not None:
            kept.append({**entry, "reason": hold})
        elif lookup.landing(record) not in _DECIDED and _younger(record, min_age, now):
            kept.append({**entry, "reason": f"ended less than {_age_text(min_age)} ago"})
        elif work and not force:
            how = (f"land it (runs apply {record.id}) or drop it (runs discard {record.id}), "
                   "or prune --force")  # fmt: skip
            kept.append({**entry, "reason": f"{reason}: {how}"})
        else:
            entry["reason"] = reason + (" (dropped: --force)" if work else "")
            if not dry_run:
                entry["left"] = _remove_run(run, force=work)
            removed.append(entry)
    named = {os.path.realpath(t["path"]) for r in every if (t := lookup.worktree(r))}
    orphans = _orphans(named, dry_run, repo, min_age, now)
    return {"dryRun": dry_run, "removed": removed, "kept": kept, "orphans": orphans}


def _age_text(seconds: float) -> str:
    from .. import durations

    return durations.format_duration(int(seconds * 1000))


def _verdict(record: Record, status: str) -> tuple[str | None, bool, str | None]:
    """(why the run may go, whether it holds work, why it must stay whatever the flags)."""
    if record.section("remote") and liveness.ended(record) is None:
        return None, False, f"a --host run that has not come back; runs wait {record.id} fetches it"
    tree = lookup.worktree(record)
    landing = lookup.landing(record)
    if tree is None:
        if landing == "undone":
            return "undone; nothing of it is left in the tree", False, None
        return "worked in place; its change is in the tree", False, None
    if landing in _DECIDED:
        return landing, False, None
    if landing == "undone":
        return "undone", False, None
    if _holds_work(tree):
        return "unlanded work in its worktree or branch", True, None
    return "no change to land", False, None


def _holds_work(tree: dict) -> bool:
    """Whether the run's worktree has changes, or its branch commits beyond its base."""
    path, branch, base, source = tree["path"], tree["branch"], tree["base"], tree["source"]
    if os.path.isdir(path):
        status = git_outcome(path, "status", "--porcelain")
        if not status.ok or status.out.strip():
            return True  # changed, or git cannot say: keep it
    ref = f"refs/heads/{branch}"
    if git_outcome(source, "rev-parse", "--verify", "--quiet", ref).ok:
        ahead = git_outcome(source, "rev-list", "--count", ref, f"^{base}")
        return not ahead.ok or ahead.out.strip() != b"0"
    return False


def _younger(record: Record, min_age: float, now: float) -> bool:
    if not min_age:
        return False
    ended = liveness.ended(record) or {}
    stamp = parse_iso(ended.get("finishedAt")) or parse_iso(record.text("startedAt"))
    return stamp is None or now - stamp.timestamp() < min_age


def _remove_run(run: Run, force: bool) -> list[str]:
    """Remove the run's worktree and branch (unless another run works there), its files and
    record. Returns the names of files in the run directory left there."""
    from .apply import RunTree
    from .discard import remove_tree, unlanded_sharers

    tree = run.worktree
    if tree is not None and not tree.get("removed"):
        held = RunTree(run, tree)
        if not unlanded_sharers(held):
            try:
                remove_tree(held, force=force)
            except UserError:
                pass  # its worktree and branch are gone already
    left = _remove_files(run.record)
    liveness.drop_cgroup(run.record)
    records.remove(run.record.id)
    return left


def _remove_files(record: Record) -> list[str]:
    """Remove the files the record says our relay wrote; the names of the others.

    Only in the very directory the run was given (the same inode), only
    regular files, never through a link.
    """
    out_dir = record.text("outDir") or ""
    names = {n for n in (record.get("artifacts") or []) if isinstance(n, str) and os.sep not in n}
    try:
        fd = os.open(out_dir, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    except OSError:
        return []
    try:
        if not _same_dir(record, fd):
            return sorted(os.listdir(fd))
        left = []
        for name in os.listdir(fd):
            try:
                info = os.stat(name, dir_fd=fd, follow_symlinks=False)
            except OSError:
                continue
            if name in names and stat.S_ISREG(info.st_mode):
                try:
                    os.unlink(name, dir_fd=fd)
                    continue
                except OSError:
                    pass
            left.append(name)
    finally:
        os.close(fd)
    if not left and record.get("outDirMade") is True:
        try:
            os.rmdir(out_dir)
        except OSError:
            pass
    return sorted(left)


def _same_dir(record: Record, fd: int) -> bool:
    """Whether `fd` is the directory the run was given (by the identity recorded at its start)."""
    ident = record.get("outDirId")
    if not (isinstance(ident, list) and len(ident) == 2):
        return False
    info = os.fstat(fd)
    return [info.st_dev, info.st_ino] == ident


def _orphans(
    named: set[str], dry_run: bool, repo: str | None, min_age: float, now: float
) -> list[dict]:
    """Worktrees under our root that no record names: removed when they hold nothing.

    One younger than the minimum age may belong to a run still starting (its
    worktree is made before its record); it is left out.
    """
    from ..relay.worktree import admin_lock
    from ..runstore.paths import worktrees_root

    root = worktrees_root()
    try:
        found = sorted(os.path.join(root, name) for name in os.listdir(root))
    except OSError:
        return []
    common_here = None
    if repo is not None:
        common_here = repo_paths(repo).common_dir
        common_here = os.path.realpath(common_here) if common_here else None
    report = []
    for path in found:
        if os.path.realpath(path) in named or not os.path.isdir(path):
            continue
        try:
            if min_age and now - os.stat(path).st_mtime < min_age:
                continue
        except OSError:
            continue
        common = git_outcome(path, "rev-parse", "--path-format=absolute", "--git-common-dir")
        if not common.ok:
            if repo is None:
                report.append({"path": path, "prunable": False, "removed": False,
                               "reason": "not a git worktree"})  # fmt: skip
            continue
        common_dir = os.fsdecode(common.out.strip())
        if common_here is not None and os.path.realpath(common_dir) != common_here:
            continue
        branch = git_outcome(path, "symbolic-ref", "--quiet", "--short", "HEAD")
        name = os.fsdecode(branch.out.strip()) if branch.ok else None
        if _orphan_holds_work(path):
            report.append({"path": path, "branch": name, "prunable": False, "removed": False,
                           "reason": "holds changes or commits no other branch has"})  # fmt: skip
            continue
        if not dry_run:
            git = ["--git-dir=" + common_dir]
            with admin_lock(common_dir):
                git_outcome(common_dir, *git, "worktree", "remove", "--force", "--force", path)
                if name and name.startswith("delegate/"):
                    git_outcome(common_dir, *git, "branch", "-D", "--quiet", name)
        report.append({"path": path, "branch": name, "prunable": True, "removed": not dry_run,
                       "reason": "no run names it and it holds nothing"})  # fmt: skip
    return report


def _orphan_holds_work(path: str) -> bool:
    """Whether an orphan worktree has changes, or a HEAD no branch but a run's contains."""
    status = git_outcome(path, "status", "--porcelain")
    if not status.ok or status.out.strip():
        return True
    others = git_outcome(
        path, "for-each-ref", "--contains", "HEAD", "--format=%(refname)", "refs/heads/"
    )
    if not others.ok:
        return True
    refs = os.fsdecode(others.out).split()
    return not [ref for ref in refs if not ref.startswith("refs/heads/delegate/")]
