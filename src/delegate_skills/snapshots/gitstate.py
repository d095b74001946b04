"""What git can say about the work tree: touched files and the read-only verdict.

`touched_files` is `git status --porcelain`, line for line (None when git
cannot say), as the Node relays report it.

`Tripwire` answers "did a read-only run change anything?" with three values:
True (a change is proven), False (nothing changed, and that is proven) and
None (it cannot be proven; `unverified` says why). The proof has two halves:

- the work tree's files, from the run's change record: two snapshots of
  every file git does not ignore (changes.py), made with git's stat cache
  checked strictly and every index flag cleared;
- everything else a repository is (gitprint.RepoPrint): refs, the index and
  its flags, the git dirs, ignored files, what it reaches outside itself.

What detection cannot cover (a submodule's or nested repository's files, an
unreadable path, a listing past its budget) is covered when the OS enforced
the run (sandbox.py binds the work tree and git dirs read-only): then False
is proven by enforcement. Otherwise the verdict is None, never False.
"""

from __future__ import annotations

import os

from ..gitmeta import git_answer, run_git, start_git

# `typing` costs milliseconds at every relay start; type checkers read this too.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from .gitprint import RepoSpec


def touched_files(cwd: str) -> list[str] | None:
    return _lines(run_git(cwd, "status", "--porcelain"))


class TouchedFiles:
    """`touched_files` started now and read later: it runs beside other work (the second
    snapshot), which leaves what it reads alone. git runs with optional locks off, so it
    does not rewrite the repository's index either."""

    def __init__(self, cwd: str) -> None:
        self._proc = start_git(cwd, "status", "--porcelain")

    def take(self) -> list[str] | None:
        return _lines(git_answer(self._proc))


def _lines(out: bytes | None) -> list[str] | None:
    if out is None:
        return None
    text = out.decode("utf-8", errors="replace")
    return [line.rstrip() for line in text.split("\n") if line.rstrip()]


class Excluded:
    """Work-tree paths ("/"-separated) of the relay's own artifacts, when they are inside."""

    def __init__(self, paths: list[str]) -> None:
        self.paths = set(paths)

    def __contains__(self, path: str) -> bool:
        return path.replace(os.sep, "/").rstrip("/") in self.paths


def tree_links(git, tree: str) -> tuple[list[str], list[str]]:
    """(symlink paths, gitlink paths) in `tree`; raises OSError when git cannot list it."""
    out = git.out("ls-tree", "-r", "-z", "--full-tree", tree, timeout=600)
    if out is None:
        raise OSError("git ls-tree did not answer")
    symlinks, gitlinks = [], []
    for entry in out.split(b"\0"):
        meta, tab, path = entry.partition(b"\t")
        if not tab:
            continue
        mode = meta.split(b" ", 1)[0]
        if mode == b"120000":
            symlinks.append(os.fsdecode(path))
        elif mode == b"160000":
            gitlinks.append(os.fsdecode(path))
    return symlinks, gitlinks


class Tripwire:
    """Baseline taken once before the run; `verdict()` may be asked at every result write.

    After `verdict()`, `changes` names what changed (work-tree paths, refs,
    the index, git-dir files, ignored files, outside paths) and `unverified`
    says why it could not be proven, when it could not.
    """

    def __init__(
        self,
        spec: RepoSpec | None,
        record,
        excluded: Excluded,
        enforced: bool,
        fingerprint: bool = True,
    ) -> None:
        """`fingerprint` False: the OS kept the whole repository read-only to the run (nothing
        of it was writable), so only the work tree's files are compared; that proof is
        enforcement's."""
        from .gitprint import RepoPrint  # read-only runs only: hashlib and the walkers

        self._print = RepoPrint
        self._spec = spec
        self._record = record
        self._excluded = excluded
        self._enforced = enforced
        self._gap: str | None = None
        self.changes: list[str] = []
        self.unverified: str | None = None
        if spec is None:
            self._gap = "the directory is not in a git repository git can read"
            self._repo = None
            return
        if record is not None and record.before is not None:
            try:
                symlinks, gitlinks = tree_links(record.snapshots.git(), record.before)
            except OSError as problem:
                symlinks, gitlinks = [], []
                self._gap = str(problem)
            spec.symlinks = symlinks
            if gitlinks:
                shown = ", ".join(gitlinks[:3]) + (" …" if len(gitlinks) > 3 else "")
                self._gap = self._gap or (
                    f"submodules or nested repositories ({shown}) are not fingerprinted inside"
                )
        self._repo = RepoPrint(spec, excluded) if fingerprint else None

    def verdict(self, files: list[dict] | None = None, settled: bool = True) -> bool | None:
        """True, False or None; `files` are the change record's (None when it has none).

        `settled` is False while processes of the run may still be alive: then
        no verdict is False.
        """
        found: list[str] = []
        gaps: list[str] = []
        if self._gap:
            gaps.append(self._gap)
        record = self._record
        if files is not None:
            for entry in files:
                found += [p for p in (entry["path"], entry.get("oldPath")) if p]
        elif record is None or record.same() is None:
            problem = record.problem if record is not None else None
            gaps.append(problem or "the work tree could not be snapshotted")
        elif record.same() is False:
            found.append("(the work tree's files)")
        n_files = len(found)
        if record is not None and record.incomplete:
            gaps.append(f"part of the work tree could not be read ({record.incomplete})")
        if self._repo is not None:
            after = self._print(self._spec, self._excluded)
            found += self._repo.changes(after)
            for print_ in (self._repo, after):
                if print_.problem:
                    gaps.append(print_.problem)
        # Work-tree files first (sorted), then the rest of the repository in RepoPrint's order.
        files = sorted({p for p in found[:n_files]})
        self.changes = list(dict.fromkeys([*files, *found[n_files:]]))
        if not settled:
            self.unverified = "processes of the run were still being stopped"
        elif gaps and not self._enforced:
            self.unverified = gaps[0]
        else:
            self.unverified = None
        if self.changes:
            return True
        return None if self.unverified else False
