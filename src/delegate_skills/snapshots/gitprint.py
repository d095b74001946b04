"""What a read-only run must leave alone beyond the work tree's files.

A run can change a repository without touching one tracked or untracked
file: commit or stash, move a branch, stage, hide an edit behind an index
flag, write a hook or an included config file, approve the project config,
delete objects or expire reflogs, start a merge, add a worktree, or rewrite
an ignored `.env`. `RepoPrint` records all of that before the run, and
`changes` names what is different after it:

- every ref (`for-each-ref`, the stash included);
- the index as `ls-files --stage -v` lists it: entries, stages and the
  assume-unchanged / skip-worktree flags (git refreshing stat data is not a
  change);
- every file and folder under the git dir and the common git dir by its stat
  (type, mode, size, mtime, ctime, inode): HEAD, config, hooks, info/*,
  packed-refs, reflogs, shallow, grafts, MERGE_HEAD and the other operation
  heads, the worktree list, submodules' own git dirs, the approval store.
  ctime moves on every write, so a rewrite with the same bytes and mtime
  shows. Under `objects/` only removed or rewritten entries count: a new
  object changes nothing, and parallel runs of the same repository add them;
- every ignored file by its stat; an ignored folder git does not enter (a
  nested repository) is walked;
- what the repository reaches outside itself: included config files, the
  `.git` file of a linked worktree, alternate object stores, and the targets
  of symlinks that leave the work tree.

Each listing has a budget; past it the part cannot be covered and the
verdict says so. The worktrees and branches of other delegate runs are left
out: they belong to runs going on beside this one.
"""

from __future__ import annotations

import os
import stat
import subprocess

from ..gitmeta import GIT_TIMEOUT_S, BoundGit, git_env, kill_git

#: Ignored files fingerprinted at most; past it the verdict is "unverified".
IGNORED_BUDGET_ENV = "DELEGATE_RELAY_IGNORED_BUDGET"
IGNORED_BUDGET = 50_000
#: Entries under the git dirs (objects included) and outside paths walked at most.
WALK_BUDGET = 300_000
ABSENT = "absent"


def ignored_budget() -> int:
    try:
        value = int(os.environ.get(IGNORED_BUDGET_ENV, IGNORED_BUDGET))
    except ValueError:
        return IGNORED_BUDGET
    return value if value >= 0 else IGNORED_BUDGET


class Unverifiable(Exception):
    """Part of the repository could not be fingerprinted; the message says which."""


def stat_print(info: os.stat_result) -> str:
    return (
        f"{stat.S_IFMT(info.st_mode):o}:{stat.S_IMODE(info.st_mode):o}:{info.st_size}:"
        f"{info.st_mtime_ns}:{info.st_ctime_ns}:{info.st_ino}"
    )


def object_print(print_: str) -> str:
    """What counts of an object store's entry: its type, size and inode, not its times.

    git freshens an object's mtime whenever it would write it again (our
    snapshots do, for the trees they share with the repository); objects are
    never rewritten in place, so a removal or replacement changes the inode.
    """
    parts = print_.split(":")
    if len(parts) != 6:
        return print_  # absent, or a folder (already without times)
    kind, _mode, size, _mtime, _ctime, inode = parts
    return f"{kind}:{size}:{inode}"


def _lstat_print(path: str, label: str) -> str:
    """A walked entry's stat print; a folder's leaves out size and times, which every
    entry added inside changes (the entries themselves are walked)."""
    try:
        info = os.lstat(path)
        if stat.S_ISDIR(info.st_mode):
            return f"{stat.S_IFMT(info.st_mode):o}:{stat.S_IMODE(info.st_mode):o}:{info.st_ino}"
        return stat_print(info)
    except FileNotFoundError:
        return ABSENT
    except OSError as error:
        raise Unverifiable(f"cannot stat {label}: {error.strerror or error}") from None


