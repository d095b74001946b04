"""The shapes of the values lanes and relays check: patterns, character classes, tokens.

A Pattern is a regular expression compiled on first use; a Shape checks a
`[first][rest]*` value by set lookups, without `re`; a Token is a Shape with
the words that tell a person which characters it allows. The registry's
value rules (lane names, model ids, session ids, …) are built from these.
"""

from __future__ import annotations


class Pattern:
    """A regular expression compiled on first use.

    The registry holds dozens of patterns and the dispatch path needs few or
    none of them; compiling them (and importing `re`) at import would cost
    every start. Flags are written inline: `(?i)`, `(?a)`, `(?m)`.
    """

    __slots__ = ("_compiled", "pattern")

    def __init__(self, pattern: str) -> None:
        self.pattern = pattern
        self._compiled = None

    def compiled(self):
        if self._compiled is None:
            import re

            self._compiled = re.compile(self.pattern)
        return self._compiled

    def fullmatch(self, text: str):
        return self.compiled().fullmatch(text)

    def search(self, text: str):
        return self.compiled().search(text)

    def split(self, text: str) -> list[str]:
        return self.compiled().split(text)


def _class_chars(body: str) -> frozenset[str]:
    """The characters of a regex class body such as `A-Za-z0-9._:@/\\[\\]-`."""
    chars: set[str] = set()
    i = 0
    while i < len(body):
        if body[i] == "\\":
            i += 1
        first = body[i]
        if i + 2 < len(body) and body[i + 1] == "-":
            chars.update(chr(code) for code in range(ord(first), ord(body[i + 2]) + 1))
            i += 3
        else:
            chars.add(first)
            i += 1
    return frozenset(chars)


class Shape:
    """One character from a class, then any number from another: `[first][rest]*`.

    Lane names, model ids, effort tokens and session ids all have this shape.
    Checking it is a set lookup per character, so validating a lane never
    imports `re` (about 10 ms of every start); `pattern` is the same shape as
    a regular expression, for the JSON Schema and for the tests that hold the
    two together.
    """

    __slots__ = ("first", "pattern", "rest")

    def __init__(self, first: str, rest: str) -> None:
        self.pattern = f"[{first}][{rest}]*"
        self.first = _class_chars(first)
        self.rest = _class_chars(rest)

    def accepts(self, text: str) -> bool:
        if not text or text[0] not in self.first:
            return False
        rest = self.rest
        return all(char in rest for char in text[1:])


class Token:
    """A value shape for model, provider and variant strings."""

    __slots__ = ("allowed", "shape")

    def __init__(self, rest: str, allowed: str, first: str = "A-Za-z0-9") -> None:
        self.shape = Shape(first, rest)
        self.allowed = allowed

    @property
    def pattern(self) -> str:
        return self.shape.pattern

    def accepts(self, value: str) -> bool:
        return self.shape.accepts(value)
