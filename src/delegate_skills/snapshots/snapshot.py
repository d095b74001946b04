"""Snapshots of a work tree as git trees, and what differs between two of them.

A snapshot hashes every file git does not ignore (tracked or not) into a
tree, through a private index and a private object store:

- the index is a copy of the repository's own, so git's stat cache spares it
  rehashing files that did not change, with every assume-unchanged and
  skip-worktree bit cleared, so nothing is hidden from it; the second snapshot
  of a run reuses the index the first one left, never the repository's (which
  the implementer may have rewritten);
- stat data is compared strictly (`core.trustctime`, `core.checkStat`,
  `core.fileMode`): a same-size rewrite with its mtime put back still changes
  the file's ctime, and a chmod is a change even where the user turned
  `core.fileMode` off;
- new objects go to an object store of our own under the state dir (one for
  every repository: objects are named by their content), with the
  repository's objects as an alternate: the user's `.git/objects` never grows
  by a snapshot, and a file that did not change is never written twice;
- git runs bound to the git dir and work tree resolved before the run, with
  every repository-configured program off (gitmeta.BoundGit).

The user's index, objects and refs are never written.
"""

from __future__ import annotations

import os

from ..gitmeta import BoundGit
from ..runstore.paths import state_dir
from ..store import copy_with_times

OBJECTS_DIR = "objects"
#: Untracked files (not ignored) a snapshot hashes at most, and their bytes.
UNTRACKED_FILES_BUDGET = 20_000
UNTRACKED_BYTES_BUDGET = 512 * 1024 * 1024
BUDGET_ENV = "DELEGATE_RELAY_SNAPSHOT_BUDGET"  # "<files>:<bytes>", for tests
STRICT = (
    "core.trustctime=true",
    "core.checkStat=default",
    "core.fileMode=true",
    "core.safecrlf=false",
    "core.looseCompression=1",
)
_SNAPSHOT_TIMEOUT_S = 600.0
EMPTY_TREE = "4b825dc642cb6eb9a060e54bf8d69288fbee4904"


class SnapshotError(Exception):
    """No snapshot could be made; the message says why, in one line."""


def private_objects(common_dir: str) -> str:
    """Our own object store, beside the repository whose common git dir is `common_dir`.

    One store serves every repository: objects are named by their content, so
    they cannot clash, and each git we run names the repository's own store
    as its alternate.
    """
    path = os.path.join(state_dir(), OBJECTS_DIR)
    for sub in ("info", "pack"):
        os.makedirs(os.path.join(path, sub), mode=0o700, exist_ok=True)
    return path


def budget() -> tuple[int, int]:
    raw = os.environ.get(BUDGET_ENV, "")
    files, _, size = raw.partition(":")
    if files.isdigit() and size.isdigit():
        return int(files), int(size)
    return UNTRACKED_FILES_BUDGET, UNTRACKED_BYTES_BUDGET


