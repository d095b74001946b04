"""Attempts side by side: one brief on several implementers, each run in its own worktree.

What `delegate fanout` and `delegate batch` run, and a skill folder's `runs.py
fanout`. Every run is a relay process of its own (`relay KEY --worktree`), at
most `jobs` at a time; each writes its result.json as any relay run does, and
the report is read from those. An interrupt (Ctrl-C, SIGTERM) is passed to
every relay, which ends its run `aborted` with its result written; runs still
waiting for a slot are not started. Nothing here commits or applies: the
orchestrator compares the runs, then lands one with `runs apply`.

`relay_for(key)` is the command line that runs implementer `key`'s relay: the
installed package's by default, the implementer's own skill folder from a
skill folder.
"""

from __future__ import annotations

import datetime
import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from .. import registry
from ..errors import UserError, did_you_mean
from ..reading import read_limited
from ..relay.rundir import default_root, ensure_private_root

#: The most runs one fanout starts (lanes and implementers × hosts × attempts).
MAX_RUNS = 256

#: The relay's stderr, kept in each run directory.
RELAY_LOG = "relay-stderr.txt"
_LOG_TAIL = 64 * 1024


class Target:
    """One run: an implementer, through a lane or directly; in a batch, its own brief and flags."""

    __slots__ = ("args", "brief", "host", "implementer", "lane", "task")

    def __init__(
        self,
        implementer: str,
        lane: str | None,
        brief: str | None = None,
        args: list[str] | None = None,
        task: str | None = None,
        host: str | None = None,
    ) -> None:
        self.implementer = implementer
        #: The machine it runs on (--host), None for this one.
        self.host = host
        self.lane = lane
        self.brief = brief
        self.args = args or []
        self.task = task

    @property
    def label(self) -> str:
        name = f"{self.lane} ({self.implementer})" if self.lane else self.implementer
        return f"{name} on {self.host}" if self.host else name


def _has_adapter(key: str) -> bool:
    from ..relay.main import load_adapter

    return load_adapter(key) is not None


def plan(
    cd: str,
    lanes: list[str],
    implementers: list[str],
    has_relay: Callable[[str], bool] = _has_adapter,
) -> list[Target]:
    """The runs to start, in the order given. Raises UserError for an unknown lane or key.

    A lane is looked up in the source's effective fleet for its implementer;
    the relay resolves it again in its worktree, where trust is decided.
    `has_relay(key)` says whether an implementer the registry knows has a
    relay here (a skill folder checks for its folder apart, to say where).
    """
    from ..fleet import Effective

    targets: list[Target] = []
    known = Effective(cd).lanes() if lanes else {}
    for name in lanes:
        entry = known.get(name)
        if entry is None:
            raise UserError(
                f"--lane {name}: fleet lane not found{did_you_mean(name, known)} "
                "(see `delegate lane list`)"
            )
        targets.append(Target(entry["implementer"], name))
    for key in implementers:
        if registry.get(key) is None or not has_relay(key):
            raise UserError(
                f"--implementer {key}: unknown implementer{did_you_mean(key, registry.KEYS)} "
                f"(one of: {', '.join(registry.KEYS)})"
            )
        targets.append(Target(key, None))
    if not targets:
        raise UserError("give at least one --lane or --implementer")
    return targets


def expand(planned: list[Target], hosts: list[str], attempts: int, args: list[str]) -> list[Target]:
    """Every run of a fanout: each planned target on each host (or here), `attempts` times,
    with relay flags `args`; numbered tasks (#1, #2, ...) when attempts repeat."""
    return [
        Target(t.implementer, t.lane, args=list(args), host=host,
               task=f"#{n + 1}" if attempts > 1 else None)
        for t in planned
        for host in hosts or (None,)
        for n in range(attempts)
    ]  # fmt: skip


def too_many(kinds: int, machines: int, attempts: int) -> str | None:
    """Why a fanout of that size is refused, or None."""
    kinds, machines = max(1, kinds), max(1, machines)
    runs = kinds * machines * attempts
    if runs <= MAX_RUNS:
        return None
    return (
        f"{kinds} lane(s) or implementer(s) × {machines} host(s) × {attempts} attempt(s) "
        f"is {runs} runs; fanout starts at most {MAX_RUNS}"
    )


def tokens_of(result: dict) -> int | None:
    """Total tokens where the implementer reported usage, else None (runs/view.py)."""
    from .view import tokens_of as total

    return total(result)


