"""`runs logs`: a run's implementer events as readable lines, and following them.

Every implementer writes its own event format (JSON lines, mostly); a line
shows the event's kind and the first piece of text found in it (a message,
a command, a result), cut to one terminal line. A line that is not JSON is
shown as it is. Following polls the events file until the run has ended.
"""

from __future__ import annotations

import json
import os
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
    except ValueError:
        return _one_line(text)
    if not isinstance(event, dict):
        return _one_line(text)
    kind = next((event[k] for k in _KIND_KEYS if isinstance(event.get(k), str)), "event")
    said = _first_text({k: v for k, v in event.items() if k not in _KIND_KEYS})
    return _one_line(f"{kind}: {said}" if said else kind)


def _one_line(text: str) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= WIDTH else flat[: WIDTH - 1] + "…"


def lines(path: str, start: int = 0) -> tuple[list[str], int]:
    """The readable lines of complete events from byte `start` on, and where the next begins."""
    try:
        with open(path, "rb") as handle:
            handle.seek(start)
            data = handle.read()
    except FileNotFoundError:
        return [], start
    except OSError as problem:
        raise UserError(f"cannot read {path}: {problem.strerror or problem}") from None
    end = data.rfind(b"\n") + 1
    shown = [line for raw in data[:end].split(b"\n") if (line := readable(raw)) is not None]
    return shown, start + end


def follow(out_dir: str, emit: Callable[[str], None], sleep=time.sleep) -> runs.Run:
    """Show the run's events as they come, until it has ended; the run as it ended."""
    run = runs.find(out_dir)
    path = events_path(run)
    offset = 0
    while True:
        ended = run.status not in IN_FLIGHT and not run.relay_alive()
        shown, offset = lines(path, offset)
        for line in shown:
            emit(line)
        if ended:
            tail, _ = _last_partial(path, offset)
            if tail is not None:
                emit(tail)
            return run
        sleep(FOLLOW_POLL_S)
        run = run.refresh()


def _last_partial(path: str, offset: int) -> tuple[str | None, int]:
    """An unfinished last line, once nothing more will be written to it."""
    try:
        with open(path, "rb") as handle:
            handle.seek(offset)
            rest = handle.read()
    except OSError:
        return None, offset
    return readable(rest), offset + len(rest)


def iter_all(out_dir: str) -> Iterator[str]:
    """Every event of the run so far, as readable lines."""
    run = runs.find(out_dir)
    path = events_path(run)
    shown, offset = lines(path)
    yield from shown
    tail, _ = _last_partial(path, offset)
    if tail is not None:
        yield tail
