"""Runs as `runs list` and `runs show` present them: the store's record, and the run
directory's files for reading.

What a run is (its implementer, lane, where it ran, how it ended, what it
changed, what became of it) comes from its record in the store. The run
directory's result.json is shown as it is, for reading; nothing here decides
anything from it. A run directory no record names is `foreign`.
"""

from __future__ import annotations

import datetime
import os

from ..errors import UserError
from ..reading import CONFIG_LIMIT, read_json_object
from ..runstore import liveness, lookup, paths
from ..runstore.lookup import LAST, RESULT_FILE, RUN_FILE
from ..runstore.record import Record, all_records

#: A result holds at most a bounded final message and stderr tail.
RESULT_LIMIT = 16 * 1024 * 1024
FOREIGN = "foreign"

__all__ = ["FOREIGN", "LAST", "RESULT_FILE", "RESULT_LIMIT", "RUN_FILE", "Run"]


def _int(value) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _text(value) -> str | None:
    return value if isinstance(value, str) else None


def parse_iso(text) -> datetime.datetime | None:
    """An aware datetime for an ISO time stamp (UTC when it names no zone), or None."""
    if not isinstance(text, str) or len(text) > 64:
        return None
    try:
        stamp = datetime.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    if stamp.tzinfo is None:
        stamp = stamp.replace(tzinfo=datetime.timezone.utc)
    return stamp


def utc_now() -> datetime.datetime:
    return datetime.datetime.now(datetime.timezone.utc)


class Run:
    """One run: its record (None for a foreign directory) and its directory."""

    def __init__(self, record: Record | None, out_dir: str | None = None) -> None:
        self.record = record
        self.out_dir = os.path.abspath(out_dir or record.text("outDir") or "")
        self._result: dict | None = None
        self._result_read = False

    @classmethod
    def of(cls, record: Record) -> Run:
        return cls(record, record.text("outDir"))

    @property
    def id(self) -> str | None:
        return self.record.id if self.record is not None else None

    @property
    def result(self) -> dict | None:
        """result.json as it is in the run directory (for reading only)."""
        if not self._result_read:
            self._result = read_json_object(os.path.join(self.out_dir, RESULT_FILE), RESULT_LIMIT)
            self._result_read = True
        return self._result

    @property
    def marker(self) -> dict:
        """run.json as it is in the run directory (for reading only)."""
        return read_json_object(os.path.join(self.out_dir, RUN_FILE), CONFIG_LIMIT) or {}

    def refresh(self) -> Run:
        return Run(self.record.reloaded() if self.record is not None else None, self.out_dir)

    @property
    def status(self) -> str:
        return FOREIGN if self.record is None else liveness.status(self.record)

    def relay_alive(self) -> bool:
        return self.record is not None and liveness.relay_alive(self.record)

    @property
    def worktree(self) -> dict | None:
        return lookup.worktree(self.record) if self.record is not None else None

    @property
    def landing(self) -> str | None:
        return lookup.landing(self.record) if self.record is not None else None

    @property
    def repository(self) -> str | None:
        if self.record is None:
            return None
        tree = self.worktree or {}
        return (
            _text(tree.get("source"))
            or self.record.text("repository")
            or (self.record.text("workdir"))
        )

    def summary(self) -> dict:
        record = self.record
        if record is None:
            return _foreign_summary(self.out_dir)
        status = self.status
        ended = liveness.ended(record) or {}
        started = record.text("startedAt")
        begin = parse_iso(started)
        end = parse_iso(ended.get("finishedAt")) or (utc_now() if status == "running" else None)
        elapsed = round((end - begin).total_seconds(), 3) if begin and end else None
        return {
            "id": record.id,
            "outDir": self.out_dir,
            "implementer": record.text("implementer"),
            "lane": record.text("lane"),
            "status": status,
            "startedAt": started,
            "elapsedSeconds": elapsed,
            "workdir": record.text("workdir"),
            "exitCode": _int(ended.get("exitCode")),
            "landing": self.landing,
            "repository": self.repository,
            "changes": _totals(record.section("changes")),
            "overlap": _paths(record.get("overlap")),
            "tokens": self.tokens() if ended else None,
        }

    def tokens(self) -> int | None:
        """The run's total tokens as its implementer reported them: from its record (the
        relay stores `tokenUsage` there, null for none), else, for a run recorded before
        records held it, from its result.json (for reading), when that result is this run's."""
        if self.record is not None and "tokenUsage" in self.record.data:
            usage = self.record.get("tokenUsage")
            return _int(usage.get("totalTokens")) if isinstance(usage, dict) else None
        result = self.result
        if result is None or self.record is None or result.get("relayRunId") != self.record.id:
            return None
        return tokens_of(result)