class Fanout:
    """Runs the targets as relay processes and collects one row per run."""

    def __init__(
        self,
        targets: list[Target],
        brief: str,
        cd: str,
        jobs: int,
        timeout: str | None,
        progress: Callable[[str], None],
        relay_for: Callable[[str], list[str]] | None = None,
    ) -> None:
        if relay_for is None:
            from .review import installed_relay

            relay_for = installed_relay
        self.relay_for = relay_for
        self.targets = targets
        self.brief = brief
        self.cd = cd
        self.jobs = jobs
        self.timeout = timeout
        self.progress = progress
        self.interrupted: int | None = None
        #: Called with each started run's row once it ended (delegate fanout --notify).
        self.on_end: Callable[[dict], None] | None = None
        self._lock = threading.Lock()
        self._live: dict[int, subprocess.Popen] = {}
        self._dirs: list[str] = []
        self._stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%SZ")

    def out_dirs(self) -> list[str]:
        """The run directories made so far, in the order the runs started."""
        with self._lock:
            return list(self._dirs)

    # ------------------------------------------------------------ signals

    def interrupt(self, signum: int, _frame=None) -> None:
        """Pass the signal to every relay; runs not yet started stay unstarted."""
        with self._lock:
            if self.interrupted is None:
                self.interrupted = signum
            live = list(self._live.values())
        for proc in live:
            _signal(proc, signum)

    # ------------------------------------------------------------ running

    def run(self) -> list[dict]:
        previous = {
            signum: signal.signal(signum, self.interrupt)
            for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
        }
        try:
            with ThreadPoolExecutor(max_workers=self.jobs) as pool:
                futures = [pool.submit(self._one, i, t) for i, t in enumerate(self.targets)]
                return [future.result() for future in futures]
        finally:
            for signum, handler in previous.items():
                signal.signal(signum, handler)

    def _out_dir(self, index: int, target: Target) -> str:
        root = default_root()
        ensure_private_root(root)
        base = os.path.basename(os.path.normpath(self.cd)) or "repo"
        name = f"{base}-{self._stamp}-fanout{index + 1}-{target.implementer}-{os.urandom(2).hex()}"
        path = os.path.join(root, name)
        os.mkdir(path, 0o700)
        return path

    def _argv(self, target: Target, out_dir: str) -> list[str]:
        argv = list(self.relay_for(target.implementer))
        brief = target.brief or self.brief
        argv += ["--brief", brief, "--cd", self.cd, "--worktree", "--out-dir", out_dir]
        if target.lane:
            argv += ["--lane", target.lane]
        if self.timeout:
            argv += ["--timeout", self.timeout]
        if target.host:
            argv += ["--host", target.host]
        return [*argv, *target.args]

    def _one(self, index: int, target: Target) -> dict:
        row = {"lane": target.lane, "implementer": target.implementer, "outDir": None}
        if target.task is not None:
            row = {"task": target.task, **row}
        if target.host is not None:
            row["host"] = target.host
        if self.interrupted is not None:
            return {**row, **_not_started("fanout was interrupted before this run started")}
        try:
            out_dir = self._out_dir(index, target)
            log = os.open(
                os.path.join(out_dir, RELAY_LOG),
                os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW,
                0o600,
            )
        except OSError as problem:
            return {**row, **_not_started(f"cannot create a run directory: {problem}")}
        row["outDir"] = out_dir
        with self._lock:
            self._dirs.append(out_dir)
        started = time.monotonic()
        try:
            proc = self._start(target, out_dir, log)
        finally:
            os.close(log)
        if proc is None:
            return {**row, **_not_started("fanout was interrupted before this run started")}
        self.progress(f"started {target.label} · {out_dir}")
        code = proc.wait()
        with self._lock:
            self._live.pop(proc.pid, None)
        report = {**row, **_report(out_dir, code, round(time.monotonic() - started, 3))}
        self.progress(f"{report['status']} {target.label} in {report['durationSeconds']:.0f}s")
        if self.on_end is not None:
            self.on_end(report)
        return report

    def _start(self, target: Target, out_dir: str, log: int) -> subprocess.Popen | None:
        with self._lock:
            if self.interrupted is not None:
                return None
            proc = subprocess.Popen(
                self._argv(target, out_dir),
                env=launcher_env(RELAY_LOG),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=log,
                start_new_session=True,  # the terminal's Ctrl-C reaches fanout, which passes it on
            )
            self._live[proc.pid] = proc
        return proc


