"""Value checks shared by the omp and copilot relays.

Both relays refuse a value that is not a shell-safe token with the same words,
naming the flag: `--<flag> value contains unsupported characters (…)`, which
differs from the engine's `--model contains …` wording.
"""

from __future__ import annotations

from delegate_skills import registry
from delegate_skills.relay.options import Usage


def check_tokens(opts: dict, fields: tuple[str, ...]) -> None:
    """Refuse the first of `fields` (option names, also the flag names) that is set and unsafe."""
    token = registry.SHELL_SAFE
    for field in fields:
        value = opts.get(field)
        if value is not None and not token.accepts(value):
            raise Usage(
                f"--{field} value contains unsupported characters (allowed: {token.allowed})"
            )
