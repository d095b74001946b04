"""Fleet config files: where they are, reading them, the overlay, writing them.

Global: `$XDG_CONFIG_HOME/delegate-skills/config.json`, else
`~/.config/delegate-skills/config.json`. Project: `<git root>/.delegate/config.json`,
trusted only while its approval hash matches (see approval.py). The effective
fleet starts from the global lanes; a project lane replaces the global lane of
the same name whole.
"""

from __future__ import annotations

import os

from . import approval, gitmeta, jsjson, registry, store
from .errors import UserError
from .homes import config_home
from .reading import CONFIG_LIMIT, read_limited
from .validation import InvalidDocument, check_document, parse_document

GLOBAL_SCOPE = "global"
PROJECT_SCOPE = "project"
SCOPES = (GLOBAL_SCOPE, PROJECT_SCOPE)


def global_config_path() -> str:
    return os.path.join(config_home(), "delegate-skills", "config.json")


def project_config_path(toplevel: str) -> str:
    return os.path.join(toplevel, ".delegate", "config.json")


class ConfigFile:
    """One fleet file as read: its bytes, its checked document and their digest."""

    __slots__ = ("digest", "document", "path", "raw")

    def __init__(self, path: str, raw: bytes, document: dict) -> None:
        self.path = path
        self.raw = raw
        self.document = document
        self.digest = approval.digest(raw)


def read_config(path: str | None, within: str | None = None) -> ConfigFile | None:
    """The checked config at `path`; None when there is no file. Raises UserError.

    A project config is read only if it stays inside its repository (`within`).
    """
    if not path:
        return None
    raw = read_limited(path, CONFIG_LIMIT, within=within, what="fleet config")
    if raw is None:
        return None
    return ConfigFile(path, raw, parse_document(jsjson.decode_utf8(raw), path))


def effective_lanes(global_doc: dict | None, project_doc: dict | None) -> dict[str, dict]:
    """Name → lane with its `source`; a project lane replaces a global one whole."""
    lanes: dict[str, dict] = {}
    for source, doc in (("global", global_doc), ("project", project_doc)):
        for name, lane in (doc or {}).get("lanes", {}).items():
            lanes[name] = {**lane, "source": source}
    return jsjson.js_ordered(lanes.items())


class Effective:
    """The effective fleet seen from one directory."""

    __slots__ = ("git_dir", "global_file", "global_path", "project_file", "project_path")

    def __init__(self, cwd: str) -> None:
        paths = gitmeta.repo_paths(cwd)
        self.global_path = global_config_path()
        self.project_path = project_config_path(paths.toplevel) if paths.toplevel else None
        self.git_dir = paths.git_dir
        self.global_file = read_config(self.global_path)
        self.project_file = read_config(self.project_path, paths.toplevel)

    @property
    def project_trusted(self) -> bool:
        return self.project_file is not None and approval.is_approved(
            self.git_dir, self.project_file.digest
        )

    def lanes(self) -> dict[str, dict]:
        return effective_lanes(
            self.global_file and self.global_file.document,
            self.project_file and self.project_file.document,
        )

    def report(self) -> dict:
        """What `config load` prints, key for key as the Node bundle prints it."""
        return {
            "version": registry.CONFIG_VERSION,
            "globalPath": self.global_path,
            "projectPath": self.project_path,
            "globalPresent": self.global_file is not None,
            "projectPresent": self.project_file is not None,
            "projectTrusted": self.project_trusted,
            "lanes": self.lanes(),
        }


def read_document_file(path: str, label: str | None = None) -> dict:
    """A fleet document from a file the user names (validate, write). Raises UserError.

    `label` is how messages name the file (as the user typed it).
    """
    label = label or path
    raw = read_limited(path, CONFIG_LIMIT, label=label, what="fleet config")
    if raw is None:
        raise UserError(f"{label}: cannot read (No such file or directory)")
    return parse_document(jsjson.decode_utf8(raw), label)


class Target:
    """Where a scope's config lives, and the write queue that guards it."""

    __slots__ = ("git_dir", "lock", "path", "root", "scope")

    def __init__(self, scope: str, path: str, lock: str, git_dir: str | None) -> None:
        self.scope = scope
        self.path = path
        self.lock = lock
        self.git_dir = git_dir
        #: The repository a project config must stay inside (None for global).
        self.root = os.path.dirname(os.path.dirname(path)) if git_dir else None

    def queued_paths(self) -> tuple[str, ...]:
        """The files this queue guards (where their temp files appear)."""
        if self.git_dir is None:
            return (os.path.realpath(self.path),)
        return (
            self.path,
            approval.approval_path(self.git_dir),
            approval.pending_path(self.git_dir),
        )


def target_for(scope: str, cwd: str) -> Target:
    if scope == GLOBAL_SCOPE:
        path = global_config_path()
        return Target(scope, path, store.lock_path_for(path), None)
    if scope != PROJECT_SCOPE:
        raise UserError("--scope must be global or project")
    paths = gitmeta.repo_paths(cwd)
    if not paths.toplevel or not paths.git_dir:
        raise UserError("project scope requires a git repository (--cwd)")
    return Target(
        scope,
        project_config_path(paths.toplevel),
        approval.queue_lock_path(paths.git_dir),
        paths.git_dir,
    )


