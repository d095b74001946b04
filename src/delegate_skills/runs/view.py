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

from ..reading import CONFIG_LIMIT, read_json_object
from ..runstore import liveness, lookup
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
        }


def _foreign_summary(out_dir: str) -> dict:
    return {
        "id": None, "outDir": out_dir, "implementer": None, "lane": None, "status": FOREIGN,
        "startedAt": None, "elapsedSeconds": None, "workdir": None, "exitCode": None,
        "landing": None, "repository": None, "changes": None,
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
    """Every run in the store, and every foreign run directory under `roots`, newest first.

    A record whose files cannot be made sense of is left out; `warn` (if
    given) is told which, in one line.
    """
    runs, seen = [], set()
    for record in all_records():
        try:
            run = Run.of(record)
            summary = run.summary()
        except (OSError, ValueError, TypeError, OverflowError) as problem:
            if warn is not None:
                warn(f"skipped run {record.id}: its record cannot be read ({problem})")
            continue
        seen.add(os.path.realpath(run.out_dir))
        runs.append(summary)
    for root in roots if roots is not None else default_roots():
        for path in _candidates(root):
            real = os.path.realpath(path)
            if real in seen or not lookup.is_run_dir(path):
                continue
            seen.add(real)
            runs.append(_foreign_summary(os.path.abspath(path)))
    runs.sort(key=lambda r: r["startedAt"] or "", reverse=True)
    return runs


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
    return Run.of(lookup.resolve(ref))  # raises, with the reason


def show(ref: str) -> Run:
    """A recorded run `ref` names: what every command that acts on a run starts from.

    Raises UserError for a foreign directory, or a ref that names no run.
    """
    return Run.of(lookup.resolve(ref))


def exit_code_of(run: Run) -> int:
    """What waiting on a finished run exits with: its exit code, or 1 when it was lost."""
    ended = liveness.ended(run.record) if run.record is not None else None
    code = (ended or {}).get("exitCode")
    if ended is None or not isinstance(code, int) or isinstance(code, bool) or not 0 <= code < 256:
        return 1
    return code