def launcher_env(*files: str) -> dict[str, str]:
    """The relay's environment: it is told which files we put in the run directory it got
    from us, which we made, so its record counts them as the run's."""
    from ..relay.artifacts import LAUNCHER_FILES_ENV, LAUNCHER_MADE_DIR_ENV

    return {**os.environ, LAUNCHER_FILES_ENV: ",".join(files), LAUNCHER_MADE_DIR_ENV: "1"}


def _signal(proc: subprocess.Popen, signum: int) -> None:
    try:
        proc.send_signal(signum)
    except OSError:
        pass


def _not_started(why: str) -> dict:
    return {
        "status": "aborted",
        "exitCode": None,
        "durationSeconds": 0.0,
        "worktree": None,
        "diffstat": None,
        "tokens": None,
        "error": why,
    }


def _report(out_dir: str, code: int, seconds: float) -> dict:
    """The row for a finished relay, from its result.json (or its stderr when it wrote none)."""
    from ..reading import read_json_object
    from ..runs.view import RESULT_FILE, RESULT_LIMIT, Run
    from ..runstore import liveness, lookup
    from ..runstore.outdirs import by_out_dir

    record = by_out_dir(out_dir)
    ended = liveness.ended(record) if record is not None else None
    result = read_json_object(os.path.join(out_dir, RESULT_FILE), RESULT_LIMIT)
    if ended is None or result is None:
        return {
            "status": "refused" if code == 2 else "lost",
            "exitCode": code,
            "durationSeconds": seconds,
            "worktree": None,
            "diffstat": None,
            "tokens": None,
            "error": _last_line(os.path.join(out_dir, RELAY_LOG))
            or f"the relay exited {code} without a result",
        }
    # What the run is comes from its record; result.json adds what is only for reading.
    row = {
        "status": ended["status"],
        "exitCode": ended.get("exitCode"),
        "durationSeconds": seconds,
        "worktree": result.get("worktree"),
        "diffstat": result.get("diffstat"),
        "tokens": Run(record, out_dir).tokens(),
    }
    row["landing"] = lookup.landing(record)
    if record.section("check") is not None:
        row["check"] = record.section("check")
    if "readOnlyViolation" in result:  # a read-only run: its verdict, true, false or null
        row["readOnlyViolation"] = result["readOnlyViolation"]
    if result.get("error"):
        row["error"] = result["error"]
    return row


def _last_line(path: str) -> str | None:
    try:
        raw = read_limited(path, 1 << 30) or b""
    except UserError:
        return None
    lines = [line for line in raw[-_LOG_TAIL:].decode("utf-8", "replace").splitlines() if line]
    return lines[-1] if lines else None


def exit_code(rows: list[dict], interrupted: int | None) -> int:
    """128+n after signal n; 0 when every run completed and no read-only run wrote; else 1."""
    if interrupted is not None:
        return 128 + interrupted
    clean = all(
        row["status"] == "completed" and row.get("readOnlyViolation") is not True for row in rows
    )
    return 0 if clean else 1


def with_ids(rows: list[dict]) -> list[dict]:
    """Each row with `id`: its run's id in the run store (None for a run that never started)."""
    from ..runstore.outdirs import by_out_dir

    for row in rows:
        record = by_out_dir(row["outDir"]) if row.get("outDir") else None
        row["id"] = record.id if record is not None else None
    return rows


def compare(refs: list[str]) -> list[dict]:
    """A row per run to pick one by: what it changed, its check, its latest review's
    verdict (as the run store recorded it), tokens and time. Raises UserError."""
    from . import view as runs
    from .review import latest_reviews

    reviews = latest_reviews()
    rows = []
    for ref in refs:
        run = runs.show(ref)
        summary = run.summary()
        check = run.record.section("check")
        rows.append({
            "id": summary["id"], "outDir": summary["outDir"],
            "implementer": summary["implementer"], "lane": summary["lane"],
            "status": summary["status"], "changes": summary["changes"],
            "check": None if check is None else check.get("exitCode"),
            "review": reviews.get(run.id),
            "tokens": summary["tokens"], "seconds": summary["elapsedSeconds"],
        })  # fmt: skip
    return rows