def ensure_safe_project_dir(toplevel: str) -> None:
    """Refuse a `.delegate` that is a symlink, a file, or resolves outside the repository."""
    delegate_dir = os.path.join(toplevel, ".delegate")
    if os.path.islink(delegate_dir):
        raise UserError("refusing to write: .delegate is a symlink")
    if os.path.lexists(delegate_dir) and not os.path.isdir(delegate_dir):
        raise UserError(
            f"refusing to write: {delegate_dir} is a file, not a directory; move it aside"
        )
    os.makedirs(delegate_dir, exist_ok=True)
    if os.path.islink(delegate_dir):
        raise UserError("refusing to write: .delegate is a symlink")
    real_root = os.path.realpath(toplevel)
    relative = os.path.relpath(os.path.realpath(delegate_dir), real_root)
    if relative == "." or relative.startswith("..") or os.path.isabs(relative):
        raise UserError("refusing to write: .delegate resolves outside the git repository")
    if relative != ".delegate":
        raise UserError("refusing to write: unexpected .delegate path")


class _Locked:
    """The target's write queue, held; a project write cut short earlier is put right first."""

    def __init__(self, target: Target) -> None:
        self._target = target
        self._queue = store.queue(target.queued_paths(), target.lock)

    def __enter__(self) -> None:
        if self._target.git_dir is not None:
            approval.check_dir(self._target.git_dir)
        self._queue.__enter__()
        if self._target.git_dir is not None:
            try:
                approval.recover(self._target.git_dir, self._target.path)
            except BaseException:
                self._queue.__exit__(None, None, None)
                raise

    def __exit__(self, *exc_info) -> None:
        self._queue.__exit__(*exc_info)


def _approved_digest(target: Target) -> str | None:
    """The digest of the project config on disk when it is approved, else None."""
    try:
        current = read_limited(target.path, CONFIG_LIMIT, within=target.root)
    except UserError:
        return None
    if current is None:
        return None
    found = approval.digest(current)
    return found if approval.is_approved(target.git_dir, found) else None


def _replace(target: Target, document: dict) -> None:
    """Write `document` to the target (and approve it, for a project). Queue held."""
    data = jsjson.document_bytes(document)
    if target.scope == PROJECT_SCOPE:
        ensure_safe_project_dir(target.root)
        approval.replace_approved(target.git_dir, target.path, data, _approved_digest(target))
        return
    # The user's own global file may be a symlink into their dotfiles: keep the link.
    try:
        store.atomic_write(target.path, data, follow_symlinks=True)
    except OSError as error:
        raise UserError(
            f"cannot write {target.path}: {error.strerror or error}; "
            "check that its folder is a directory you can write"
        ) from None


def write_document(scope: str, cwd: str, document: dict) -> dict:
    """Replace a scope's config with `document`. A project write is the user's approval."""
    problem = check_document(document, "write payload")
    if problem:
        raise InvalidDocument(problem)
    target = target_for(scope, cwd)
    with _Locked(target):
        _replace(target, document)
    report = {"ok": True, "path": target.path, "lanes": list(document["lanes"])}
    if scope == PROJECT_SCOPE:
        report["projectTrusted"] = True
    return report


def edit_lane(scope: str, cwd: str, name: str, lane: dict | None) -> dict:
    """Set (or, with `lane` None, remove) one lane of a scope's config.

    Through the write queue: the file is read as it is now, one lane changes,
    the whole document is checked, then replaced. A project edit re-approves
    the file, since the user ran it, but only a file that was approved before:
    an edit must not approve lanes nobody has reviewed.
    """
    target = target_for(scope, cwd)
    with _Locked(target):
        current = read_config(target.path, target.root)
        unreviewed = (
            current is not None
            and target.git_dir is not None
            and not approval.is_approved(target.git_dir, current.digest)
        )
        if unreviewed:
            raise UserError(
                f"{target.path} is not approved; review it, then run "
                "`delegate config approve` before editing its lanes"
            )
        document = current.document if current else {"version": registry.CONFIG_VERSION}
        lanes = dict(document.get("lanes") or {})
        if lane is None:
            if name not in lanes:
                raise UserError(f"{target.path}: no lane {name} to remove")
            del lanes[name]
        else:
            lanes[name] = lane
        document = {**document, "lanes": lanes}
        problem = check_document(document, target.path)
        if problem:
            raise InvalidDocument(problem)
        _replace(target, document)
    return {
        "ok": True,
        "path": target.path,
        "lanes": list(jsjson.js_ordered(lanes.items())),
        **({"projectTrusted": True} if scope == PROJECT_SCOPE else {}),
    }


def approve_current(cwd: str) -> dict:
    """Approve the project config exactly as it is on disk, after checking it."""
    target = target_for(PROJECT_SCOPE, cwd)
    with _Locked(target):
        current = read_config(target.path, target.root)
        if current is None:
            raise UserError(f"{target.path}: no project config to approve")
        approval.approve(target.git_dir, current.digest)
    return {
        "ok": True,
        "path": target.path,
        "lanes": list(jsjson.js_ordered(current.document["lanes"].items())),
        "projectTrusted": True,
        "sha256": current.digest,
        "content": current.raw.decode("utf-8", "replace"),
    }
