"""What git can say about the work tree: touched files and the read-only tripwire.

`touched_files` is `git status --porcelain`, line for line (None when git
cannot say). The tripwire answers "did a read-only run change anything?"
with three values: True (a change is proven), False (coverage was complete
and nothing changed) and None (coverage was incomplete: git missing, an
unreadable path, a submodule, too many ignored files). It compares the
status before and after, fingerprints (content, mode, index entry) every
path that was already dirty, so an edit to an already-modified file is
caught too, and compares what `gitprint` records of refs, index, git-dir
files and ignored files. The relay's own artifacts are left out when they
sit inside the repository.
"""

from __future__ import annotations

import os
import stat

from ..gitmeta import run_git

UNREADABLE = "<unreadable>"
DIRECTORY = "<directory>"


def touched_files(cwd: str) -> list[str] | None:
    out = run_git(cwd, "status", "--porcelain")
    if out is None:
        return None
    text = out.decode("utf-8", errors="replace")
    return [line.rstrip() for line in text.split("\n") if line.rstrip()]


def repo_root(cwd: str) -> str | None:
    out = run_git(cwd, "rev-parse", "--show-toplevel")
    if not out:
        return None
    root = out[:-1] if out.endswith(b"\n") else out
    return os.fsdecode(root) or None


def _strict(out: bytes | None) -> str | None:
    if out is None:
        return None
    try:
        return out.decode("utf-8")
    except UnicodeDecodeError:
        return None


def status_entries(cwd: str) -> list[tuple[str, str, str | None]] | None:
    """(status, path, rename/copy origin) for every entry, untracked files listed one by one."""
    text = _strict(run_git(cwd, "status", "--porcelain", "-z", "-uall"))
    if text is None:
        return None
    fields = [f for f in text.split("\0") if f]
    entries = []
    i = 0
    while i < len(fields):
        field = fields[i]
        status, path = field[:2], field[3:]
        origin = None
        if "R" in status or "C" in status:
            i += 1
            origin = fields[i] if i < len(fields) else None
        entries.append((status, path, origin))
        i += 1
    return entries


def _ascii_fold(text: str) -> str:
    return text.translate(_FOLD)


_FOLD = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")


def _canonical_file(path: str) -> str:
    """`path` with its parent resolved and its leaf spelled as the directory spells it."""
    absolute = os.path.abspath(path)
    try:
        parent = os.path.realpath(os.path.dirname(absolute), strict=True)
    except OSError:
        return absolute
    leaf = os.path.basename(absolute)
    canonical = os.path.join(parent, leaf)
    try:
        os.lstat(canonical)
        names = os.listdir(parent)
    except OSError:
        return canonical
    if leaf in names:
        return canonical
    matches = [name for name in names if _ascii_fold(name) == _ascii_fold(leaf)]
    return os.path.join(parent, matches[0]) if len(matches) == 1 else canonical


def _path_key(root: str, path: str) -> str:
    try:
        real_root = os.path.realpath(root, strict=True)
    except OSError:
        real_root = os.path.abspath(root)
    return os.path.relpath(_canonical_file(path), real_root)


class _Exclusions:
    def __init__(self, root: str, artifacts: list[str]) -> None:
        self.root = root
        self.keys = {_path_key(root, p) for p in artifacts}
        self.folded = {_ascii_fold(k) for k in self.keys}

    def __contains__(self, path: str) -> bool:
        if path in self.keys:
            return True
        return _ascii_fold(path) in self.folded and (
            _path_key(self.root, os.path.join(self.root, path)) in self.keys
        )


def _tree_state(cwd: str, artifacts: list[str]) -> list | None:
    root = repo_root(cwd)
    entries = status_entries(cwd) if root else None
    if root is None or entries is None:
        return None
    excluded = _Exclusions(root, artifacts)
    state = []
    for status, path, origin in entries:
        if path not in excluded:
            state.append([status, "path", path])
        if origin is not None and origin not in excluded:
            kept = "".join(c if c in "RC" else " " for c in status)
            state.append([kept, "origin", origin])
    return state


def _fingerprint(path: str) -> str:
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return "absent"
    except OSError:
        return UNREADABLE
    if stat.S_ISLNK(info.st_mode):
        try:
            return "symlink:" + os.fsencode(os.readlink(path)).hex()
        except OSError:
            return UNREADABLE
    if stat.S_ISDIR(info.st_mode):
        return DIRECTORY
    if not stat.S_ISREG(info.st_mode):
        return UNREADABLE
    import hashlib  # only read-only runs with dirty paths need it

    digest = hashlib.sha256()
    try:
        with open(path, "rb") as handle:
            for block in iter(lambda: handle.read(65536), b""):
                digest.update(block)
    except OSError:
        return UNREADABLE
    return f"file:{stat.S_IMODE(info.st_mode):o}:{digest.hexdigest()}"