class Snapshotter:
    """Takes the snapshots of one work tree, with one private index kept in `scratch`."""

    def __init__(self, work_tree: str, git_dir: str, common_dir: str, scratch: str) -> None:
        self.work_tree = work_tree
        self.git_dir = git_dir
        self.common_dir = common_dir
        self.index = os.path.join(scratch, "index")
        self.objects = private_objects(common_dir)
        self.env = {
            "GIT_INDEX_FILE": self.index,
            "GIT_OBJECT_DIRECTORY": self.objects,
            "GIT_ALTERNATE_OBJECT_DIRECTORIES": os.path.join(common_dir, "objects"),
        }
        #: Why the last snapshot may have missed files (unreadable, a nested repository).
        self.incomplete: str | None = None
        #: The tree the last snapshot wrote.
        self.tree: str | None = None

    def git(self) -> BoundGit:
        """A git for this work tree that reads (and writes) our objects and index.

        The one the last snapshot used, when there is one: it has read the
        configuration's drivers once already.
        """
        if getattr(self, "_git", None) is not None:
            return self._git
        return BoundGit(self.work_tree, self.git_dir, env=self.env)

    def take(self, first: bool, exclude: list[str] | None = None) -> str:
        """The tree of the work tree's files now. Raises SnapshotError.

        The first snapshot of a run starts from the repository's index; a
        later one from the index the first left. `exclude` names work-tree
        files left out (the relay's own artifacts, when they are inside).
        """
        self._git = None  # the configuration is read again: the run may have changed it
        git = self._git = self.git()
        git.prefetch()
        spec = ["--", ".", *(f":(exclude,literal){path}" for path in exclude or [])]
        if first:
            self._index_stamp = _stamp(os.path.join(self.git_dir, "index"))
            self._seed_index(git, spec)
        seeded = None if first else _stamp(self.index)
        added = git.run(
            *_strict(), "add", "-A", "--ignore-errors", *spec, timeout=_SNAPSHOT_TIMEOUT_S
        )
        self.incomplete = None
        if added.code not in (0, 1):
            raise SnapshotError(f"git add could not read the work tree: {added.reason()}")
        if added.code == 1:
            self.incomplete = added.reason().removeprefix("error: ")
        if not first:
            self._add_force_added(git, exclude or [])
        if seeded is not None and _stamp(self.index) == seeded and self.tree is not None:
            # git writes an index through a new file renamed over the old one: the same inode,
            # size and times mean nothing was added, so the tree is the last one.
            return self.tree
        # Not plain: writing the index re-reads racily clean files through their filters.
        wrote = git.run("write-tree", timeout=_SNAPSHOT_TIMEOUT_S)
        if not wrote.ok:
            raise SnapshotError(f"git write-tree failed: {wrote.reason()}")
        self.tree = wrote.out.decode("ascii", "replace").strip()
        return self.tree

    def _add_force_added(self, git: BoundGit, exclude: list[str]) -> None:
        """Files the repository's own index tracks under an ignore rule, added since the first
        snapshot (`git add -f`): they are in the work tree's change too.

        Nothing to do while the repository's index is as it was.
        """
        real = os.path.join(self.git_dir, "index")
        if _stamp(real) == getattr(self, "_index_stamp", None):
            return
        listed = git.run("ls-files", "-z", "--cached", "--ignored", "--exclude-standard",
                         env={"GIT_INDEX_FILE": real}, plain=True,
                         timeout=_SNAPSHOT_TIMEOUT_S)  # fmt: skip
        if not listed.ok:
            self.incomplete = self.incomplete or "git could not list the repository's index"
            return
        left_out = {os.fsencode(path) for path in exclude}
        root = os.fsencode(self.work_tree)
        listed_paths = [p for p in listed.out.split(b"\0") if p and p not in left_out]
        forced = [p for p in listed_paths if os.path.lexists(os.path.join(root, p))]
        if not forced:
            return
        added = git.run(*_strict(), "add", "-f", "--ignore-errors", "--pathspec-from-file=-",
                        "--pathspec-file-nul", env={"GIT_LITERAL_PATHSPECS": "1"},
                        input=b"".join(p + b"\0" for p in forced),
                        timeout=_SNAPSHOT_TIMEOUT_S)  # fmt: skip
        if added.code != 0:
            self.incomplete = self.incomplete or added.reason().removeprefix("error: ")

    def _seed_index(self, git: BoundGit, spec: list[str]) -> None:
        """Copy the repository's index, then (at once) list its flags and the untracked files."""
        real = os.path.join(self.git_dir, "index")
        try:
            copy_with_times(real, self.index)  # git's racy-entry check reads the index's mtime
        except FileNotFoundError:
            if git.run("read-tree", "--empty", plain=True).code != 0:
                raise SnapshotError("git could not start an empty index") from None
        except OSError as problem:
            raise SnapshotError(f"cannot copy {real}: {problem.strerror or problem}") from None
        else:
            os.chmod(self.index, 0o600)
        # One listing answers both questions: the index's flags (-v tags) and the untracked
        # files ("?" entries) the budget counts.
        listed = git.run(
            "ls-files", "-v", "-z", "--cached", "--others", "--exclude-standard", "--directory",
            "--no-empty-directory", *spec, timeout=_SNAPSHOT_TIMEOUT_S, plain=True,
        )  # fmt: skip
        if not listed.ok:
            raise SnapshotError(f"git could not list the index: {listed.reason()}")
        flagged, untracked = split_listing(listed.out)
        self._check_budget(untracked)
        if flagged:
            cleared = clear_flags(git, flagged)
            if not cleared.ok:
                raise SnapshotError(f"git could not clear index flags: {cleared.reason()}")

    def _check_budget(self, untracked: list[bytes]) -> None:
        max_files, max_bytes = budget()
        files = total = 0
        for raw in untracked:
            path = os.path.join(self.work_tree, os.fsdecode(raw))
            for size in _sizes(path):
                files += 1
                total += size
                if files > max_files or total > max_bytes:
                    raise SnapshotError(
                        f"the untracked files in {self.work_tree} are more than a change "
                        f"record holds ({max_files} files or {max_bytes // (1 << 20)} MiB); "
                        "ignore or commit them"
                    )


