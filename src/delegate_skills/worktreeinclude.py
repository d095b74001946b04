"""Files every worktree needs: the ignored files `.worktreeinclude` names.

`.worktreeinclude` at the root of the source work tree holds patterns in
gitignore syntax (the file Claude Code and other worktree tools read). A file
is copied into a new worktree when git ignores it in the source (untracked and
matched by the repository's ignore rules) and a pattern of `.worktreeinclude`
matches it; a tracked file is in the worktree already. Git answers both
questions: `ls-files --others --ignored --exclude-from=<the patterns>` names the
untracked files the patterns match, and `check-ignore` keeps those the
repository ignores. `check-ignore` in the new worktree then leaves out a file
git would not ignore there (tracked there, or ignored by a rule the source has
not committed): it would count as the run's change and could be landed.

What is copied: regular files with their permission bits, and symlinks whose
target is inside the source repository (pointed at the same place relative to
where they sit, so inside the worktree). Nothing is read through a symlink,
nothing is written outside the worktree, through a symlinked folder in it or
over a file it has. At most MAX_FILES files and MAX_BYTES bytes are copied;
every file left out is reported with its reason.
"""

from __future__ import annotations

import os
import stat

from .errors import UserError
from .gitmeta import git_outcome, kill_git, start_git
from .reading import KIB, MIB, first_symlink_below, read_limited

FILE = ".worktreeinclude"
#: A pattern file is a few lines.
PATTERNS_LIMIT = 64 * KIB
#: The most files, and bytes, one worktree gets.
MAX_FILES = 1000
MAX_BYTES = 64 * MIB
#: The most file names read from git's listing.
NAMES_LIMIT = 4 * MIB
LIST_TIMEOUT_S = 120.0
#: How many names one printed line shows.
SHOWN = 5

NOT_IGNORED_THERE = (
    "git does not ignore it in the worktree (tracked there, or ignored by a rule that is not "
    "committed), so it would count as the run's change"
)
LINK_OUTSIDE = "a symlink to a place outside the repository"
THROUGH_LINK = "a folder on its path is a symlink in the worktree"


class Skip(Exception):
    """A file that is not copied; the message is the reason."""


class Entry:
    """One file to copy: a regular file's mode and bytes, or a symlink's target."""

    __slots__ = ("data", "link", "mode", "path")

    def __init__(self, path: str, mode: int = 0, data: bytes = b"", link: str | None = None):
        self.path = path
        self.mode = mode
        self.data = data
        self.link = link


def skipped(path: str, reason: str) -> dict:
    return {"path": path, "reason": reason}


# ---------------------------------------------------------------- what the patterns name


def matched(top: str) -> tuple[list[str], list[dict]]:
    """The ignored files of `top` that `.worktreeinclude` names (sorted), and problems.

    No `.worktreeinclude`: nothing, and no git is started.
    """
    try:
        patterns = read_limited(
            os.path.join(top, FILE), PATTERNS_LIMIT, label=FILE, within=top, what="pattern file"
        )
    except UserError as problem:
        return [], [skipped(FILE, str(problem))]
    if not patterns or not patterns.strip():
        return [], []
    import tempfile

    problems: list[dict] = []
    with tempfile.TemporaryDirectory(prefix="delegate-worktreeinclude-") as scratch:
        path = os.path.join(scratch, "patterns")
        with open(path, "wb") as handle:
            handle.write(patterns)
        listed = _listed(top, "ls-files", "-z", "--others", "--ignored", f"--exclude-from={path}")
    if listed is None:
        return [], [skipped(FILE, "git could not list the files it names")]
    names, complete = listed
    if not complete:
        problems.append(skipped(FILE, f"it names more than {NAMES_LIMIT // MIB} MiB of file "
                                      "names; only the first ones were looked at"))  # fmt: skip
    return sorted(ignored(top, names)), problems


