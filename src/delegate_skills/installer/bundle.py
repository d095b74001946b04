"""The bundled skill folders: where they are, what is in them, their revision.

A wheel ships them as `delegate_skills/bundle/<skill>/`; a checkout (or an
editable install) reads `skills/` at the repository root.

The revision of a skill folder is `sha256:` and the lowercase hex SHA-256 of
its entries. The entries are the regular files and symbolic links below the
folder (directories themselves are not entries; `__pycache__` directories and
`*.pyc` files are skipped), taken in ascending order of their relative path
as UTF-8 bytes with `/` separators. Each entry feeds the hash

    path NUL mode NUL size NUL content NUL

where mode is `100644` for a file with no executable bit, `100755` for a file
with any executable bit, `120000` for a symbolic link; content is the file's
bytes or the link's target; size is the content's length in decimal ASCII.
Owner, timestamps and the rest of the permission bits do not count, so the
revision is the same on every machine and under every umask, and it changes
when a byte, a name or an executable bit changes.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import stat
from pathlib import Path

from ..errors import UserError

REVISION_PREFIX = "sha256:"
SKIP_DIRS = frozenset({"__pycache__"})
SKIP_SUFFIXES = (".pyc",)


def package_dir() -> Path:
    return Path(__file__).resolve().parent.parent


def bundle_dir() -> Path:
    """The bundled skills: `<package>/bundle` (wheel), else the checkout's `skills/`."""
    shipped = package_dir() / "bundle"
    if shipped.is_dir():
        return shipped
    checkout = package_dir().parent.parent / "skills"
    if checkout.is_dir():
        return checkout
    raise UserError(f"cannot find the bundled skills (looked in {shipped} and {checkout})")


def skill_names(bundle: Path | None = None) -> list[str]:
    """The bundled skills: folders holding a SKILL.md, sorted by name."""
    root = bundle or bundle_dir()
    return sorted(
        entry.name
        for entry in root.iterdir()
        if not entry.name.startswith(".")
        and entry.name not in SKIP_DIRS
        and entry.is_dir()
        and (entry / "SKILL.md").is_file()
    )


def skipped(name: str, is_dir: bool) -> bool:
    return name in SKIP_DIRS if is_dir else name.endswith(SKIP_SUFFIXES)


def _entries(root: str) -> list[tuple[bytes, str, os.stat_result]]:
    found: list[tuple[bytes, str, os.stat_result]] = []
    pending = [("", root)]
    while pending:
        relative, directory = pending.pop()
        with os.scandir(directory) as listing:
            for entry in listing:
                info = entry.stat(follow_symlinks=False)
                is_dir = stat.S_ISDIR(info.st_mode)
                if skipped(entry.name, is_dir):
                    continue
                path = f"{relative}{entry.name}"
                if is_dir:
                    pending.append((f"{path}/", entry.path))
                else:
                    found.append((os.fsencode(path), entry.path, info))
    found.sort(key=lambda item: item[0])
    return found


def _mode(info: os.stat_result) -> bytes:
    if stat.S_ISLNK(info.st_mode):
        return b"120000"
    if stat.S_ISREG(info.st_mode):
        return b"100755" if info.st_mode & 0o111 else b"100644"
    return b"000000"


def _content(full: str, mode: bytes) -> bytes:
    if mode == b"120000":
        return os.fsencode(os.readlink(full))
    if mode == b"000000":
        return b""
    with open(full, "rb") as handle:
        return handle.read()


def revision(folder: str | os.PathLike) -> str:
    """The revision of a skill folder (see the module docstring for the definition)."""
    digest = hashlib.sha256()
    for path, full, info in _entries(os.fspath(folder)):
        mode = _mode(info)
        content = _content(full, mode)
        digest.update(b"%s\0%s\0%d\0" % (path, mode, len(content)))
        digest.update(content)
        digest.update(b"\0")
    return REVISION_PREFIX + digest.hexdigest()


def revision_or_none(folder: str) -> str | None:
    """The revision of `folder`, or None when it is not a readable real directory."""
    try:
        if not stat.S_ISDIR(os.lstat(folder).st_mode):
            return None
        return revision(folder)
    except OSError:
        return None


def copy_skill(source: str, destination: str) -> None:
    """Copy a skill folder (links as links, modes kept, caches skipped) to a new path."""

    def ignore(directory: str, names: list[str]) -> set[str]:
        return {
            name
            for name in names
            if skipped(name, stat.S_ISDIR(os.lstat(os.path.join(directory, name)).st_mode))
        }

    shutil.copytree(source, destination, symlinks=True, ignore=ignore)
    # A read-only bundle (a system or Nix store) must not give copies we can
    # no longer replace or remove: directory bits are not part of a revision.
    for directory, _dirs, _files in os.walk(destination):
        with contextlib.suppress(OSError):
            os.chmod(directory, stat.S_IMODE(os.lstat(directory).st_mode) | stat.S_IRWXU)
