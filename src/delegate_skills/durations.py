"""h/m/s durations ("30m", "1h30m", "90s"): read by hand, checked, and written back.

A lane's `timeout`, the relay's watchdog and the run commands' waits all use
this grammar; reading it never imports `re` (TIMEOUT is its schema form).
"""

from __future__ import annotations

from .rules import Pattern

#: h/m/s durations: "30m", "1h30m", "90s". At least one part must be present.
#: `duration_parts` reads this grammar by hand; the pattern is its schema form.
TIMEOUT = Pattern(r"(?:([0-9]+)h)?(?:([0-9]+)m)?(?:([0-9]+)s)?")
_DIGITS = frozenset("0123456789")
_UNITS = "hms"
#: The longest timer Node can arm (2^31 - 1 ms, about 24.8 days).
MAX_TIMER_MS = 2_147_483_647


def duration_parts(value: str) -> tuple[str | None, str | None, str | None] | None:
    """The hours, minutes and seconds digits of `value`, as TIMEOUT's groups; None if no match."""
    parts: list[str | None] = [None, None, None]
    next_unit = 0
    i = 0
    while i < len(value):
        end = i
        while end < len(value) and value[end] in _DIGITS:
            end += 1
        unit = _UNITS.find(value[end]) if i < end < len(value) else -1
        if unit < next_unit:
            return None
        parts[unit] = value[i:end]
        next_unit = unit + 1
        i = end + 1
    return parts[0], parts[1], parts[2]


def parse_timeout_ms(value: str) -> int | None:
    """Milliseconds for an h/m/s duration, or None when it is malformed or out of range."""
    groups = duration_parts(value)
    if groups is None or not any(groups):
        return None
    # Past 15 significant digits any group is out of range; int() of thousands
    # of digits would also refuse to convert them at all.
    if any(len((g or "").lstrip("0")) > 15 for g in groups):
        return None
    hours, minutes, seconds = (int((g or "").lstrip("0") or "0") for g in groups)
    ms = (hours * 3600 + minutes * 60 + seconds) * 1000
    if ms <= 0 or ms > MAX_TIMER_MS:
        return None
    return ms


def format_duration(ms: int) -> str:
    """Whole seconds of `ms` as an h/m/s duration, the form parse_timeout_ms reads: "31m"."""
    seconds = ms // 1000
    parts = ((seconds // 3600, "h"), (seconds // 60 % 60, "m"), (seconds % 60, "s"))
    return "".join(f"{n}{unit}" for n, unit in parts if n) or "0s"
