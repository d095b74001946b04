"""What the engine offers an adapter whose CLI keeps its own records of a run (a session
file it writes beside the run, compressed or not): finding the ones written since the run
began, reading them within bounds, and the JSON objects of their lines.

Each read is bounded in bytes and time, never follows a link or opens a FIFO, and gives
back less (never an error) when a record is cut, so a hostile or half-written record can
only make a field null.
"""

from __future__ import annotations

import json
import os
import select
import stat
import subprocess
import time


def written_since(path: str, cutoff: float) -> bool:
    """A regular file (no link, no FIFO) last written at `cutoff` or later."""
    try:
        info = os.lstat(path)
    except OSError:
        return False
    return stat.S_ISREG(info.st_mode) and info.st_mtime >= cutoff


def entries(path: str) -> list[os.DirEntry]:
    """The entries of a folder, by name. Raises OSError."""
    with os.scandir(path) as found:
        return sorted(found, key=lambda entry: entry.name)


def recent_records(root: str, name: str, cutoff: float, limit: int) -> list[str]:
    """The files `root/<folder>/<folder>/<name>` written at `cutoff` or later, at most
    `limit` of them, in folder-name order; a first-level folder last changed before
    `cutoff` is not looked into. Raises OSError."""
    found: list[str] = []
    for outer in entries(root):
        if not outer.is_dir(follow_symlinks=False) or outer.stat().st_mtime < cutoff:
            continue
        for inner in entries(outer.path):
            if len(found) >= limit:
                return found
            path = os.path.join(inner.path, name)
            if written_since(path, cutoff):
                found.append(path)
    return found


def command_output(argv: list[str], limit: int, seconds: float) -> bytes:
    """The first `limit` bytes a program (a decompressor) prints within `seconds`; what it
    has not given by then is left out, and it is ended."""
    try:
        proc = subprocess.Popen(
            argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL
        )
    except OSError:
        return b""
    chunks, size = [], 0
    deadline = time.monotonic() + seconds
    try:
        while size < limit:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([proc.stdout], [], [], left)[0]:
                break
            chunk = os.read(proc.stdout.fileno(), min(1 << 20, limit - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.stdout.close()
        proc.wait()
    return b"".join(chunks)


def first_object(data: bytes) -> dict:
    """The JSON object on `data`'s first line ({} when there is none)."""
    return next(json_objects(data.split(b"\n", 1)[0]), {})


def json_objects(data: bytes):
    """The JSON objects of `data`'s lines; a line that is not one (cut mid-way) is skipped."""
    for line in data.decode("utf-8", errors="replace").splitlines():
        try:
            event = json.loads(line)
        except ValueError:
            continue
        if isinstance(event, dict):
            yield event
