"""A run's change record: what this run, and nothing before it, changed in the work tree.

Before the implementer starts and again once every process of the run has
ended, the work tree is snapshotted (snapshot.py). The difference of the two
trees is the run's change: the user's own uncommitted edits from before the
run are in both, so they are not in it. The result's `changes` lists each
file (path, status, lines added and removed, binary, the old path of a
rename, old and new modes when they differ) with totals, and the run
directory gets `changes.patch`, a binary-safe patch `git apply` takes. The
two trees are kept in the run's private record, which `runs diff` and
`runs undo` read.

The relay's own artifacts are left out when the run directory sits inside
the work tree.
"""

from __future__ import annotations

import os

from ..gitmeta import UNBORN, RepoPaths, repo_paths, run_git
from .snapshot import EMPTY_TREE, SnapshotError, Snapshotter

PATCH_NAME = "changes.patch"
#: The largest patch a change record writes; past it `changes` is null.
PATCH_LIMIT = 64 * 1024 * 1024
STATUS = {"A": "added", "M": "modified", "D": "deleted", "R": "renamed", "T": "typechange"}
GITLINK = "160000"
#: How deep `nested_records` follows repositories nested in dirty repositories.
NESTED_DEPTH = 8


class ChangeRecord:
    """The two snapshots of one run's work tree, and what differs between them."""

    def __init__(self, paths: RepoPaths, scratch: str, excluded: list[str] | None = None) -> None:
        self.paths = paths
        self.snapshots = Snapshotter(paths.toplevel, paths.git_dir, paths.common_dir, scratch)
        #: Work-tree paths ("/"-separated) of the relay's own artifacts, when they are inside.
        self.excluded = excluded or []
        self.before: str | None = None
        self.after: str | None = None
        #: Why there is no record (one line), when there is none.
        self.problem: str | None = None
        self.incomplete: str | None = None
        #: The tree of HEAD when the run began (the empty tree before a first commit), or None.
        self.head: str | None = None
        self._overlap: list[str] | None = None

    @classmethod
    def for_run(cls, paths: RepoPaths, scratch: str, artifacts: list[str]) -> ChangeRecord:
        """The record of a run whose artifacts (absolute paths) are left out of it."""
        top = os.path.realpath(paths.toplevel)
        inside = []
        for path in artifacts:
            rel = os.path.relpath(
                os.path.join(os.path.realpath(os.path.dirname(path)), os.path.basename(path)), top
            )
            if rel != ".." and not rel.startswith(".." + os.sep):
                inside.append(rel.replace(os.sep, "/"))
        return cls(paths, scratch, inside)

    def _take(self, first: bool) -> str | None:
        try:
            tree = self.snapshots.take(first, exclude=self.excluded)
        except (SnapshotError, OSError) as problem:
            self.problem = self.problem or str(problem)
            return None
        if self.snapshots.incomplete:
            self.incomplete = self.incomplete or self.snapshots.incomplete
        return tree

    def begin(self) -> None:
        # What the user had committed when the run began: asked with the repository's paths,
        # else beside the snapshot.
        known = self.paths.head_tree
        head = None
        if known is None:
            head = self.snapshots.git().start("rev-parse", "-q", "--verify", "HEAD^{tree}",
                                              plain=True)  # fmt: skip
        self.before = self._take(first=True)
        if known is not None:
            self.head = EMPTY_TREE if known == UNBORN else known
            return
        found = head.result()
        if found.ok:
            self.head = found.out.decode("ascii", "replace").strip() or None
        elif found.code == 1 and not found.err.strip():
            self.head = EMPTY_TREE  # no commit yet: every file is the user's uncommitted work

    def end(self) -> None:
        if self.before is not None:
            self.after = self._take(first=False)

    @property
    def ready(self) -> bool:
        return self.before is not None and self.after is not None

    def same(self) -> bool | None:
        """Whether the work tree's files are as they were (None when either snapshot failed)."""
        return self.before == self.after if self.ready else None

    def overlap(self, files: list[dict]) -> list[str] | None:
        """The paths this run changed that already held uncommitted changes when it began.

        Uncommitted: the work tree's snapshot before the run (tracked and
        untracked files, staged or not) differs there from HEAD's tree at that
        time. `files` is the run's `changes` files; a rename counts both paths.
        None when it cannot be known.
        """
        if self._overlap is not None:
            return self._overlap
        if not self.ready or self.head is None:
            return None
        changed = {f["path"] for f in files} | {f["oldPath"] for f in files if "oldPath" in f}
        found: set[str] = set()
        if changed and self.head != self.before:
            listed = self.snapshots.git().run(
                "diff-tree", "-r", "-z", "--name-only", "--no-renames", self.head, self.before,
                timeout=600, plain=True,
            )  # fmt: skip
            if not listed.ok:
                return None
            found = {os.fsdecode(p) for p in listed.out.split(b"\0") if p} & changed
        self._overlap = sorted(found)
        return self._overlap

    def field(self, run_dir) -> tuple[dict | None, str | None]:
        """(`changes` for result.json, or None with the reason). Writes changes.patch."""
        if not self.ready:
            return None, self.problem or "the work tree could not be snapshotted"
        return describe(self.snapshots.git(), self.before, self.after, run_dir)


