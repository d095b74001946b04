"""Reading JSON events out of an implementer's stdout.

Implementers print newline-delimited JSON, but not always cleanly: objects can
be split across reads, glued together, pretty-printed over several lines, or
preceded by terminal noise. `ObjectScanner` finds every top-level `{…}` object
in such a stream with bounded memory; `LineScanner` reads one JSON value per
line. Both take text, so a multi-byte character split across reads must be
joined first (see `Utf8Stream`).
"""

from __future__ import annotations

import codecs

from ..jstext import js_trim
from ..rules import Pattern

# `typing` costs milliseconds at every relay start; type checkers read this too.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable

#: Where a line ends, as JavaScript's multiline `^` sees it.
JS_LINE_BREAKS = Pattern("[\r\n\u2028\u2029]")

#: The most text kept for an object (or line) that has not ended yet.
MAX_BUFFERED_CHARS = 1_048_576

_OUTSIDE_STRING = Pattern(r'[{}"]')
_INSIDE_STRING = Pattern(r'["\\]')


def _refuse_constant(name: str):
    raise ValueError(name)


def parse_json(text: str):
    """json.loads that, like JavaScript, refuses NaN and Infinity. None when invalid."""
    import json  # imported at the first event, not at every start

    try:
        return json.loads(text, parse_constant=_refuse_constant)
    except (ValueError, RecursionError):
        return None


class Utf8Stream:
    """Bytes in, text out, with characters split across reads kept whole."""

    def __init__(self) -> None:
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")

    def decode(self, data: bytes) -> str:
        return self._decoder.decode(data)

    def flush(self) -> str:
        return self._decoder.decode(b"", final=True)


def feed_file(path: str, feed: Callable[[str], None], size: int = 65_536) -> None:
    """Hand a file's text to `feed` in pieces of `size` bytes (a file of any size).

    A file that cannot be read, or stops being readable, feeds what was read.
    """
    decoder = Utf8Stream()
    try:
        with open(path, "rb") as handle:
            while chunk := handle.read(size):
                feed(decoder.decode(chunk))
    except OSError:
        return
    feed(decoder.flush())


class ObjectScanner:
    """Every top-level JSON object in a text stream, handed to `on_object`.

    A brace-depth scanner: quotes only open strings inside an object, so noise
    between objects cannot swallow the next one; an object that never closes
    is dropped once it exceeds MAX_BUFFERED_CHARS, and scanning resumes after
    the dropped part. Text already scanned is never scanned again.

    Whole lines that are one JSON object each (the usual case) take a fast
    path through the C JSON parser; everything else goes through the scanner.
    """

    def __init__(self, on_object: Callable[[dict], None]) -> None:
        self._on_object = on_object
        self._buf = ""
        self._index = 0
        self._depth = 0
        self._start = -1
        self._in_string = False
        self._escaped = False
        self._line = ""

    # -- the line fast path -------------------------------------------------

    def feed(self, chunk: str) -> None:
        if not chunk:
            return
        data = self._line + chunk
        self._line = ""
        pos = 0
        while pos < len(data):
            if self._depth:
                self._scan_text(data[pos:])
                return
            newline = data.find("\n", pos)
            if newline < 0:
                rest = data[pos:]
                if len(rest) > MAX_BUFFERED_CHARS:
                    self._scan_text(rest)
                else:
                    self._line = rest
                return
            line = data[pos:newline]
            pos = newline + 1
            if "{" in line and not self._whole_object(line):
                self._scan_text(line + "\n")

    def finish(self) -> None:
        """Scan a last line that never got its newline."""
        line, self._line = self._line, ""
        if line and "{" in line and not self._whole_object(line):
            self._scan_text(line)

    def _whole_object(self, line: str) -> bool:
        text = line.strip()
        if not (text.startswith("{") and text.endswith("}")):
            return False
        value = parse_json(text)
        if not isinstance(value, dict):
            return False
        self._on_object(value)
        return True

    # -- the scanner ----------------------------------------------------------

    def _scan_text(self, chunk: str) -> None:
        self._buf += chunk
        while True:
            self._scan()
            pending = len(self._buf) - self._start
            if self._depth > 0 and self._start != -1 and pending > MAX_BUFFERED_CHARS:
                self._buf = self._buf[self._start + MAX_BUFFERED_CHARS :]
                self._index, self._start, self._depth = 0, -1, 0
                self._in_string = self._escaped = False
                continue
            break
        if self._depth > 0 and self._start != -1:
            if self._start > 0:
                self._buf = self._buf[self._start :]
                self._index -= self._start
                self._start = 0
        else:
            self._buf, self._index, self._start = "", 0, -1

    def _scan(self) -> None:
        buf, pos, end = self._buf, self._index, len(self._buf)
        inside, outside = _INSIDE_STRING.compiled(), _OUTSIDE_STRING.compiled()
        while pos < end:
            if self._depth == 0:
                brace = buf.find("{", pos)
                if brace < 0:
                    pos = end
                    break
                self._start, self._depth, pos = brace, 1, brace + 1
            elif self._in_string:
                if self._escaped:
                    self._escaped = False
                    pos += 1
                    continue
                match = inside.search(buf, pos)
                if match is None:
                    pos = end
                    break
                pos = match.end()
                if match.group() == "\\":
                    self._escaped = True
                else:
                    self._in_string = False
            else:
                match = outside.search(buf, pos)
                if match is None:
                    pos = end
                    break
                pos = match.end()
                char = match.group()
                if char == '"':
                    self._in_string = True
                elif char == "{":
                    self._depth += 1
                else:
                    self._depth -= 1
                    if self._depth == 0:
                        value = parse_json(buf[self._start : pos])
                        self._start = -1
                        if isinstance(value, dict):
                            self._on_object(value)
        self._index = pos


