"""Small checks and readers shared by the agy, grok, pi and vibe adapters.

Each of these is needed by two or more of those adapters and by nothing in
the engine yet; they are candidates to move into the engine.
"""

from __future__ import annotations

import math

from delegate_skills import registry
from delegate_skills.relay.options import Usage

#: The largest brief passed as one argv token (Linux caps one argument near 128 KiB).
MAX_ARGV_BRIEF_BYTES = 120 * 1024


def check_safe_values(opts: dict, fields: tuple[tuple[str, str], ...]) -> None:
    """Refuse values that are not shell-safe tokens; `fields` holds (field, flag) pairs.

    The wording is the one the grok and pi relays use: `--<flag> value contains …`.
    """
    token = registry.SHELL_SAFE
    for field, flag in fields:
        value = opts.get(field)
        if value is not None and not token.accepts(value):
            raise Usage(f"{flag} value contains unsupported characters (allowed: {token.allowed})")


def check_argv_brief(brief: str, flag: str, too_big: str) -> None:
    """A brief that rides argv as `<flag>=<brief>`: no NUL byte, and not too long.

    `too_big` is the size message, with `{kb}` for the brief's size in KiB.
    """
    if "\0" in brief:
        raise Usage(f"brief contains a NUL byte, which cannot be passed in {flag}")
    size = len(brief.encode("utf-8", errors="replace"))
    if size > MAX_ARGV_BRIEF_BYTES:
        raise Usage(too_big.format(kb=math.floor(size / 1024 + 0.5)))


def text_blocks(content) -> list[str]:
    """The text of a chat message's `content`: a string, or the `text` blocks of a list."""
    if isinstance(content, str):
        return [content]
    if not isinstance(content, list):
        return []
    return [
        block["text"] if isinstance(block.get("text"), str) else ""
        for block in content
        if isinstance(block, dict) and block.get("type") == "text"
    ]


def resume_line(resumed: bool, what: str) -> list[str]:
    """The summary's resume line, when the run continued an earlier session."""
    return [f"mode: resumed an existing {what}"] if resumed else []