def tokens_of(result: dict) -> int | None:
    """Total tokens of a result: its tokenUsage's, else read from the CLI's own `usage`
    (results written before tokenUsage); None where the implementer reported none."""
    summary = result.get("tokenUsage")
    if isinstance(summary, dict):
        return _int(summary.get("totalTokens"))
    usage = result.get("usage")
    if not isinstance(usage, dict):
        return None

    def first(*names: str) -> int | None:
        for name in names:
            value = _int(usage.get(name))
            if value is not None:
                return value
        return None

    total = first("total_tokens", "totalTokens", "total")
    if total is not None:
        return total
    parts = [
        first("input_tokens", "inputTokens", "input", "prompt_tokens"),
        first("output_tokens", "outputTokens", "output", "completion_tokens"),
    ]
    return None if all(p is None for p in parts) else sum(p or 0 for p in parts)


def _paths(value) -> list[str] | None:
    """A recorded path list (`overlap`), or None where the record has none."""
    if isinstance(value, list) and all(isinstance(item, str) for item in value):
        return value
    return None


def _foreign_summary(out_dir: str) -> dict:
    return {
        "id": None, "outDir": out_dir, "implementer": None, "lane": None, "status": FOREIGN,
        "startedAt": None, "elapsedSeconds": None, "workdir": None, "exitCode": None,
        "landing": None, "repository": None, "changes": None, "overlap": None,
        "tokens": None,
    }  # fmt: skip


def _totals(changes) -> dict | None:
    """filesChanged, linesAdded and linesRemoved of a change record, or None."""
    if not isinstance(changes, dict):
        return None
    totals = {key: _int(changes.get(key)) for key in ("filesChanged", "linesAdded", "linesRemoved")}
    return totals if None not in totals.values() else None


def default_roots() -> list[str]:
    """Where run directories no record names are looked for: the shared run root."""
    from ..relay.rundir import default_root

    return [default_root()]


def list_runs(roots: list[str] | None = None, warn=None) -> list[dict]:
    """Every run in the store (in every state dir this user's runs were recorded in), and
    every foreign run directory under `roots`, newest first.

    A record whose files cannot be made sense of is left out; `warn` (if
    given) is told which, in one line.
    """
    runs, seen = [], set()
    for state in paths.known_state_dirs():
        with paths.reading(state):
            runs += _recorded(seen, warn)
    for root in roots if roots is not None else default_roots():
        for path in _candidates(root):
            real = os.path.realpath(path)
            if real in seen or not lookup.is_run_dir(path):
                continue
            seen.add(real)
            runs.append(_foreign_summary(os.path.abspath(path)))
    runs.sort(key=lambda r: r["startedAt"] or "", reverse=True)
    return runs


def _recorded(seen: set, warn) -> list[dict]:
    """The summaries of the runs in the store being read; their directories join `seen`."""
    found = []
    for record in all_records():
        try:
            run = Run.of(record)
            summary = run.summary()
        except (OSError, ValueError, TypeError, OverflowError) as problem:
            if warn is not None:
                warn(f"skipped run {record.id}: its record cannot be read ({problem})")
            continue
        real = os.path.realpath(run.out_dir)
        if real in seen:
            continue
        seen.add(real)
        found.append(summary)
    return found


def _candidates(root: str) -> list[str]:
    found = [root]
    try:
        with os.scandir(root) as entries:
            found += [entry.path for entry in entries if entry.is_dir(follow_symlinks=False)]
    except OSError:
        pass
    return found


def find(ref: str) -> Run:
    """The run `ref` names (a foreign run directory too, for reading). Raises UserError."""
    record = lookup.find(ref)
    if record is not None:
        return Run.of(record)
    if os.path.isdir(ref) and lookup.is_run_dir(ref):
        return Run(None, ref)
    if not os.path.isdir(ref):
        raise no_such_run(ref)
    return Run.of(lookup.resolve(ref))  # raises, with the reason


def show(ref: str) -> Run:
    """A recorded run `ref` names: what every command that acts on a run starts from.

    Raises UserError for a foreign directory, or a ref that names no run.
    """
    record = lookup.find(ref)
    if record is not None:
        return Run.of(record)
    if not os.path.isdir(ref):
        raise no_such_run(ref)
    return Run.of(lookup.resolve(ref))  # raises, with the reason


def no_such_run(ref: str) -> UserError:
    """A ref that is neither a run id the store has nor a directory, and the command that
    lists the runs there are."""
    from ..errors import did_you_mean
    from ..invocation import runs_command

    listing = f"`{runs_command()} list` lists the runs there are"
    if lookup.looks_like_id(ref):
        hint = did_you_mean(ref, [found.id for found in all_records()])
        return UserError(f"{ref}: no run with this id on this machine; {listing}{hint}")
    return UserError(
        f"{ref}: no such run (no directory there, and no run with this id on this machine); "
        f"{listing}"
    )


def exit_code_of(run: Run) -> int:
    """What waiting on a finished run exits with: its exit code, or 1 when it was lost."""
    ended = liveness.ended(run.record) if run.record is not None else None
    code = (ended or {}).get("exitCode")
    if ended is None or not isinstance(code, int) or isinstance(code, bool) or not 0 <= code < 256:
        return 1
    return code
