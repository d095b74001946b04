"""Errors a user can cause, each with the exit code the command ends with."""

from __future__ import annotations

USAGE = 2


class UserError(Exception):
    """One clear line for the user, and the exit code to leave with."""

    def __init__(self, message: str, exit_code: int = USAGE) -> None:
        super().__init__(message)
        self.exit_code = exit_code
