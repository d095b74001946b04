"""The lockfile: which bundled skills are installed, at what revision, for which agents.

    {"version": 1,
     "skills": {"<skill>": {"revision": "sha256:<64 hex>",
                            "targets": ["<agent>", ...],
                            "mode": "link"}}}

`mode` appears only for symlinked installs. Skills are sorted by name and
targets by agent name; there are no timestamps, so two machines installing the
same revision write the same bytes. A project keeps it at
`<root>/.agents/delegate-skills.lock.json`; global installs at
`<state home>/skills.lock.json`.

A project's lockfile records intent and is meant to be committed; the lock
file that queues its writers is not, so it is kept where git never shows it:
in the project's git dir (`<git dir>/delegate-skills/<lockfile's path from the
top level>.lock`), or, for a project outside any git work tree, in the state
home (`locks/<hash of the lockfile's path>.lock`). The global lockfile's lock
file sits beside it in the state home.

An entry this version cannot act on (a skill not in the bundle, a mode or a
shape it does not know) is kept exactly as read; an agent it does not know
stays in its targets and unknown fields stay in their entry. Each is
reported as a warning whenever the file is read.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
from collections.abc import Iterator

from .. import gitmeta, jsjson, store
from ..errors import UserError
from . import agents, files, warn
from . import state as machine

VERSION = 1
NAME = "delegate-skills.lock.json"
PROJECT_DIR = ".agents"
GLOBAL_NAME = "skills.lock.json"
#: Under a git dir, or the state home: where project lockfiles' lock files go.
QUEUE_DIR_IN_GIT = "delegate-skills"
QUEUE_DIR_IN_STATE = "locks"
# The Skills CLI's own lockfiles: never ours to write.
FOREIGN_NAMES = frozenset({"skills-lock.json", ".skill-lock.json"})
LINK = "link"
ENTRY_FIELDS = ("revision", "targets", "mode")
_REVISION = re.compile(r"sha256:[0-9a-f]{64}")
_PLAIN_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")


def plain_name(name: str) -> bool:
    """Whether `name` can only ever be one folder inside an agent's skill directory."""
    return _PLAIN_NAME.fullmatch(name) is not None


def project_path(root: str) -> str:
    return os.path.join(root, PROJECT_DIR, NAME)


class Lock:
    """One lockfile as read: its entries, its unknown top-level fields, its bytes."""

    def __init__(
        self, path: str, raw: bytes | None, skills: dict, extra: dict, root: str | None = None
    ) -> None:
        self.path = path
        self.raw = raw
        self.skills = skills
        self.extra = extra
        #: The project the lockfile belongs to (None for the global one).
        self.root = root

    @property
    def exists(self) -> bool:
        return self.raw is not None

    def to_bytes(self) -> bytes:
        skills = {}
        for name in sorted(self.skills):
            entry = self.skills[name]
            skills[name] = canonical_entry(entry) if well_formed(entry) else entry
        document = {"version": VERSION, "skills": skills}
        for key in sorted(self.extra):
            document[key] = self.extra[key]
        return jsjson.document_bytes(document)


def well_formed(entry) -> bool:
    """Whether this version understands the entry's shape (its skill may still be unknown)."""
    if not isinstance(entry, dict):
        return False
    revision = entry.get("revision")
    targets = entry.get("targets")
    return (
        isinstance(revision, str)
        and _REVISION.fullmatch(revision) is not None
        and isinstance(targets, list)
        and all(isinstance(agent, str) for agent in targets)
        and entry.get("mode", LINK) == LINK
    )


def canonical_entry(entry: dict) -> dict:
    out: dict = {"revision": entry["revision"], "targets": sorted(set(entry["targets"]))}
    if entry.get("mode") == LINK:
        out["mode"] = LINK
    for key in sorted(k for k in entry if k not in ENTRY_FIELDS):
        out[key] = entry[key]
    return out


def make_entry(revision: str, targets, link: bool, old: dict | None) -> dict:
    """A new entry, keeping the unknown fields of the one it replaces."""
    entry = {k: v for k, v in (old or {}).items() if k not in ENTRY_FIELDS}
    entry.update({"revision": revision, "targets": sorted(set(targets))})
    if link:
        entry["mode"] = LINK
    return canonical_entry(entry)


