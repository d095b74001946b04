"""The core this relay runs from, as one archive named by its content.

What is shipped is the `delegate_skills` package the running relay was
loaded from (a skill folder's bundled copy, or the installed package) with
the adapters beside it, compiled files left out. Its hash names the folder it
unpacks to on the other machine, so it is sent once per content: the next run
with the same core finds it there.
"""

from __future__ import annotations

import hashlib
import io
import os
import tarfile

PACKAGE = "delegate_skills"
#: Folders of the package only the `delegate` command uses (click, the installer).
LEFT_OUT = {"__pycache__", "commands", "installer"}


def _relays_dir() -> str | None:
    """Where the adapters are: delegate_skills.relays, wherever it maps."""
    from ..relay.main import load_adapter  # noqa: F401  (maps relays/ in a source checkout)

    try:
        import delegate_skills.relays as relays
    except ImportError:
        return None
    paths = list(getattr(relays, "__path__", []))
    return paths[0] if paths else None


def files() -> dict[str, bytes]:
    """Archive path → bytes of every file shipped, in a fixed order."""
    package_dir = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    found: dict[str, bytes] = {}
    _collect(package_dir, PACKAGE, found)
    relays = _relays_dir()
    if relays is not None and os.path.realpath(relays) != os.path.realpath(
        os.path.join(package_dir, "relays")
    ):
        _collect(relays, f"{PACKAGE}/relays", found)
    return dict(sorted(found.items()))


def _collect(folder: str, prefix: str, found: dict[str, bytes]) -> None:
    for top, dirs, names in os.walk(folder):
        dirs[:] = sorted(d for d in dirs if d not in LEFT_OUT)
        rel = os.path.relpath(top, folder)
        for name in sorted(names):
            if name.endswith((".pyc", ".pyo")):
                continue
            path = os.path.join(top, name)
            if os.path.islink(path) or not os.path.isfile(path):
                continue
            with open(path, "rb") as handle:
                inside = name if rel == "." else f"{rel.replace(os.sep, '/')}/{name}"
                found[f"{prefix}/{inside}"] = handle.read()


def digest(shipped: dict[str, bytes]) -> str:
    """A short content hash of the shipped files (names and bytes)."""
    hasher = hashlib.sha256()
    for name, data in shipped.items():
        hasher.update(name.encode() + b"\0" + str(len(data)).encode() + b"\0" + data)
    return hasher.hexdigest()[:24]


def archive(shipped: dict[str, bytes]) -> bytes:
    """A gzip tar of the shipped files."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz", format=tarfile.PAX_FORMAT) as tar:
        for name, data in shipped.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            info.mode = 0o644
            info.mtime = 0
            tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()
