"""`runs usage`: the tokens and cost of the runs on this machine, summed from the run store.

When a run ends its relay stores the usage the implementer reported (`tokenUsage`, in the
shape every relay writes into its result) in the run's private record. Only those records
are read here, in every state dir the store knows: a run directory's result.json is never
read, since the implementer can rewrite it.

A run that reported no usage (its CLI reports none, the run ended before it said, or it was
recorded before records held usage) counts in `runsWithoutUsage`, never as zero tokens.
Each count is the sum of the values the runs reported (null when none did); `costUsd` is the
sum of the costs reported, and `runsWithCost` says how many of the `runsWithUsage` runs
reported one. Runs still in flight are left out and counted in `runsInFlight`.
"""

from __future__ import annotations

import datetime
import math

from ..errors import UserError, did_you_mean
from ..relay.tokens import TOKEN_USAGE_FIELDS
from ..runstore import liveness, paths
from ..runstore.record import Record, all_records
from .view import Run, parse_iso

#: What `--by` groups runs by: the implementer, the fleet lane, the repository, the UTC day
#: the run started.
BY = ("implementer", "lane", "repo", "day")
DEFAULT_BY = "implementer"
#: The token counts of a tokenUsage (all its fields but costUsd).
COUNTS = tuple(field for field in TOKEN_USAGE_FIELDS if field != "costUsd")
#: Counts past this are not counts (the largest integer a JSON reader keeps exact).
_COUNT_LIMIT = 2**53
#: Costs are summed to this many decimal places (a billionth of a dollar).
_COST_PLACES = 9


def check_by(value: str) -> str:
    """`value` as a --by choice. Raises UserError."""
    if value in BY:
        return value
    raise UserError(f"--by {value}: group by one of {', '.join(BY)}{did_you_mean(value, BY)}")


def parse_since(text: str, now: datetime.datetime) -> datetime.datetime:
    """The moment --since names: a day (YYYY-MM-DD, from its start in UTC) or an age before
    `now` (7d, 12h, 90m, as `runs prune --older-than` reads them). Raises UserError."""
    from .prune import parse_age

    if len(text) == 10 and text[4] == "-" and text[7] == "-":
        try:
            day = datetime.date.fromisoformat(text)
        except ValueError:
            day = None
        if day is not None:
            return datetime.datetime(day.year, day.month, day.day, tzinfo=datetime.timezone.utc)
    else:
        seconds = parse_age(text)
        if seconds is not None and seconds > 0:
            return now - datetime.timedelta(seconds=seconds)
    raise UserError(
        f"--since {text}: use a day as YYYY-MM-DD (from its start, UTC) or an age such as "
        "7d, 12h or 90m"
    )


def _count(value) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int):
        return None
    return value if 0 <= value < _COUNT_LIMIT else None


def _cost(value) -> float | int | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return value if 0 <= value < math.inf else None


def recorded_usage(record: Record) -> dict | None:
    """The run's tokenUsage as its record holds it (values that are not counts or costs
    read as null); None when the record holds none, or nothing in it."""
    usage = record.get("tokenUsage")
    if not isinstance(usage, dict):
        return None
    found = {field: _count(usage.get(field)) for field in COUNTS}
    found["costUsd"] = _cost(usage.get("costUsd"))
    return found if any(value is not None for value in found.values()) else None


def _key(record: Record, by: str, started: datetime.datetime | None) -> str | None:
    if by == "day":
        if started is None:
            return None
        return started.astimezone(datetime.timezone.utc).date().isoformat()
    if by == "repo":
        return Run.of(record).repository
    return record.text(by)


def _empty() -> dict:
    counts = {"runs": 0, "runsWithUsage": 0, "runsWithoutUsage": 0, "runsWithCost": 0}
    return {**counts, **{field: None for field in TOKEN_USAGE_FIELDS}}


def _add(group: dict, usage: dict | None) -> None:
    group["runs"] += 1
    if usage is None:
        group["runsWithoutUsage"] += 1
        return
    group["runsWithUsage"] += 1
    for field in COUNTS:
        if usage[field] is not None:
            group[field] = (group[field] or 0) + usage[field]
    if usage["costUsd"] is not None:
        group["runsWithCost"] += 1
        group["costUsd"] = (group["costUsd"] or 0) + usage["costUsd"]


def _rounded(group: dict) -> dict:
    if group["costUsd"] is not None:
        group["costUsd"] = round(group["costUsd"], _COST_PLACES)
    return group


def _order(key: str | None) -> tuple[bool, str]:
    return key is None, key or ""


def usage(by: str = DEFAULT_BY, since: datetime.datetime | None = None, warn=None) -> dict:
    """The usage of every recorded run (started at or after `since`), grouped `by`.

    `warn` (if given) is told, in one line, of each record that cannot be read.
    """
    by = check_by(by)
    groups: dict[str | None, dict] = {}
    total, in_flight, seen = _empty(), 0, set()
    for state in paths.known_state_dirs():
        with paths.reading(state):
            for record in all_records():
                if record.id in seen:
                    continue
                seen.add(record.id)
                try:
                    started = parse_iso(record.text("startedAt"))
                    if since is not None and (started is None or started < since):
                        continue
                    if liveness.ended(record) is None and liveness.relay_alive(record):
                        in_flight += 1
                        continue
                    key = _key(record, by, started)
                    spent = recorded_usage(record)
                except (OSError, ValueError, TypeError, OverflowError) as problem:
                    if warn is not None:
                        warn(f"skipped run {record.id}: its record cannot be read ({problem})")
                    continue
                _add(groups.setdefault(key, _empty()), spent)
                _add(total, spent)
    return {
        "by": by,
        "since": _iso(since),
        "groups": [{by: key, **_rounded(groups[key])} for key in sorted(groups, key=_order)],
        "total": _rounded(total),
        "runsInFlight": in_flight,
    }


def _iso(moment: datetime.datetime | None) -> str | None:
    if moment is None:
        return None
    moment = moment.astimezone(datetime.timezone.utc)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"
