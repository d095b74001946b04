"""Runs you can list and wait on.

Every relay run directory holds `run.json` from the moment the run starts
(who is running it, for which implementer, lane and working directory) and
`result.json` once it is over. A run without a result is `running` while its
relay process lives; once that process is gone it is `orphaned` while a
process of the implementer's group still runs, and `lost` when none does.
`wait` ends an orphaned group before it reports `lost`.
"""

from __future__ import annotations

import itertools
import os
import time

from ..errors import UserError
from ..reading import CONFIG_LIMIT, read_json_object
from . import procgroup

RUN_FILE = "run.json"
RESULT_FILE = "result.json"
RUN_SCHEMA = "delegate-run.v1"
WAIT_POLL_S = 0.1
#: How long `wait` gives a run that has not started yet to appear, when no
#: live process names its directory (a relay starts one well within it).
APPEAR_S = 1.0


def process_start(pid: int) -> str | None:
    """The kernel's start time of `pid` (Linux), to tell a live relay from a reused pid."""
    fields = procgroup.stat_fields(pid)
    return fields[19].decode() if fields and len(fields) > 19 else None


def run_marker(
    implementer: str,
    lane: str | None,
    workdir: str,
    out_dir: str,
    started_at: str,
    group: int | None = None,
) -> bytes:
    """The bytes of run.json for the relay process calling this.

    `group` is the implementer's process group, once it is launched.
    """
    pid = os.getpid()
    marker = {
        "schema": RUN_SCHEMA,
        "implementer": implementer,
        "lane": lane,
        "workdir": workdir,
        "outDir": out_dir,
        "pid": pid,
        "pidStart": process_start(pid),
        "startedAt": started_at,
    }
    if group is not None:
        marker["group"] = group
        marker["groupStart"] = process_start(group)
    from ..jsjson import document_bytes

    return document_bytes(marker)


#: A result holds at most a bounded final message and stderr tail.
RESULT_LIMIT = 16 * 1024 * 1024


def _alive(marker: dict) -> bool:
    pid = marker.get("pid")
    if not isinstance(pid, int) or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    recorded, now = marker.get("pidStart"), process_start(pid)
    if recorded and now and recorded != now:
        return False
    fields = procgroup.stat_fields(pid)
    return fields[0] != b"Z" if fields else True


def _group(marker: dict) -> int | None:
    """The implementer's process group when a process of it still runs, else None."""
    group = marker.get("group")
    if not isinstance(group, int) or isinstance(group, bool) or group <= 1:
        return None
    recorded, now = marker.get("groupStart"), process_start(group)
    if recorded and now and recorded != now:
        return None  # that pid now belongs to another process: not this run's group
    return group if procgroup.members(group) else None


#: How long `wait` gives an orphaned group between SIGTERM and SIGKILL.
ORPHAN_GRACE_S = 2.0


def _parse_iso(text):
    """A datetime for an ISO time stamp, or None."""
    import datetime

    if not isinstance(text, str):
        return None
    try:
        return datetime.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None


def _utc_now():
    import datetime

    return datetime.datetime.now(datetime.timezone.utc)


class Run:
    """One run directory, read as it is now."""

    def __init__(self, out_dir: str) -> None:
        self.out_dir = os.path.abspath(out_dir)
        self.marker = read_json_object(os.path.join(self.out_dir, RUN_FILE), CONFIG_LIMIT) or {}
        self.result = self._read_result()

    def _read_result(self) -> dict | None:
        return read_json_object(os.path.join(self.out_dir, RESULT_FILE), RESULT_LIMIT)

    @property
    def exists(self) -> bool:
        return bool(self.marker) or self.result is not None

    @property
    def status(self) -> str:
        if self.result is not None:
            return str(self.result.get("status"))
        if self.marker and _alive(self.marker):
            # The result may have landed between the two reads.
            self.result = self._read_result()
            return str(self.result.get("status")) if self.result else "running"
        self.result = self._read_result()
        if self.result:
            return str(self.result.get("status"))
        return "orphaned" if self.marker and _group(self.marker) else "lost"

    def end_orphans(self) -> None:
        """End what is left of the implementer's group once its relay is gone."""
        group = _group(self.marker) if self.marker and not _alive(self.marker) else None
        if group is not None:
            procgroup.sweep(group, ORPHAN_GRACE_S)

    def summary(self) -> dict:
        result = self.result or {}
        status = self.status
        result = self.result or result
        started = self.marker.get("startedAt") or result.get("startedAt")
        finished = result.get("finishedAt")
        begin = _parse_iso(started)
        end = _parse_iso(finished) or (_utc_now() if status == "running" else None)
        elapsed = round((end - begin).total_seconds(), 3) if begin and end else None
        return {
            "outDir": self.out_dir,
            "implementer": self.marker.get("implementer") or result.get("tool"),
            "lane": self.marker.get("lane", result.get("lane")),
            "status": status,
            "startedAt": started,
            "elapsedSeconds": elapsed,
            "workdir": self.marker.get("workdir") or result.get("workdir"),
            "exitCode": result.get("exitCode"),
        }


