"""What a read-only run must leave alone beyond the files `git status` lists.

A run can change a repository without touching one tracked or untracked
file: commit or stash, move a branch, stage, write a hook or `core.hooksPath`
(code that runs at the user's next commit), or rewrite an ignored `.env`.
`RepoPrint` records all of that before the run, and `changes` names what is
different after it:

- every ref (`for-each-ref`, the stash included) and HEAD;
- the index, as `ls-files --stage` lists it (git refreshing stat data is not
  a change);
- the git dir's own files: `config`, `config.worktree`, `info/exclude`, and
  every file under the hooks directory git would run;
- every ignored file, by its stat (size, times, inode, mode): ctime moves on
  any write, so a rewrite with the same bytes and mtime is still seen.

Listing ignored files has a budget: a tree with more than IGNORED_BUDGET of
them (a `node_modules`, say) cannot be covered, and the verdict says so.
"""

from __future__ import annotations

import hashlib
import os
import stat
import subprocess

from ..gitmeta import GIT_TIMEOUT_S, kill_git, run_git, start_git

#: Ignored files fingerprinted at most; past it the verdict is "unverified".
IGNORED_BUDGET_ENV = "DELEGATE_RELAY_IGNORED_BUDGET"
IGNORED_BUDGET = 50_000
#: Files under the hooks directory fingerprinted at most.
HOOKS_BUDGET = 1_000
#: A git-dir file larger than this is fingerprinted by its stat, not its bytes.
CONTENT_LIMIT = 1 << 20
GIT_DIR_FILES = ("HEAD", "config", "config.worktree", "info/exclude")
ABSENT = "absent"


def ignored_budget() -> int:
    try:
        value = int(os.environ.get(IGNORED_BUDGET_ENV, IGNORED_BUDGET))
    except ValueError:
        return IGNORED_BUDGET
    return value if value >= 0 else IGNORED_BUDGET


class Unverifiable(Exception):
    """Part of the repository could not be fingerprinted; the message says which."""


def _stat_print(info: os.stat_result) -> str:
    return (
        f"{stat.S_IFMT(info.st_mode):o}:{stat.S_IMODE(info.st_mode):o}:{info.st_size}:"
        f"{info.st_mtime_ns}:{info.st_ctime_ns}:{info.st_ino}"
    )


def _file_print(path: str) -> str:
    """The bytes' digest of a small regular file; the stat of anything else; 'absent'."""
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return ABSENT
    except OSError as error:
        raise Unverifiable(f"cannot read {path}: {error.strerror or error}") from None
    if stat.S_ISLNK(info.st_mode):
        try:
            return "symlink:" + os.fsencode(os.readlink(path)).hex()
        except OSError as error:
            raise Unverifiable(f"cannot read {path}: {error.strerror or error}") from None
    if not stat.S_ISREG(info.st_mode) or info.st_size > CONTENT_LIMIT:
        return _stat_print(info)
    try:
        with open(path, "rb") as handle:
            data = handle.read(CONTENT_LIMIT + 1)
    except OSError as error:
        raise Unverifiable(f"cannot read {path}: {error.strerror or error}") from None
    return f"{stat.S_IMODE(info.st_mode):o}:{hashlib.sha256(data).hexdigest()}"


def _git(cwd: str, *args: str) -> bytes:
    out = run_git(cwd, *args)
    if out is None:
        raise Unverifiable(f"git {args[0]} did not answer")
    return out