class Walker:
    """Stat prints of every entry under some folders, within one budget."""

    def __init__(self, budget: int = WALK_BUDGET) -> None:
        self.budget = budget
        self.count = 0

    def walk(self, top: str, label: str, skip=None) -> dict[str, str]:
        """`label/relative path` → stat print for `top` and everything below it."""
        prints = {label: _lstat_print(top, label)}
        if not os.path.isdir(top) or os.path.islink(top):
            return prints
        for here, dirs, files in os.walk(top, onerror=self._refuse):
            dirs.sort()
            rel_here = os.path.relpath(here, top)
            for name in [*dirs, *files]:
                rel = name if rel_here == "." else os.path.join(rel_here, name)
                if skip is not None and skip(rel):
                    if name in dirs:
                        dirs.remove(name)
                    continue
                self.count += 1
                if self.count > self.budget:
                    raise Unverifiable(f"more than {self.budget} entries to fingerprint")
                prints[f"{label}/{rel}"] = _lstat_print(os.path.join(here, name), rel)
        return prints

    @staticmethod
    def _refuse(error: OSError) -> None:
        raise Unverifiable(f"cannot list {error.filename}: {error.strerror or error}")


class RepoSpec:
    """The repository a read-only run works in, resolved before the run."""

    def __init__(
        self,
        top: str,
        git_dir: str,
        common_dir: str,
        *,
        own_branch: str | None = None,
        sibling_root: str | None = None,
        symlinks: list[str] | None = None,
        cli_state: list[str] | None = None,
    ) -> None:
        self.top = top
        self.git_dir = git_dir
        self.common_dir = common_dir
        #: The run's own `delegate/…` branch (a --worktree run); others are other runs'.
        self.own_branch = own_branch
        #: Where delegate keeps worktrees: a worktree registered there is another run's.
        self.sibling_root = sibling_root
        #: Work-tree paths of the symlinks in the tree before the run.
        self.symlinks = symlinks or []
        #: Files the CLI keeps its own state in, at the top of the common git dir.
        self.cli_state = set(cli_state or [])

    def git(self) -> BoundGit:
        return BoundGit(self.top, self.git_dir)


def _others_branch(ref: str, own: str | None) -> bool:
    prefix = "refs/heads/delegate/"
    return ref.startswith(prefix) and ref != f"refs/heads/{own}"


def _refs(spec: RepoSpec) -> dict[str, str]:
    out = spec.git().out("for-each-ref", "--format=%(objectname) %(refname)")
    if out is None:
        raise Unverifiable("git for-each-ref did not answer")
    refs = {}
    for line in os.fsdecode(out).splitlines():
        target, _, name = line.partition(" ")
        if not _others_branch(name, spec.own_branch):
            refs[f"ref {name}"] = target
    return refs


def _index(spec: RepoSpec) -> dict[str, str]:
    out = spec.git().out("ls-files", "--stage", "-v", "-z")
    if out is None:
        raise Unverifiable("git ls-files did not answer")
    return {"index": _sha256(out)}


def _shown(path: str, root: str) -> str:
    """`path` as the result names it: relative to the work tree's root."""
    return os.path.relpath(path, root)


def _is_sibling_worktree(admin_dir: str, sibling_root: str | None) -> bool:
    """Whether a `worktrees/<name>` admin folder belongs to another delegate run."""
    if sibling_root is None:
        return False
    try:
        with open(os.path.join(admin_dir, "gitdir"), "rb") as handle:
            target = os.fsdecode(handle.read(8192).strip())
    except OSError:
        return False
    root = os.path.realpath(sibling_root).rstrip(os.sep) + os.sep
    return os.path.realpath(target).startswith(root)