def default_roots() -> list[str]:
    """The shared run root, and every run directory the index remembers."""
    from .rundir import default_root

    return [default_root(), *indexed_runs()]


# ---------------------------------------------------------------- the index
#
# Runs with an --out-dir of their own can be anywhere; the relay notes each in
# a small index under the XDG state dir (`runs-index.json`, through the write
# queue), and `runs list` finds them there. Entries whose directory is gone
# are dropped whenever the index is written.

INDEX_FILE = "runs-index.json"
INDEX_VERSION = 1
#: The most runs the index remembers (the newest).
INDEX_LIMIT = 1000


def state_dir() -> str:
    """`$XDG_STATE_HOME/delegate-skills` (else ~/.local/state/delegate-skills): the run
    index and the worktrees of --worktree runs live here."""
    base = os.environ.get("XDG_STATE_HOME")
    if not base or not os.path.isabs(base):
        base = os.path.join(os.path.expanduser("~"), ".local", "state")
    return os.path.join(base, "delegate-skills")


def index_path() -> str:
    """`<state dir>/runs-index.json`."""
    return os.path.join(state_dir(), INDEX_FILE)


def _read_index(path: str) -> list[str]:
    document = read_json_object(path, CONFIG_LIMIT) or {}
    entries = document.get("runs")
    return [e for e in entries if isinstance(e, str)] if isinstance(entries, list) else []


def indexed_runs() -> list[str]:
    """Run directories the index names that still exist."""
    return [path for path in _read_index(index_path()) if os.path.isdir(path)]


def remember(out_dir: str) -> None:
    """Add a run directory to the index, dropping entries whose directory is gone.

    Never fails the run: an index that cannot be written is left as it is.
    """
    from .. import store
    from ..jsjson import document_bytes

    path = index_path()
    out_dir = os.path.abspath(out_dir)
    try:
        with store.queue((path,), store.lock_path_for(path), by_hand=True):
            kept = [p for p in _read_index(path) if p != out_dir and os.path.isdir(p)]
            kept = [*kept, out_dir][-INDEX_LIMIT:]
            document = {"version": INDEX_VERSION, "runs": kept}
            store.atomic_write(path, document_bytes(document), durable=False)
    except (UserError, OSError):
        pass


def list_runs(roots: list[str]) -> list[dict]:
    """Every run under `roots` (a root may itself be a run directory), newest first."""
    seen, runs = set(), []
    for root in roots:
        candidates = [root]
        try:
            with os.scandir(root) as entries:
                candidates += [entry.path for entry in entries if entry.is_dir()]
        except OSError:
            pass
        for path in candidates:
            real = os.path.realpath(path)
            if real in seen:
                continue
            run = Run(path)
            if run.exists:
                seen.add(real)
                runs.append(run.summary())
    runs.sort(key=lambda r: r["startedAt"] or "", reverse=True)
    return runs


def show(out_dir: str) -> Run:
    run = Run(out_dir)
    if not run.exists:
        raise UserError(f"{out_dir}: no relay run here (neither run.json nor result.json)")
    return run


def wait(out_dir: str, timeout_s: float | None) -> tuple[Run, bool]:
    """Block until the run has a result or is lost; (run, timed_out).

    A run whose relay died while its implementer's processes live on is
    ended here, so `lost` means that nothing of the run is still running.
    """
    started = time.monotonic()
    deadline = None if timeout_s is None else started + timeout_s
    while True:
        run = Run(out_dir)
        if run.exists and run.status == "orphaned":
            run.end_orphans()
            run = Run(out_dir)  # `orphaned` still, if its processes could not be ended
        if run.exists and run.status != "running":
            return run, False
        now = time.monotonic()
        if deadline is not None and now >= deadline:
            return run, True
        if not run.exists and now - started > APPEAR_S and not _named_by_a_process(out_dir):
            raise UserError(
                f"{out_dir}: no relay run there, and no running relay names it "
                "(a relay that stopped on a usage error printed why)"
            )
        time.sleep(WAIT_POLL_S)


def _named_by_a_process(out_dir: str) -> bool:
    """Whether a live process was given `--out-dir out_dir` (a relay still starting up)."""
    paths = {os.fsencode(out_dir), os.fsencode(os.path.abspath(out_dir))}
    try:
        names = os.listdir("/proc")
    except OSError:
        return False
    for name in names:
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/cmdline", "rb") as handle:
                args = handle.read().split(b"\0")
        except OSError:
            continue
        for flag, value in itertools.pairwise(args):
            if flag == b"--out-dir" and value in paths:
                return True
        if any(arg.startswith(b"--out-dir=") and arg[10:] in paths for arg in args):
            return True
    return False


def exit_code_of(run: Run) -> int:
    """What waiting on a finished run exits with: its exit code, or 1 when it was lost."""
    code = (run.result or {}).get("exitCode")
    if run.result is None or not isinstance(code, int) or not 0 <= code < 256:
        return 1
    return code