def _index_prints(root: str, paths: list[str]) -> dict[str, list[str]] | None:
    if not paths:
        return {}
    text = _strict(run_git(root, "ls-files", "--stage", "-z"))
    if text is None:
        return None
    wanted: dict[str, list[str]] = {p: [] for p in paths}
    for field in text.split("\0"):
        if not field:
            continue
        prefix, tab, path = field.partition("\t")
        if not tab:
            return None
        if path in wanted:
            wanted[path].append(prefix)
    return wanted


class _Prints:
    def __init__(self, root: str, paths: list[str]) -> None:
        self.root = root
        index = _index_prints(root, paths)
        self.complete = index is not None
        self.prints: dict[str, tuple[str, list[str] | None]] = {}
        for path in paths:
            file_print = _fingerprint(os.path.join(root, path))
            if file_print in (UNREADABLE, DIRECTORY):
                self.complete = False
            self.prints[path] = (file_print, index.get(path) if index is not None else None)


def _dirty_prints(cwd: str, artifacts: list[str]) -> _Prints | None:
    root = repo_root(cwd)
    entries = status_entries(cwd) if root else None
    if root is None or entries is None:
        return None
    paths = []
    for status, path, origin in entries:
        paths.append(path)
        if origin is not None and "R" in status:
            paths.append(origin)
    excluded = _Exclusions(root, artifacts)
    return _Prints(root, [p for p in paths if p not in excluded])


def _changed(before: _Prints | None) -> tuple[list[str], bool]:
    if before is None:
        return [], False
    now = _Prints(before.root, list(before.prints))
    changed = []
    for path, (file_before, index_before) in before.prints.items():
        file_now, index_now = now.prints[path]
        readable = UNREADABLE not in (file_before, file_now)
        both_dirs = file_before == DIRECTORY and file_now == DIRECTORY
        file_changed = readable and not both_dirs and file_before != file_now
        index_changed = (
            index_before is not None and index_now is not None and index_before != index_now
        )
        if file_changed or index_changed:
            changed.append(path)
    return sorted(changed), before.complete and now.complete


class Tripwire:
    """Baseline taken once before the run; `verdict()` may be asked at every result write.

    After `verdict()`, `changes` names what changed (work-tree paths as git
    names them, refs, the index, git-dir files, ignored files) and
    `unverified` says why coverage was incomplete, when it was.
    """

    def __init__(self, cwd: str, artifacts: list[str]) -> None:
        self._cwd = cwd
        self._artifacts = artifacts
        self._tree = _tree_state(cwd, artifacts)
        self._prints = _dirty_prints(cwd, artifacts)
        self._repo = self._repo_print()
        self.changes: list[str] = []
        self.unverified: str | None = None

    def _repo_print(self):
        from .gitprint import RepoPrint

        root = repo_root(self._cwd) if self._tree is not None else None
        if root is None:
            return None
        return RepoPrint(self._cwd, root, _Exclusions(root, self._artifacts))

    def verdict(self) -> bool | None:
        after = _tree_state(self._cwd, self._artifacts)
        changed, complete = _changed(self._prints)
        moved = _moved(self._tree, after)
        repo_after = self._repo_print() if self._repo is not None else None
        repo_changes = self._repo.changes(repo_after) if repo_after is not None else []
        self.changes = sorted({*moved, *changed}) + repo_changes
        self.unverified = self._gap(after, complete, repo_after)
        if self.changes:
            return True
        return None if self.unverified else False

    def _gap(self, after, complete: bool, repo_after) -> str | None:
        if self._tree is None or after is None:
            return "git could not report the work tree"
        if not complete:
            return "a submodule or an unreadable path left the work tree partly covered"
        for repo in (self._repo, repo_after):
            if repo is None:
                return "git could not report the repository"
            if repo.problem:
                return repo.problem
        return None


def _moved(before: list | None, after: list | None) -> list[str]:
    """Paths whose `git status` entry differs between two tree states."""
    if before is None or after is None:
        return []
    old = {tuple(entry) for entry in before}
    new = {tuple(entry) for entry in after}
    return sorted({entry[2] for entry in old ^ new})