def _listed(top: str, *args: str) -> tuple[list[str], bool] | None:
    """The NUL-separated names git prints (at most NAMES_LIMIT bytes) and whether that is all.

    Folders (a nested repository) are left out. None when git fails or takes too long.
    """
    import threading

    proc = start_git(top, *args)
    if proc is None:
        return None
    late = threading.Event()

    def stop() -> None:
        late.set()
        kill_git(proc)

    timer = threading.Timer(LIST_TIMEOUT_S, stop)
    timer.start()
    try:
        data = proc.stdout.read(NAMES_LIMIT + 1)
    finally:
        timer.cancel()
        if proc.poll() is None:
            kill_git(proc)
        proc.stdout.close()
        proc.wait()
    complete = len(data) <= NAMES_LIMIT
    if late.is_set() or (complete and proc.returncode != 0):
        return None
    parts = data.split(b"\0")
    parts.pop()  # after the last NUL: nothing, or a name cut off at the limit
    return [os.fsdecode(part) for part in parts if part and not part.endswith(b"/")], complete


def ignored(cwd: str, names: list[str]) -> set[str]:
    """Those of `names` git ignores in the work tree at `cwd` (tracked files never are)."""
    if not names:
        return set()
    data = b"".join(os.fsencode(name) + b"\0" for name in names)
    done = git_outcome(cwd, "check-ignore", "-z", "--stdin", input=data, timeout=LIST_TIMEOUT_S)
    if done.code not in (0, 1):
        return set()
    return {os.fsdecode(part) for part in done.out.split(b"\0") if part}


# ---------------------------------------------------------------- reading in the source


def refused(path: str) -> str | None:
    """Why `path` may not be written under a worktree (None: it may)."""
    if not path or "\0" in path:
        return "refused: an empty path"
    if os.path.isabs(path) or path.startswith("/"):
        return "refused: an absolute path"
    parts = path.split("/")
    if any(part in ("", ".", "..") for part in parts):
        return "refused: a path with an empty, . or .. part"
    if ".git" in parts:
        return "refused: a path inside .git"
    return None


def link_refused(path: str, link: str) -> str | None:
    """Why a symlink at `path` to `link` may not be made in a worktree (None: it may)."""
    if not link or "\0" in link or os.path.isabs(link):
        return "refused: a symlink that is not relative"
    inside = os.path.normpath(os.path.join(os.path.dirname(path), link))
    if inside in (".", "..") or inside.startswith("../"):
        return LINK_OUTSIDE
    return None


def read_entry(top: str, real_top: str, path: str, room: int) -> Entry:
    """The file `path` of the source `top`, at most `room` bytes. Raises Skip.

    Raises OverflowError when the file holds more than `room` bytes.
    """
    source = os.path.join(top, path)
    if first_symlink_below(top, os.path.dirname(source)) is not None:
        raise Skip("a folder on its path is a symlink in the source")
    try:
        info = os.lstat(source)
    except OSError as problem:
        raise Skip(f"cannot read it: {problem.strerror or problem}") from None
    if stat.S_ISLNK(info.st_mode):
        real = os.path.realpath(source)
        if not real.startswith(real_top.rstrip(os.sep) + os.sep):
            raise Skip(LINK_OUTSIDE)
        # The same place, relative to the link's folder: inside the worktree there.
        folder = os.path.join(real_top, os.path.dirname(path))
        return Entry(path, link=os.path.relpath(real, folder))
    if not stat.S_ISREG(info.st_mode):
        raise Skip("not a regular file")
    if info.st_size > room:
        raise OverflowError
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(source, flags)
    except OSError as problem:
        raise Skip(f"cannot read it: {problem.strerror or problem}") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise Skip("not a regular file")
        os.set_blocking(fd, True)
        chunks, total = [], 0
        while total <= room:
            chunk = os.read(fd, min(room + 1 - total, MIB))
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
    except OSError as problem:
        raise Skip(f"cannot read it: {problem.strerror or problem}") from None
    finally:
        os.close(fd)
    if total > room:
        raise OverflowError
    return Entry(path, mode=stat.S_IMODE(info.st_mode) & 0o777, data=b"".join(chunks))