def _git_dirs(spec: RepoSpec, walker: Walker) -> dict[str, str]:
    common = os.path.realpath(spec.common_dir)
    own = os.path.realpath(spec.git_dir)
    prints: dict[str, str] = {}

    def skip_common(rel: str) -> bool:
        if rel in spec.cli_state:
            return True
        parts = rel.split(os.sep)
        if parts[-1] == "index" or parts[-1].startswith("sharedindex."):
            return True
        if parts[0] == "worktrees" and len(parts) >= 2:
            admin = os.path.join(common, parts[0], parts[1])
            if os.path.realpath(admin) == own:
                return True  # walked below as the run's own git dir
            return _is_sibling_worktree(admin, spec.sibling_root)
        if parts[0] == "logs" and len(parts) > 3 and parts[1:3] == ["refs", "heads"]:
            return _others_branch("refs/heads/" + "/".join(parts[3:]), spec.own_branch)
        if parts[0] == "refs" and len(parts) > 2 and parts[1] == "heads":
            return _others_branch("refs/" + "/".join(parts[1:]), spec.own_branch)
        return False

    prints.update(walker.walk(common, _shown(common, spec.top), skip_common))
    if own != common:
        prints.update(
            walker.walk(own, _shown(own, spec.top), lambda rel: os.path.basename(rel) == "index")
        )
    return prints


def _git_list(spec: RepoSpec, args: list[str], budget: int, what: str) -> list[bytes]:
    """NUL-separated entries from git, stopping (Unverifiable) past `budget` of them."""
    git = spec.git()
    try:
        proc = subprocess.Popen(
            git.argv(*args),
            cwd=spec.top,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=git_env(),
            start_new_session=True,
        )
    except OSError:
        raise Unverifiable(f"git could not list {what}") from None
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
            code = proc.wait(timeout=GIT_TIMEOUT_S * 6)
        except subprocess.TimeoutExpired:
            kill_git(proc)
            proc.wait()
            code = 1
    if over:
        raise Unverifiable(f"more than {budget} {what} to fingerprint")
    if code != 0:
        raise Unverifiable(f"git could not list {what}")
    return entries


def _ignored(spec: RepoSpec, excluded, walker: Walker) -> dict[str, str]:
    budget = ignored_budget()
    args = ["ls-files", "-z", "--others", "--ignored", "--exclude-standard", "--directory"]
    entries = _git_list(spec, args, budget, "ignored files")
    prints: dict[str, str] = {}
    for raw in entries:
        path = os.fsdecode(raw)
        if path.rstrip("/") in excluded:
            continue
        full = os.path.join(spec.top, path)
        if path.endswith("/"):
            # A folder git lists whole: everything in it is ignored (or it is a
            # nested repository git does not enter). Walk it, artifacts aside.
            rel_root = path.rstrip("/")
            found = walker.walk(
                full.rstrip("/"),
                f"ignored: {rel_root}",
                lambda rel, root=rel_root: os.path.join(root, rel) in excluded,
            )
            if len(prints) + len(found) > budget:
                raise Unverifiable(f"more than {budget} ignored files to fingerprint")
            prints.update(found)
        else:
            prints[f"ignored: {path}"] = _lstat_print(full, f"ignored {path}")
    return prints


def _included_configs(spec: RepoSpec) -> list[str]:
    """Config files the repository's own config includes (they are read as its config)."""
    out = spec.git().out("config", "--local", "--includes", "--show-origin", "--list", "-z")
    if out is None:
        return []
    origins = set()
    fields = out.split(b"\0")
    for i in range(0, len(fields) - 1, 2):
        origin = os.fsdecode(fields[i])
        if origin.startswith("file:"):
            origins.add(os.path.normpath(os.path.join(spec.git_dir, origin[5:])))
    own = {os.path.join(d, name) for d in (spec.git_dir, spec.common_dir)
           for name in ("config", "config.worktree")}  # fmt: skip
    return sorted(path for path in origins if path not in own)


def _alternates(spec: RepoSpec) -> list[str]:
    path = os.path.join(spec.common_dir, "objects", "info", "alternates")
    try:
        with open(path, "rb") as handle:
            lines = handle.read(1 << 16).decode("utf-8", "replace").splitlines()
    except OSError:
        return []
    objects = os.path.join(spec.common_dir, "objects")
    return [os.path.normpath(os.path.join(objects, line)) for line in lines
            if line.strip() and not line.startswith("#")]  # fmt: skip


def _inside(path: str, root: str) -> bool:
    root = root.rstrip(os.sep) + os.sep
    return path == root.rstrip(os.sep) or path.startswith(root)