def _stamp(path: str) -> tuple[int, int, int] | None:
    """What tells whether a file was rewritten: inode, size and change time."""
    try:
        info = os.stat(path)
    except OSError:
        return None
    return info.st_ino, info.st_size, info.st_ctime_ns


def _strict() -> list[str]:
    args: list[str] = []
    for setting in STRICT:
        args += ["-c", setting]
    return args


def _sizes(path: str):
    """The sizes of the files at `path` (a file, or a folder git listed whole)."""
    try:
        info = os.lstat(path)
    except OSError:
        return
    if not os.path.isdir(path) or os.path.islink(path):
        yield info.st_size
        return
    for top, _dirs, files in os.walk(path):
        for name in files:
            try:
                yield os.lstat(os.path.join(top, name)).st_size
            except OSError:
                continue


def clear_flags(git: BoundGit, paths: list[bytes], env: dict[str, str] | None = None):
    """Clear assume-unchanged and skip-worktree on `paths` in git's index; the last outcome.

    Two runs: given both options, `update-index --stdin` applies only the first
    to each path.
    """
    listed = b"".join(path + b"\0" for path in paths)
    outcome = None
    for option in ("--no-assume-unchanged", "--no-skip-worktree"):
        outcome = git.run("update-index", option, "-z", "--stdin", env=env, input=listed,
                          timeout=_SNAPSHOT_TIMEOUT_S)  # fmt: skip
        if not outcome.ok:
            return outcome
    return outcome


def hidden_entries(git: BoundGit, env: dict[str, str] | None = None) -> list[bytes] | None:
    """Index paths marked assume-unchanged or skip-worktree (None when git cannot say)."""
    return hidden_from(git.run("ls-files", "-v", "-z", env=env, timeout=_SNAPSHOT_TIMEOUT_S,
                               plain=True))  # fmt: skip


def split_listing(out: bytes) -> tuple[list[bytes], list[bytes]]:
    """(flagged index paths, untracked paths) in `ls-files -v --cached --others -z` output."""
    flagged, untracked = [], []
    for entry in out.split(b"\0"):
        if len(entry) < 3:
            continue
        if entry[:2] == b"? ":
            untracked.append(entry[2:])
        elif entry[:1].islower() or entry[:1] == b"S":
            flagged.append(entry[2:])
    return flagged, untracked


def hidden_from(listed) -> list[bytes] | None:
    """The flagged paths in `ls-files -v -z` output (None when git failed)."""
    if not listed.ok:
        return None
    flagged = []
    for entry in listed.out.split(b"\0"):
        # A lower-case tag is assume-unchanged; "S" (or "s") is skip-worktree.
        if len(entry) > 2 and (entry[:1].islower() or entry[:1] == b"S"):
            flagged.append(entry[2:])
    return flagged