def read_entries(top: str, names: list[str]) -> tuple[list[Entry], list[dict]]:
    """The files `names` of the source `top`, within MAX_FILES and MAX_BYTES, and what is not."""
    real_top = os.path.realpath(top)
    entries: list[Entry] = []
    problems: list[dict] = []
    room = MAX_BYTES
    for index, name in enumerate(names):
        reason = refused(name)
        if reason is not None:
            problems.append(skipped(name, reason))
            continue
        if len(entries) >= MAX_FILES:
            problems.append(_stopped(name, len(names) - index))
            break
        try:
            entry = read_entry(top, real_top, name, room)
        except Skip as problem:
            problems.append(skipped(name, str(problem)))
            continue
        except OverflowError:
            problems.append(_stopped(name, len(names) - index))
            break
        entries.append(entry)
        room -= len(entry.data)
    return entries, problems


def _stopped(name: str, left: int) -> dict:
    return skipped(
        name,
        f"the copy stops at {MAX_FILES} files and {MAX_BYTES // MIB} MiB; "
        f"{left} listed file(s) from this one on are not copied",
    )


# ---------------------------------------------------------------- writing in the worktree


def _parents(worktree: str, path: str) -> None:
    """Make the folders of `path` under `worktree`, never through a symlink. Raises Skip."""
    here = worktree
    for part in path.split("/")[:-1]:
        here = os.path.join(here, part)
        try:
            info = os.lstat(here)
        except FileNotFoundError:
            try:
                os.mkdir(here)
            except OSError as problem:
                raise Skip(f"cannot make its folder: {problem.strerror or problem}") from None
            continue
        except OSError as problem:
            raise Skip(f"cannot make its folder: {problem.strerror or problem}") from None
        if stat.S_ISLNK(info.st_mode):
            raise Skip(THROUGH_LINK)
        if not stat.S_ISDIR(info.st_mode):
            raise Skip("a folder on its path is a file in the worktree")


def write_entry(worktree: str, entry: Entry) -> None:
    """Write one file under `worktree`, never over anything there. Raises Skip."""
    reason = refused(entry.path)
    if reason is None and entry.link is not None:
        reason = link_refused(entry.path, entry.link)
    if reason is not None:
        raise Skip(reason)
    if first_symlink_below(worktree, os.path.join(worktree, os.path.dirname(entry.path))):
        raise Skip(THROUGH_LINK)
    _parents(worktree, entry.path)
    target = os.path.join(worktree, entry.path)
    try:
        if entry.link is not None:
            os.symlink(entry.link, target)
            return
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
        fd = os.open(target, flags, 0o600)
    except FileExistsError:
        raise Skip("the worktree has a file there already") from None
    except OSError as problem:
        raise Skip(f"cannot write it: {problem.strerror or problem}") from None
    try:
        view = memoryview(entry.data)
        while view:
            view = view[os.write(fd, view) :]
        os.fchmod(fd, entry.mode & 0o777)
    except OSError as problem:
        os.close(fd)
        try:
            os.unlink(target)
        except OSError:
            pass
        raise Skip(f"cannot write it: {problem.strerror or problem}") from None
    os.close(fd)


def write_entries(worktree: str, entries: list[Entry]) -> tuple[list[str], list[dict]]:
    """Write `entries` under `worktree`; the paths written, and those not with their reasons."""
    written: list[str] = []
    problems: list[dict] = []
    for entry in entries:
        try:
            write_entry(worktree, entry)
        except Skip as problem:
            problems.append(skipped(entry.path, str(problem)))
            continue
        written.append(entry.path)
    return written, problems


