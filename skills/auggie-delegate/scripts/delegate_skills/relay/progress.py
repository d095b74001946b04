"""Telling a person at a terminal that a relay is still working.

On a terminal (stderr is a TTY) the relay keeps one status line with the
elapsed time, rewritten in place about once a second; the implementer's own
stderr clears it before it is passed through, and the summary clears it for
good. On a pipe nothing of this is written: an agent reading the output sees
only the start line, the implementer's stderr and the summary.
"""

from __future__ import annotations

import os
import time

_CLEAR = b"\r\x1b[K"


def _elapsed(seconds: float) -> str:
    whole = int(seconds)
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"


class Ticker:
    """The in-place status line; every method is a no-op when stderr is not a TTY."""

    def __init__(self, label: str) -> None:
        try:
            self.active = os.isatty(2)
        except OSError:
            self.active = False
        self._label = label
        self._started = time.monotonic()
        self._shown_at = 0.0
        self._showing = False

    def tick(self) -> None:
        now = time.monotonic()
        if not self.active or now - self._shown_at < 1.0:
            return
        self._shown_at = now
        line = f"relay: {self._label} working · {_elapsed(now - self._started)}"
        self._write(_CLEAR + line.encode())
        self._showing = True

    def clear(self) -> None:
        if self._showing:
            self._write(_CLEAR)
            self._showing = False

    def _write(self, data: bytes) -> None:
        try:
            os.write(2, data)
        except OSError:
            self.active = False
