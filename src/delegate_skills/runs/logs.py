"""`runs logs`: a run's implementer events as readable lines, and following them.

Every implementer writes its own event format (JSON lines, mostly); a line
shows the event's kind and the first piece of text found in it (a message,
a command, a result), cut to one terminal line. A line that is not JSON is
shown as it is. Following polls the events file until the run has ended.

The implementer writes the events, so nothing in them reaches the terminal as
control: escape sequences and control characters are dropped from every line
shown. The file is read only when it is a regular file (never through a
symlink, never waiting on a FIFO), in bounded chunks; a line longer than
LINE_LIMIT is shown cut.
"""

from __future__ import annotations

import errno
import json
import os
import re
import stat
import time
from collections.abc import Callable, Iterator

from ..errors import UserError
from ..runstore.liveness import IN_FLIGHT
from . import view as runs

#: How often `follow` looks for new events.
FOLLOW_POLL_S = 0.2
#: The widest line shown.
WIDTH = 200
_KIND_KEYS = ("type", "event", "kind", "method", "subtype")
_TEXT_KEYS = ("text", "message", "content", "command", "result", "summary", "delta", "output")
#: The most read from the events file at once.
READ_CHUNK = 1024 * 1024
#: The longest event line kept whole (to parse it); the rest of a longer one is dropped.
LINE_LIMIT = 16 * 1024 * 1024
#: Terminal control: escape sequences (CSI; OSC, DCS, PM, APC strings; the rest), C0 but
#: tab, DEL and C1.
_CONTROL = re.compile(
    r"\x1b(?:\[[0-?]*[ -/]*[@-~]?|[\]PX^_][^\x07\x1b]*(?:\x07|\x1b\\)?|[ -/]*[0-~]?)"
    r"|[\x00-\x08\x0a-\x1f\x7f-\x9f]"
)


def events_path(run: runs.Run) -> str:
    """Where the run's implementer events are: its adapter's events file in its directory.

    Raises UserError.
    """
    from ..relay.main import load_adapter

    if run.record is not None:
        implementer = run.record.text("implementer")
    else:  # a foreign run directory, read as it is
        implementer = run.marker.get("implementer")
    adapter = load_adapter(implementer) if isinstance(implementer, str) else None
    name = adapter.events_name if adapter is not None else None
    if not name:
        raise UserError(f"{run.out_dir}: this run's implementer keeps no event log")
    return os.path.join(run.out_dir, name)


def _first_text(value, depth: int = 0) -> str | None:
    if isinstance(value, str):
        return value
    if depth > 3:
        return None
    if isinstance(value, dict):
        for key in _TEXT_KEYS:
            if key in value:
                found = _first_text(value[key], depth + 1)
                if found:
                    return found
        for inner in value.values():
            if isinstance(inner, (dict, list)):
                found = _first_text(inner, depth + 1)
                if found:
                    return found
    if isinstance(value, list):
        for inner in value:
            found = _first_text(inner, depth + 1)
            if found:
                return found
    return None


def readable(raw: bytes) -> str | None:
    """One event line as a person reads it (None for an empty line)."""
    text = raw.decode("utf-8", errors="replace").strip()
    if not text:
        return None
    try:
        event = json.loads(text)
    except (ValueError, RecursionError):
        return _one_line(text)
    if not isinstance(event, dict):
        return _one_line(text)
    kind = next((event[k] for k in _KIND_KEYS if isinstance(event.get(k), str)), "event")
    said = _first_text({k: v for k, v in event.items() if k not in _KIND_KEYS})
    return _one_line(f"{kind}: {said}" if said else kind)


def printable(text: str) -> str:
    """`text` without terminal control: escape sequences and control characters."""
    return _CONTROL.sub(lambda found: " " if found.group() == "\n" else "", text)


def _one_line(text: str) -> str:
    flat = " ".join(printable(text).split())
    return flat if len(flat) <= WIDTH else flat[: WIDTH - 1] + "…"


def _open_events(path: str) -> int | None:
    """A read handle on the events file; None when there is none yet. Raises UserError
    when it is anything but a regular file."""
    flags = os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags)
    except FileNotFoundError:
        return None
    except OSError as problem:
        if problem.errno == errno.ELOOP:
            raise UserError(f"refusing to read {path}: it is a symlink, not the run's "
                            "event log") from None  # fmt: skip
        raise UserError(f"cannot read {path}: {problem.strerror or problem}") from None
    try:
        regular = stat.S_ISREG(os.fstat(fd).st_mode)
    except OSError:
        regular = False
    if not regular:
        os.close(fd)
        raise UserError(f"refusing to read {path}: not a regular file; the run's event log "
                        "is one")  # fmt: skip
    return fd


class EventReader:
    """The events file read on from where the last read ended, in bounded chunks."""

    def __init__(self, path: str, offset: int = 0) -> None:
        self.path = path
        #: Where the next read starts.
        self.offset = offset
        #: Where the line being read began.
        self.line_start = offset
        self._pending = bytearray()

    def new_lines(self) -> Iterator[str]:
        """The readable lines of the events completed since the last call. Raises UserError."""
        fd = _open_events(self.path)
        if fd is None:
            return
        try:
            end = os.fstat(fd).st_size  # what is there now; the rest waits for the next call
            while self.offset < end:
                try:
                    chunk = os.pread(fd, min(READ_CHUNK, end - self.offset), self.offset)
                except OSError as problem:
                    raise UserError(f"cannot read {self.path}: "
                                    f"{problem.strerror or problem}") from None  # fmt: skip
                if not chunk:
                    break
                yield from self._feed(chunk)
        finally:
            os.close(fd)

    def _feed(self, chunk: bytes) -> Iterator[str]:
        start = 0
        while (newline := chunk.find(b"\n", start)) >= 0:
            self._keep(chunk[start:newline])
            self.offset += newline + 1 - start
            self.line_start = self.offset
            line = readable(bytes(self._pending))
            self._pending.clear()
            if line is not None:
                yield line
            start = newline + 1
        self._keep(chunk[start:])
        self.offset += len(chunk) - start

    def _keep(self, piece: bytes) -> None:
        room = LINE_LIMIT - len(self._pending)
        if room > 0:
            self._pending += piece[:room]

    def rest(self) -> str | None:
        """The unfinished last line, once nothing more will be written to it."""
        line = readable(bytes(self._pending))
        self._pending.clear()
        self.line_start = self.offset
        return line


def lines(path: str, start: int = 0) -> tuple[list[str], int]:
    """The readable lines of complete events from byte `start` on, and where the next begins.

    Raises UserError.
    """
    reader = EventReader(path, start)
    shown = list(reader.new_lines())
    return shown, reader.line_start


def follow(out_dir: str, emit: Callable[[str], None], sleep=time.sleep) -> runs.Run:
    """Show the run's events as they come, until it has ended; the run as it ended."""
    run = runs.find(out_dir)
    reader = EventReader(events_path(run))
    while True:
        ended = run.status not in IN_FLIGHT and not run.relay_alive()
        for line in reader.new_lines():
            emit(line)
        if ended:
            tail = reader.rest()
            if tail is not None:
                emit(tail)
            return run
        sleep(FOLLOW_POLL_S)
        run = run.refresh()


def iter_all(out_dir: str) -> Iterator[str]:
    """Every event of the run so far, as readable lines."""
    run = runs.find(out_dir)
    reader = EventReader(events_path(run))
    yield from reader.new_lines()
    tail = reader.rest()
    if tail is not None:
        yield tail