def copy_into(top: str, worktree: str) -> tuple[list[str], list[dict]]:
    """Copy what `.worktreeinclude` names from the source `top` into the new `worktree`.

    The paths copied, and those left out with their reasons.
    """
    names, problems = matched(top)
    asked = []
    for name in names:
        reason = refused(name)
        folder = os.path.join(worktree, os.path.dirname(name))
        if reason is None and first_symlink_below(worktree, folder) is not None:
            reason = THROUGH_LINK  # (git would not say whether it ignores a path there)
        if reason is not None:
            problems.append(skipped(name, reason))
        else:
            asked.append(name)
    safe = ignored(worktree, asked)
    kept = []
    for name in asked:
        if name in safe:
            kept.append(name)
        else:
            problems.append(skipped(name, NOT_IGNORED_THERE))
    entries, unread = read_entries(top, kept)
    written, unwritten = write_entries(worktree, entries)
    return written, [*problems, *unread, *unwritten]


# ---------------------------------------------------------------- to another machine


def pack(top: str) -> tuple[list[dict], list[dict]]:
    """The files `.worktreeinclude` names in `top` as a run spec carries them, and problems.

    Each is {"path", "mode", "data" (base64)} or {"path", "link"}.
    """
    import base64

    names, problems = matched(top)
    entries, unread = read_entries(top, names)
    packed = []
    for entry in entries:
        if entry.link is not None:
            packed.append({"path": entry.path, "link": entry.link})
        else:
            data = base64.b64encode(entry.data).decode("ascii")
            packed.append({"path": entry.path, "mode": entry.mode, "data": data})
    return packed, [*problems, *unread]


def unpack(items) -> tuple[list[Entry], list[dict]]:
    """The entries of a run spec's files, each checked, within MAX_FILES and MAX_BYTES."""
    import base64
    import binascii

    entries: list[Entry] = []
    problems: list[dict] = []
    room = MAX_BYTES
    for item in items if isinstance(items, list) else []:
        path = item.get("path") if isinstance(item, dict) else None
        if not isinstance(path, str):
            continue
        reason = refused(path)
        if reason is None and len(entries) >= MAX_FILES:
            reason = f"the copy stops at {MAX_FILES} files"
        if reason is not None:
            problems.append(skipped(path, reason))
            continue
        link, mode, text = item.get("link"), item.get("mode"), item.get("data")
        if isinstance(link, str):
            entries.append(Entry(path, link=link))  # checked where it is written
            continue
        if not isinstance(mode, int) or isinstance(mode, bool) or not isinstance(text, str):
            problems.append(skipped(path, "refused: neither a file nor a symlink"))
            continue
        try:
            data = base64.b64decode(text, validate=True)
        except (binascii.Error, ValueError):
            problems.append(skipped(path, "refused: its data is not base64"))
            continue
        if len(data) > room:
            problems.append(skipped(path, f"the copy stops at {MAX_BYTES // MIB} MiB"))
            continue
        room -= len(data)
        entries.append(Entry(path, mode=mode & 0o777, data=data))
    return entries, problems


# ---------------------------------------------------------------- what is said


def _shown(path: str) -> str:
    return "".join(c if c.isprintable() else "?" for c in path)


def names_shown(paths: list[str]) -> str:
    """Up to SHOWN paths, printable, and how many more."""
    shown = ", ".join(_shown(path) for path in paths[:SHOWN])
    more = len(paths) - SHOWN
    return f"{shown} and {more} more" if more > 0 else shown


def said(copied: list[str], problems: list[dict], where: str = "into the worktree") -> list[str]:
    """The lines a relay prints about what it copied and left out."""
    lines = []
    if copied:
        lines.append(f"{FILE}: copied {len(copied)} ignored file(s) {where}: "
                     f"{names_shown(copied)}")  # fmt: skip
    if problems:
        first = problems[0]
        lines.append(f"{FILE}: {len(problems)} left out; {_shown(first['path'])}: "
                     f"{first['reason']}")  # fmt: skip
    return lines