def _outside(spec: RepoSpec, walker: Walker) -> dict[str, str]:
    prints: dict[str, str] = {}
    gitfile = os.path.join(spec.top, ".git")
    if os.path.isfile(gitfile) or os.path.islink(gitfile):
        prints[".git"] = _content_print(gitfile)
    for path in _included_configs(spec):
        prints[f"included config {path}"] = _content_print(path)
    for path in _alternates(spec):
        prints.update(walker.walk(path, f"alternate {path}"))
    real_top = os.path.realpath(spec.top)
    git_dirs = [os.path.realpath(spec.common_dir), os.path.realpath(spec.git_dir)]
    for link in spec.symlinks:
        target = os.path.realpath(os.path.join(spec.top, link))
        if _inside(target, real_top) or any(_inside(target, d) for d in git_dirs):
            continue
        if os.path.exists(target):
            prints.update(walker.walk(target, f"symlink {link} -> {target}"))
    return prints


def _content_print(path: str) -> str:
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return ABSENT
    except OSError as error:
        raise Unverifiable(f"cannot read {path}: {error.strerror or error}") from None
    if not stat.S_ISREG(info.st_mode) or info.st_size > (1 << 20):
        return stat_print(info)
    try:
        with open(path, "rb") as handle:
            data = handle.read((1 << 20) + 1)
    except OSError as error:
        raise Unverifiable(f"cannot read {path}: {error.strerror or error}") from None
    return f"{stat_print(info)}:{_sha256(data)}"


class RepoPrint:
    """A fingerprint of a repository beyond its work tree's files."""

    def __init__(self, spec: RepoSpec, excluded) -> None:
        #: Each part that could be read whole: its entries and their prints.
        self.parts: dict[str, dict[str, str]] = {}
        #: Entries under these keys may appear without it being a change (object stores).
        self.append_only = append_only_labels(spec)
        #: Why part of the repository could not be fingerprinted (the first reason).
        self.problem: str | None = None
        walker = Walker()
        readers = {
            "refs": lambda: _refs(spec),
            "index": lambda: _index(spec),
            "git dir": lambda: _git_dirs(spec, walker),
            "ignored": lambda: _ignored(spec, excluded, walker),
            "outside": lambda: _outside(spec, walker),
        }
        for name, read in readers.items():
            try:
                self.parts[name] = read()
            except Unverifiable as problem:
                self.problem = self.problem or str(problem)

    def changes(self, after: RepoPrint) -> list[str]:
        """What differs between this print and `after`, in the parts both read whole.

        Refs first, then the index, the git dirs, ignored files and outside paths.

        A part that could not be read is not evidence of a change. Under a
        git dir's `objects/`, a new entry is not a change.
        """
        found = []
        for name, before in self.parts.items():
            now = after.parts.get(name)
            if now is None:
                continue
            for key in sorted(set(before) | set(now)):
                old, new = before.get(key, ABSENT), now.get(key, ABSENT)
                if old == new:
                    continue
                in_store = any(_is_object(key, p) for p in self.append_only)
                if in_store and (old == ABSENT or object_print(old) == object_print(new)):
                    continue
                found.append(key)
        return found


def _is_object(key: str, store: str) -> bool:
    """Whether `key` is an object (a loose one, or a pack) in the object store labelled `store`.

    `info/` (alternates among them) is not: what it says changes where git looks.
    """
    if not key.startswith(store + "/"):
        return False
    first = key[len(store) + 1 :].split("/", 1)[0]
    return first == "pack" or (len(first) == 2 and all(c in "0123456789abcdef" for c in first))


def append_only_labels(spec: RepoSpec) -> list[str]:
    """The keys of object stores: a new object there is not a change to the repository."""
    common = os.path.realpath(spec.common_dir)
    stores = [_shown(os.path.join(common, "objects"), spec.top)]
    stores += [f"alternate {path}" for path in _alternates(spec)]
    return stores


def _sha256(data: bytes) -> str:
    import hashlib  # only a fingerprint needs it (an enforced read-only run takes none)

    return hashlib.sha256(data).hexdigest()