def read(path: str, root: str | None = None) -> Lock:
    """The lockfile at `path` (empty when missing). A bad file is a UserError.

    `root` is the project it belongs to: a lockfile that resolves outside it is refused.
    """
    raw = files.read_bytes(path, root)
    if raw is None:
        return Lock(path, None, {}, {}, root)
    try:
        document = files.parse_object(raw)
    except files.Corrupt as problem:
        raise UserError(f"{path} is {problem}; fix it (or restore it from git)") from None
    files.check_version(path, document, VERSION, "lockfile", VERSION)
    skills = document.get("skills", {})
    if not isinstance(skills, dict):
        raise UserError(f'{path}: "skills" must be an object')
    extra = {k: v for k, v in document.items() if k not in ("version", "skills")}
    return Lock(path, raw, dict(skills), extra, root)


def actionable(lock: Lock, name: str, bundled: set[str]) -> bool:
    """Whether this version may act on the entry for `name`."""
    return name in bundled and plain_name(name) and well_formed(lock.skills.get(name))


def warn_unknown(lock: Lock, bundled: set[str]) -> list[dict]:
    """Warn about everything in the lockfile this version does not know; return them."""
    found = []
    if lock.extra:
        found.append(
            {"skill": None, "problem": f"unknown field(s) {', '.join(sorted(lock.extra))}"}
        )
    for name in sorted(lock.skills):
        entry = lock.skills[name]
        if not well_formed(entry):
            found.append({"skill": name, "problem": "entry in a form this version does not know"})
            continue
        if name not in bundled:
            found.append({"skill": name, "problem": "skill not in this bundle"})
            continue
        unknown_agents = sorted(a for a in set(entry["targets"]) if not agents.is_known(a))
        if unknown_agents:
            found.append(
                {"skill": name, "problem": f"unknown agent(s) {', '.join(unknown_agents)}"}
            )
        unknown_fields = sorted(k for k in entry if k not in ENTRY_FIELDS)
        if unknown_fields:
            found.append(
                {"skill": name, "problem": f"unknown field(s) {', '.join(unknown_fields)}"}
            )
    for item in found:
        where = f"skill {item['skill']!r}: " if item["skill"] else ""
        warn(f"{lock.path}: {where}{item['problem']}; kept as is")
    return found


def save(lock: Lock) -> bool:
    """Write the lockfile when its bytes change (queue held). Returns whether it wrote."""
    if os.path.basename(lock.path) in FOREIGN_NAMES:
        raise UserError(f"refusing to write {lock.path}: that lockfile belongs to the Skills CLI")
    if not lock.exists and not lock.skills and not lock.extra:
        return False
    data = lock.to_bytes()
    if data == lock.raw:
        return False
    files.replace(lock.path, data, lock.root)
    lock.raw = data
    return True


def queue_path(path: str, root: str | None) -> str:
    """The lock file that queues the writers of the lockfile at `path` (`root`: its project).

    Never inside a project's work tree, where `git status` would show it.
    """
    if root is None:
        return store.lock_path_for(path)
    real = os.path.realpath(path)
    repo = gitmeta.repo_paths(root)
    if repo.toplevel and repo.git_dir:
        inside = os.path.relpath(real, os.path.realpath(repo.toplevel))
        if inside != os.curdir and inside.split(os.sep)[0] != os.pardir:
            return os.path.join(repo.git_dir, QUEUE_DIR_IN_GIT, f"{inside}.lock")
    digest = hashlib.sha256(os.fsencode(real)).hexdigest()[:32]
    return os.path.join(machine.state_home(), QUEUE_DIR_IN_STATE, f"{digest}.lock")


@contextlib.contextmanager
def locked(path: str, root: str | None = None) -> Iterator[Lock]:
    """The lockfile as it is now, with its write queue held until the block ends."""
    files.refuse_symlinks(root, path)
    with store.queue((path,), queue_path(path, root)):
        yield read(path, root)
