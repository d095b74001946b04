"""The delegate-setup scripts, argument for argument as the Node bundle's.

`config.py`, `lane.py` and `discover.py` take the arguments the `.mjs` scripts
take, print JSON with the same keys, and exit 0, or 2 with one line on stderr.
"""

from __future__ import annotations

import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable


class ScriptExit(Exception):
    def __init__(self, code: int) -> None:
        super().__init__(code)
        self.code = code


def fail(script: str, message: str) -> ScriptExit:
    """Print `script: message` to stderr and give the exit to raise (code 2)."""
    sys.stderr.write(f"{script}: {message}\n")
    return ScriptExit(2)


def wants_help(argv: list[str]) -> bool:
    return not argv or "--help" in argv or "-h" in argv


def print_help(text: str, argv: list[str]) -> int:
    """Help on stdout; exit 2 when no arguments were given at all."""
    sys.stdout.write(text)
    return 0 if argv else 2


def run_script(script: str, body: Callable[[list[str]], int], argv: list[str]) -> int:
    """Run a script's `body`; a ScriptExit or a UserError ends it with one stderr line."""
    from ..errors import UserError

    try:
        return body(argv)
    except ScriptExit as done:
        return done.code
    except UserError as error:
        return fail(script, str(error)).code
    except KeyboardInterrupt:
        sys.stderr.write(f"{script}: interrupted\n")
        return 130