def _newlines(text: str) -> list[str]:
    return text.split("\n")


class LineSplitter:
    """The whole lines of a text stream, each handed to `on_line` without its break.

    Lines end at "\\n", or at each match of `breaks`. At most `limit`
    characters of a line that has not ended are held (`partial`): past that,
    the held text goes to `on_overflow` (dropped when there is none), and the
    rest of that line later arrives as a line of its own.
    """

    def __init__(
        self,
        on_line: Callable[[str], None],
        on_overflow: Callable[[str], None] | None = None,
        limit: int = MAX_BUFFERED_CHARS,
        breaks=None,
    ) -> None:
        self._on_line = on_line
        self._on_overflow = on_overflow
        self._limit = limit
        self._split = _newlines if breaks is None else breaks.split
        self.partial = ""
        #: Whether a line was cut short: past `limit`, or unended at `close`.
        self.cut = False

    def feed(self, text: str) -> None:
        lines = self._split(self.partial + text)
        self.partial = lines.pop()
        for line in lines:
            self._on_line(line)
        if len(self.partial) > self._limit:
            self._overflow(self.take())

    def _overflow(self, held: str) -> None:
        self.cut = True
        if self._on_overflow is not None:
            self._on_overflow(held)

    def take(self) -> str:
        """The held text of an unended line, let go (the stream is over)."""
        held, self.partial = self.partial, ""
        return held

    def close(self) -> None:
        """The stream is over: an unended line that is not blank goes out as a cut one."""
        rest = self.take()
        if rest.strip():
            self._overflow(rest)


class LineScanner:
    """One JSON value per line; blank and non-JSON lines are skipped.

    A partial line longer than MAX_BUFFERED_CHARS is dropped; a complete line
    of any length is parsed.
    """

    def __init__(self, on_object: Callable[[dict], None]) -> None:
        self._on_object = on_object
        self._lines = LineSplitter(self._emit)

    def feed(self, chunk: str) -> None:
        if chunk:
            self._lines.feed(chunk)

    def finish(self) -> None:
        self._emit(self._lines.take())

    def _emit(self, line: str) -> None:
        text = line.strip()
        if text:
            value = parse_json(text)
            if isinstance(value, dict):
                self._on_object(value)


class PatternWatch:
    """Which of `patterns` match the start of a line of a text stream, and first where.

    Holds at most `limit` characters of one line; the rest of a line cut there
    is not examined. `first` is the earliest pattern (in the order given) that
    matched any line, as the text it matched, trimmed.
    """

    def __init__(self, patterns, limit: int = MAX_BUFFERED_CHARS, breaks=None) -> None:
        self.patterns = tuple(patterns)
        self.found: dict[int, str] = {}
        self._lines = LineSplitter(self._whole_line, self._cut_line, limit, breaks)
        #: The held line was cut at `limit`: its rest is not a line to examine.
        self._overlong = False

    def feed(self, text: str) -> None:
        self._lines.feed(text)

    def end_line(self) -> None:
        self.feed("\n")

    def _whole_line(self, line: str) -> None:
        self._line(line)
        self._overlong = False

    def _cut_line(self, line: str) -> None:
        self._line(line)
        self._overlong = True

    def _line(self, line: str) -> None:
        if self._overlong or len(self.found) == len(self.patterns):
            return
        for index, pattern in enumerate(self.patterns):
            if index not in self.found:
                match = pattern.match(line)
                if match:
                    self.found[index] = js_trim(match.group(0))

    @property
    def first(self) -> str | None:
        return self.found[min(self.found)] if self.found else None


def first_group(patterns, text: str) -> str | None:
    """The first group of the first of `patterns` found anywhere in `text`."""
    for pattern in patterns:
        found = pattern.search(text)
        if found:
            return found.group(1)
    return None