def nested_records(cwd: str, scratch: str, depth: int = 0) -> list[ChangeRecord]:
    """A change record inside each repository (submodule or nested repo) git lists as dirty.

    git reports a dirty submodule as one entry however often its files change;
    only a look inside it shows an edit to a file that was already dirty.
    """
    root = repo_paths(cwd).toplevel
    out = run_git(cwd, "status", "--porcelain", "-z") if root else None
    if root is None or not out or depth >= NESTED_DEPTH:
        return []
    found = []
    for entry in out.split(b"\0"):
        if len(entry) < 4:
            continue
        inner = os.path.join(root, os.fsdecode(entry[3:]).rstrip("/"))
        if os.path.islink(inner) or not os.path.isdir(inner):
            continue
        paths = repo_paths(inner)
        if paths.toplevel is None or os.path.realpath(paths.toplevel) != os.path.realpath(inner):
            continue  # a plain directory of this same repository
        where = os.path.join(scratch, f"nested-{depth}-{len(found)}")
        os.makedirs(where, mode=0o700, exist_ok=True)
        record = ChangeRecord(paths, where, None)
        record.begin()
        found.append(record)
        found += nested_records(inner, scratch, depth + 1)
    return found


def describe(git, before: str, after: str, run_dir=None) -> tuple[dict | None, str | None]:
    """The change from tree `before` to tree `after`, and the patch in `run_dir`."""
    files: list[dict] = []
    made = None
    if before != after:
        common = ["diff-tree", "-r", "-M", "--no-ext-diff", "--no-textconv"]
        listed = git.start(*common, "-z", "--raw", "--numstat", before, after, timeout=600,
                           plain=True)  # fmt: skip
        if run_dir is not None:  # the patch at the same time
            made = git.start(*common, "-p", "--binary", "--full-index", "--no-color", before,
                             after, timeout=600, plain=True)  # fmt: skip
        listed = listed.result()
        if not listed.ok:
            return None, f"git diff-tree failed: {listed.reason()}"
        files = parse_raw_numstat(listed.out)
    patch_path = None
    if run_dir is not None:
        patch = b""
        if made is not None:
            made = made.result()
            if not made.ok:
                return None, f"git diff-tree failed: {made.reason()}"
            patch = made.out
        if len(patch) > PATCH_LIMIT:
            return None, (
                f"the change is larger than a change record holds ({len(files)} files, "
                f"{len(patch) // (1 << 20)} MiB of patch); inspect the work tree directly"
            )
        try:
            run_dir.replace(PATCH_NAME, patch)
            patch_path = run_dir.file(PATCH_NAME)
        except OSError as problem:
            return None, f"cannot write {PATCH_NAME}: {problem.strerror or problem}"
    return {
        "files": files,
        "filesChanged": len(files),
        "linesAdded": sum(f["linesAdded"] or 0 for f in files),
        "linesRemoved": sum(f["linesRemoved"] or 0 for f in files),
        "patch": patch_path,
        "before": before,
        "after": after,
    }, None


def _count(field: bytes) -> int | None:
    """A numstat count; None for a binary file's "-"."""
    return None if field == b"-" else int(field)


def parse_raw_numstat(out: bytes) -> list[dict]:
    """Files from `diff-tree -z --raw --numstat` output, in git's order."""
    fields = out.split(b"\0")
    raws: list[dict] = []
    stats: list[tuple[int | None, int | None]] = []
    i = 0
    while i < len(fields):
        field = fields[i]
        if not field:
            i += 1
            continue
        if field.startswith(b":"):
            meta = field[1:].decode("ascii", "replace").split()
            old_mode, new_mode, letter = meta[0], meta[1], meta[4][:1]
            entry = {"path": os.fsdecode(fields[i + 1]), "status": STATUS.get(letter, "modified")}
            i += 2
            if letter in ("R", "C"):
                entry = {"path": os.fsdecode(fields[i]), "status": STATUS.get(letter, "modified"),
                         "oldPath": entry["path"]}  # fmt: skip
                i += 1
            entry["_modes"] = (old_mode, new_mode)
            raws.append(entry)
            continue
        added, removed, rest = [*field.split(b"\t", 2), b"", b""][:3]
        stats.append((_count(added), _count(removed)))
        i += 3 if rest == b"" else 1  # a rename's numstat names both paths after it
    files = []
    for n, entry in enumerate(raws):
        added, removed = stats[n] if n < len(stats) else (0, 0)
        old_mode, new_mode = entry.pop("_modes")
        record = {
            "path": entry["path"],
            "status": entry["status"],
            "linesAdded": added,
            "linesRemoved": removed,
            "binary": added is None,
        }
        if "oldPath" in entry:
            record["oldPath"] = entry["oldPath"]
        if old_mode != new_mode and entry["status"] in ("modified", "renamed", "typechange"):
            record["oldMode"], record["newMode"] = old_mode, new_mode
        if GITLINK in (old_mode, new_mode):
            record["submodule"] = True
        files.append(record)
    return files