def _git_list(cwd: str, args: list[str], budget: int, what: str) -> list[bytes]:
    """NUL-separated entries from git, stopping (Unverifiable) past `budget` of them."""
    proc = start_git(cwd, *args)
    if proc is None:
        raise Unverifiable(f"git could not list {what}")
    entries: list[bytes] = []
    partial = b""
    over = False
    with proc:
        for block in iter(lambda: proc.stdout.read1(65536), b""):
            parts = (partial + block).split(b"\0")
            partial = parts.pop()
            entries.extend(parts)
            if len(entries) > budget:
                over = True
                break
        if over:
            kill_git(proc)
        try:
            code = proc.wait(timeout=GIT_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            kill_git(proc)
            proc.wait()
            code = 1
    if over:
        raise Unverifiable(f"more than {budget} {what} to fingerprint")
    if code != 0:
        raise Unverifiable(f"git could not list {what}")
    return entries


def _refs(cwd: str) -> dict[str, str]:
    out = _git(cwd, "for-each-ref", "--format=%(objectname) %(refname)")
    refs = {}
    for line in os.fsdecode(out).splitlines():
        target, _, name = line.partition(" ")
        refs[f"ref {name}"] = target
    return refs


def _index(cwd: str) -> dict[str, str]:
    return {"index": hashlib.sha256(_git(cwd, "ls-files", "--stage", "-z")).hexdigest()}


def _shown(path: str, root: str) -> str:
    """`path` as the result names it: relative to the work tree's root."""
    return os.path.relpath(path, root)


def _git_dir_files(cwd: str, root: str) -> dict[str, str]:
    out = os.fsdecode(_git(cwd, "rev-parse", "--absolute-git-dir", "--git-common-dir"))
    lines = out.split("\n")
    git_dir = lines[0]
    common = os.path.join(cwd, lines[1]) if len(lines) > 1 and lines[1] else git_dir
    hooks = os.fsdecode(_git(cwd, "rev-parse", "--git-path", "hooks")).rstrip("\n")
    prints = {}
    for base in dict.fromkeys([git_dir, os.path.normpath(common)]):
        for name in GIT_DIR_FILES:
            path = os.path.join(base, name)
            prints[_shown(path, root)] = _file_print(path)
    prints.update(_hooks(os.path.normpath(os.path.join(cwd, hooks)), root))
    return prints


def _hooks(hooks: str, root: str) -> dict[str, str]:
    prints = {_shown(hooks, root): _file_print(hooks)}
    count = 0
    for top, dirs, files in os.walk(hooks):
        dirs.sort()
        for name in sorted(files):
            count += 1
            if count > HOOKS_BUDGET:
                raise Unverifiable(f"more than {HOOKS_BUDGET} files under {hooks}")
            path = os.path.join(top, name)
            prints[_shown(path, root)] = _file_print(path)
    return prints


def _ignored(root: str, excluded) -> dict[str, str]:
    budget = ignored_budget()
    args = ["ls-files", "-z", "--others", "--ignored", "--exclude-standard", "--full-name"]
    entries = _git_list(root, args, budget, "ignored files")
    prints = {}
    for raw in entries:
        path = os.fsdecode(raw)
        if path in excluded:
            continue
        try:
            prints[f"ignored: {path}"] = _stat_print(os.lstat(os.path.join(root, path)))
        except FileNotFoundError:
            prints[f"ignored: {path}"] = ABSENT
        except OSError as error:
            raise Unverifiable(f"cannot stat ignored {path}: {error.strerror or error}") from None
    return prints


class RepoPrint:
    """A fingerprint of a repository's refs, index, git-dir files and ignored files."""

    def __init__(self, cwd: str, root: str, excluded) -> None:
        #: Each part that could be read whole: its entries and their prints.
        self.parts: dict[str, dict[str, str]] = {}
        #: Why part of the repository could not be fingerprinted (the first reason).
        self.problem: str | None = None
        readers = {
            "refs": lambda: _refs(cwd),
            "index": lambda: _index(cwd),
            "git dir": lambda: _git_dir_files(cwd, root),
            "ignored": lambda: _ignored(root, excluded),
        }
        for name, read in readers.items():
            try:
                self.parts[name] = read()
            except Unverifiable as problem:
                self.problem = self.problem or str(problem)

    def changes(self, after: RepoPrint) -> list[str]:
        """What differs between this print and `after`, in the parts both read whole.

        A part that could not be read is not evidence of a change.
        """
        found = []
        for name, before in self.parts.items():
            now = after.parts.get(name)
            if now is None:
                continue
            keys = set(before) | set(now)
            found += [k for k in keys if before.get(k, ABSENT) != now.get(k, ABSENT)]
        return sorted(found)
