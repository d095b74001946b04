"""Runs you can list and wait on.

Every relay run directory holds `run.json` from the moment the run starts
(who is running it, for which implementer, lane and working directory) and
`result.json` once it is over. Both are for reading: the implementer can
write the run directory too. What decides whether the relay still lives,
and which processes are signalled, is the run's private record (record.py),
found through the id run.json names and trusted only when it names this very
directory; every pid in it is checked against its kernel start time.

A run without a result is `running` while its relay process lives; once
that process is gone it is `orphaned` while a process of the run still
runs, and `lost` when none does. `wait` ends an orphaned run's processes
before it reports `lost`, and returns a result only once its relay has
exited (an aborted run's first result is written before its processes are
gone).
"""

from __future__ import annotations

import itertools
import os
import signal
import time

from ..errors import UserError
from ..isolation import linux, procgroup
from ..reading import CONFIG_LIMIT, read_json_object
from ..runstore import record

RUN_FILE = "run.json"
RESULT_FILE = "result.json"
RUN_SCHEMA = "delegate-run.v1"
WAIT_POLL_S = 0.1
#: How long `wait` gives a run that has not started yet to appear, when no
#: live process names its directory (a relay starts one well within it).
APPEAR_S = 1.0

process_start = linux.process_start
state_dir = record.state_dir


