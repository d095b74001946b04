"""Errors a user can cause, each with the exit code the command ends with."""

from __future__ import annotations

USAGE = 2


class UserError(Exception):
    """One clear line for the user, and the exit code to leave with."""

    def __init__(self, message: str, exit_code: int = USAGE) -> None:
        super().__init__(message)
        self.exit_code = exit_code


def did_you_mean(word: str, choices) -> str:
    """`; did you mean X?` for the closest of `choices` to a mistyped `word`, or nothing."""
    import difflib

    close = difflib.get_close_matches(word, [str(c) for c in choices], n=1, cutoff=0.6)
    return f"; did you mean {close[0]}?" if close else ""