def run_marker(
    implementer: str,
    lane: str | None,
    workdir: str,
    out_dir: str,
    started_at: str,
    group: int | None = None,
    run_id: str | None = None,
    argv: list[str] | None = None,
) -> bytes:
    """The bytes of run.json for the relay process calling this.

    `group` is the implementer's process group, once it is launched. run.json
    is for people and tools to read; what `runs` signals or removes comes from
    the run's private record (record.py), which `id` names.
    """
    pid = os.getpid()
    marker = {
        "schema": RUN_SCHEMA,
        "id": run_id,
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
    if argv is not None:
        marker["implementerArgv"] = argv
    from ..jsjson import document_bytes

    return document_bytes(marker)


#: A result holds at most a bounded final message and stderr tail.
RESULT_LIMIT = 16 * 1024 * 1024


def _int(value) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _text(value) -> str | None:
    return value if isinstance(value, str) else None


def pid_alive(pid: object, start: object) -> bool:
    """Whether `pid` is alive and (where the kernel tells) still the process started at `start`."""
    pid = _int(pid)
    if pid is None or pid <= 1:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    now = process_start(pid)
    if isinstance(start, str) and now is not None and now != start:
        return False
    return linux.is_zombie(pid) is not True


def _relay_of(run) -> tuple[object, object]:
    """(pid, start time) of the run's relay: from the private record where there is one."""
    if run.private is not None:
        relay = run.private.get("relay")
        relay = relay if isinstance(relay, dict) else {}
        return relay.get("pid"), relay.get("start")
    return run.marker.get("pid"), run.marker.get("pidStart")


def run_processes(private: record.Record) -> procgroup.RunProcesses | None:
    """What may be left of a run whose relay is gone, from its private record only.

    The process group counts only while its leader's start time matches; the
    cgroup only when it is one of ours; every process started with the run's
    token in its environment counts too.
    """
    group = private.get("group")
    group = group if isinstance(group, dict) else {}
    pgid = _int(group.get("pgid"))
    if pgid is not None and not _group_is_the_runs(pgid, group.get("start")):
        pgid = None
    cgroup = private.get("cgroup")
    cgroup = cgroup if linux.is_run_cgroup(cgroup) else None
    token = private.get("token")
    return procgroup.RunProcesses(
        pgid=pgid,
        cgroup=cgroup,
        token=f"{record.TOKEN_ENV}={token}" if isinstance(token, str) and token else None,
    )


def _group_is_the_runs(pgid: int, start: object) -> bool:
    """A process group is the run's while its leader is the process recorded, or gone.

    A group outlives its leader; once the leader's pid is someone else's, the
    group (same number) is theirs.
    """
    now = process_start(pgid)
    if now is None:
        return True  # the leader is gone (or the kernel does not say): members keep the group
    return isinstance(start, str) and now == start


#: How long `wait` gives an orphaned run between SIGTERM and SIGKILL.
ORPHAN_GRACE_S = 2.0


def _parse_iso(text):
    """An aware datetime for an ISO time stamp (UTC when it names no zone), or None."""
    import datetime

    if not isinstance(text, str) or len(text) > 64:
        return None
    try:
        stamp = datetime.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    if stamp.tzinfo is None:
        stamp = stamp.replace(tzinfo=datetime.timezone.utc)
    return stamp


def _utc_now():
    import datetime

    return datetime.datetime.now(datetime.timezone.utc)


class Run:
    """One run directory, read as it is now."""

    def __init__(self, out_dir: str) -> None:
        self.out_dir = os.path.abspath(out_dir)
        self.marker = read_json_object(os.path.join(self.out_dir, RUN_FILE), CONFIG_LIMIT) or {}
        self.result = self._read_result()
        #: The private record (None for a run before records, or one never recorded).
        self.private = (
            record.for_out_dir(self.out_dir, self.marker.get("id"))
            if self.marker or self.result is not None
            else None
        )

    def _read_result(self) -> dict | None:
        return read_json_object(os.path.join(self.out_dir, RESULT_FILE), RESULT_LIMIT)

    @property
    def exists(self) -> bool:
        return bool(self.marker) or self.result is not None

    @property
    def id(self) -> str | None:
        return self.private.id if self.private is not None else None

    def relay_alive(self) -> bool:
        return pid_alive(*_relay_of(self))

    @property
    def worktree(self) -> dict | None:
        """The run's worktree (private record, else result.json); None for an in-place run."""
        if self.private is not None:
            found = self.private.get("worktree")
        else:  # a run from before private records
            found = (self.result or {}).get("worktree")
        return found if isinstance(found, dict) else None

    @property
    def landing(self) -> str | None:
        """applied | discarded | undone as `runs` last recorded it; "pending" for a
        --worktree run nothing has landed or dropped yet; None for an in-place run."""
        landed = self.private.get("landing") if self.private is not None else None
        if isinstance(landed, dict) and landed.get("state") in ("applied", "discarded", "undone"):
            return landed["state"]
        return "pending" if self.worktree is not None else None

    @property
    def status(self) -> str:
        if self.result is not None:
            return str(self.result.get("status"))
        if self.exists and self.relay_alive():
            # The result may have landed between the two reads.
            self.result = self._read_result()
            return str(self.result.get("status")) if self.result else "running"
        self.result = self._read_result()
        if self.result:
            return str(self.result.get("status"))
        return "orphaned" if self._leftovers() else "lost"

    def _leftovers(self) -> list[int]:
        if self.private is None:
            return []
        processes = run_processes(self.private)
        return processes.alive() if processes is not None else []

    def end_orphans(self) -> None:
        """End what is left of the run once its relay is gone (never while it lives)."""
        if self.private is None or self.relay_alive():
            return
        processes = run_processes(self.private)
        if processes is not None:
            processes.end(ORPHAN_GRACE_S)
        cgroup = self.private.get("cgroup")
        if linux.is_run_cgroup(cgroup) and not linux.cgroup_members(cgroup):
            linux.cgroup_remove(cgroup)

    def summary(self) -> dict:
        result = self.result or {}
        status = self.status
        result = self.result or result
        marker = self.marker
        started = _text(marker.get("startedAt")) or _text(result.get("startedAt"))
        finished = _text(result.get("finishedAt"))
        begin = _parse_iso(started)
        end = _parse_iso(finished) or (_utc_now() if status == "running" else None)
        elapsed = round((end - begin).total_seconds(), 3) if begin and end else None
        code = _int(result.get("exitCode"))
        return {
            "id": self.id,
            "outDir": self.out_dir,
            "implementer": _text(marker.get("implementer")) or _text(result.get("tool")),
            "lane": _text(marker.get("lane", result.get("lane"))),
            "status": status,
            "startedAt": started,
            "elapsedSeconds": elapsed,
            "workdir": _text(marker.get("workdir")) or _text(result.get("workdir")),
            "exitCode": code,
            "landing": self.landing,
            "repository": self.repository,
            "changes": _totals(result.get("changes")),
        }

    @property
    def repository(self) -> str | None:
        """The repository the run's change belongs to: a worktree run's source, else its workdir."""
        tree = self.worktree or {}
        return (
            _text(tree.get("source"))
            or _text(self.marker.get("workdir"))
            or _text((self.result or {}).get("workdir"))
        )


def _totals(changes) -> dict | None:
    """filesChanged, linesAdded and linesRemoved of a result's change record, or None."""
    if not isinstance(changes, dict):
        return None
    totals = {key: _int(changes.get(key)) for key in ("filesChanged", "linesAdded", "linesRemoved")}
    return totals if None not in totals.values() else None


def default_roots() -> list[str]:
    """The shared run root, and every run directory the index remembers."""
    from ..relay.rundir import default_root

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


def list_runs(roots: list[str], warn=None) -> list[dict]:
    """Every run under `roots` (a root may itself be a run directory), newest first.

    A run whose files cannot be made sense of is left out; `warn` (if given)
    is told which, in one line.
    """
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
            try:
                run = Run(path)
                if not run.exists:
                    continue
                summary = run.summary()
            except (OSError, ValueError, TypeError, OverflowError) as problem:
                if warn is not None:
                    warn(f"skipped {path}: its run.json or result.json cannot be read ({problem})")
                continue
            seen.add(real)
            runs.append(summary)
    runs.sort(key=lambda r: r["startedAt"] or "", reverse=True)
    return runs


#: Names the run started last on this machine wherever a run is asked for.
LAST = "--last"


def last_run() -> str:
    """The run directory of the run started last on this machine. Raises UserError."""
    dated = [
        (started, r.get("outDir"))
        for r in record.all_records()
        if isinstance(started := r.get("startedAt"), str) and isinstance(r.get("outDir"), str)
    ]
    if not dated:
        raise UserError("--last: no relay run has been recorded on this machine yet")
    return max(dated)[1]


def resolve(ref: str) -> str:
    """The run directory `ref` names: a run directory, a run id (or a unique prefix of
    one), or LAST.

    Raises UserError for an id that matches no run, or more than one.
    """
    if ref == LAST:
        return last_run()
    if os.path.isdir(ref) or os.sep in ref or ref.startswith("."):
        return ref
    matches = record.by_prefix(ref) if ref and ref.isalnum() and ref.islower() else []
    if len(matches) == 1:
        out = matches[0].get("outDir")
        if isinstance(out, str):
            return out
    if len(matches) > 1:
        shown = ", ".join(m.id for m in matches[:5])
        raise UserError(f"run id {ref} is ambiguous ({shown}…); give more of it")
    return ref


def show(out_dir: str) -> Run:
    out_dir = resolve(out_dir)
    run = Run(out_dir)
    if not run.exists:
        hint = ""
        if out_dir.isalnum() and not os.path.exists(out_dir):
            from ..errors import did_you_mean

            ids = [r.id for r in record.all_records()]
            hint = did_you_mean(out_dir, ids) or " (nor a run id)"
        raise UserError(f"{out_dir}: no relay run here (neither run.json nor result.json){hint}")
    return run


def wait(out_dir: str, timeout_s: float | None) -> tuple[Run, bool]:
    """Block until the run has a result or is lost; (run, timed_out).

    `out_dir` may be a run id. A run whose relay died while its implementer's
    processes live on is ended here, so `lost` means that nothing of the run
    is still running.
    """
    out_dir = resolve(out_dir)
    started = time.monotonic()
    deadline = None if timeout_s is None else started + timeout_s
    while True:
        run = Run(out_dir)
        if run.exists and run.status == "orphaned":
            run.end_orphans()
            run = Run(out_dir)  # `orphaned` still, if its processes could not be ended
        if run.exists and run.status != "running" and not run.relay_alive():
            if run.result is None and run.private is not None and run.private.get("remote"):
                from ..remote.dispatch import reattach

                reattach(run)  # a --host run goes on over there: follow it to its end
                continue
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


#: How long `cancel` waits for the relay to write its `aborted` result.
CANCEL_WAIT_S = 60.0


def cancel(out_dir: str, timeout_s: float = CANCEL_WAIT_S) -> dict:
    """End a run as Ctrl-C would. Raises UserError.

    The relay gets SIGINT: it stops the implementer and everything it
    started, then writes its `aborted` result. A run whose relay is gone has
    its processes ended here. A finished run is left as it is.
    """
    out_dir = resolve(out_dir)
    run = show(out_dir)
    status = run.status
    remote = run.private.get("remote") if run.private is not None else None
    going_there = bool(remote) and run.result is None  # a --host run whose relay here is gone
    if status not in ("running", "orphaned") and not going_there:
        return {"id": run.id, "outDir": out_dir, "cancelled": False, "status": status}
    pid, start = _relay_of(run)
    if going_there and not pid_alive(pid, start):
        from ..remote.dispatch import signal_there

        signal_there(run, "SIGINT")  # the run goes on there; runs wait below follows it
    if status == "running" and pid_alive(pid, start):
        try:
            os.kill(pid, signal.SIGINT)
        except ProcessLookupError:
            pass  # it ended on its own meanwhile
        except PermissionError:
            raise UserError(f"{out_dir}: its relay (pid {pid}) is not yours to stop") from None
    run, timed_out = wait(out_dir, timeout_s)
    if timed_out:
        raise UserError(
            f"{out_dir}: its relay (pid {pid}) did not stop within {timeout_s:.0f} s of SIGINT"
        )
    return {
        "id": run.id,
        "outDir": out_dir,
        "cancelled": True,
        "status": run.status,
        "leftRunning": run._leftovers(),
    }


def _named_by_a_process(out_dir: str) -> bool:
    """Whether a live process was given `--out-dir out_dir` (a relay still starting up)."""
    paths = {os.fsencode(out_dir), os.fsencode(os.path.abspath(out_dir))}
    for proc in linux.processes():
        args = linux.cmdline(proc.pid)
        if args is None:
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
