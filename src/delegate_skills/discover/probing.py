"""Running a CLI's probes: each bounded at PROBE_TIMEOUT_S, a few at a time.

Probes of different CLIs, and the independent probes of one CLI, run side by
side in Slots (probe_slots of them at once); a probe that hit the cap while
others ran beside it, and was working rather than waiting, is tried once more
on its own (run_probe). Cancelling kills every probe's process group.
"""

from __future__ import annotations

import collections
import contextlib
import os
import re
import signal
import subprocess
import sys
import threading
import time

from .locate import Launch

PROBE_TIMEOUT_S = 10.0
#: A probe cut at the cap is tried again when others ran beside it this share of the cap…
RETRY_SHARED = 0.05
#: …and it was busy: its processes used this share of the cap in CPU time (where known).
RETRY_BUSY = 0.25
_ANSI = re.compile(r"\x1b\[[0-9;]*m")


class Probe:
    """What one bounded run of a CLI printed."""

    __slots__ = ("ok", "stderr", "stdout")

    def __init__(self, ok: bool, stdout: str, stderr: str) -> None:
        self.ok = ok
        self.stdout = stdout
        self.stderr = stderr

    @property
    def output(self) -> str:
        return strip_ansi(self.stdout + self.stderr)


def strip_ansi(text: str) -> str:
    return _ANSI.sub("", text)


# ---------------------------------------------------------------- running probes


def probe_slots() -> int:
    """How many probe processes run at once: two per CPU this process may use, 2 to 8.

    Many probes spend most of their time waiting (a model list fetched over the
    network, a login check), so twice the CPUs keeps the machine busy without
    starving anyone; a probe that load still pushed past the cap while it
    worked gets its second try alone (see run_probe).
    """
    try:
        cpus = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cpus = os.cpu_count() or 1
    return min(max(2 * cpus, 2), 8)


class Cancelled(Exception):
    """Discovery was stopped (Ctrl-C): no further probe may start."""


class _Ticket:
    """One running probe: whether it runs alone, and for how long others ran beside it."""

    __slots__ = ("alone", "shared_s")

    def __init__(self, alone: bool) -> None:
        self.alone = alone
        self.shared_s = 0.0


class Slots:
    """Runs probe processes: at most `limit` at once, in the order asked for.

    A retry asks to run alone: it starts once no other probe is running or
    waiting, and none starts beside it. `cancel()` kills the process group
    of every probe still running and makes every later start raise
    Cancelled; starting a process and recording it happen under one lock,
    so none escapes a cancel.
    """

    def __init__(self, limit: int) -> None:
        self.limit = max(1, limit)
        self._cond = threading.Condition()
        self._queue: collections.deque[object] = collections.deque()
        self._running: list[_Ticket] = []
        self._since = time.monotonic()
        self._procs: set[subprocess.Popen] = set()
        self._cancelled = False
        #: Seconds this thread's probes waited for a slot (`waited()` reads it).
        self._local = threading.local()

    def waited(self) -> float:
        """Seconds the calling thread has spent waiting for a slot, all its runs together."""
        return getattr(self._local, "waited", 0.0)

    def _may_start(self, turn: object, alone: bool) -> bool:
        if alone:
            return not self._running and not self._queue
        return (
            self._queue[0] is turn
            and len(self._running) < self.limit
            and not any(ticket.alone for ticket in self._running)
        )

    def _account(self) -> None:
        """Add the time since the last start or finish to each probe that shared it."""
        now = time.monotonic()
        if len(self._running) > 1:
            for ticket in self._running:
                ticket.shared_s += now - self._since
        self._since = now

    def _start(self, argv: list[str], env: dict[str, str], alone: bool):
        turn = object()
        asked = time.monotonic()
        with self._cond:
            if not alone:
                self._queue.append(turn)
            try:
                self._cond.wait_for(lambda: self._cancelled or self._may_start(turn, alone))
            finally:
                if not alone:
                    self._queue.remove(turn)
                self._cond.notify_all()
                self._local.waited = self.waited() + time.monotonic() - asked
            if self._cancelled:
                raise Cancelled
            try:
                proc = subprocess.Popen(
                    argv,
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE,
                    env=env,
                    start_new_session=True,
                )
            except OSError:
                return None, None
            ticket = _Ticket(alone)
            self._account()
            self._running.append(ticket)
            self._procs.add(proc)
            return proc, ticket

    def _finish(self, proc: subprocess.Popen, ticket: _Ticket) -> None:
        with self._cond:
            self._account()
            self._running.remove(ticket)
            self._procs.discard(proc)
            self._cond.notify_all()

    def cancel(self) -> None:
        with self._cond:
            self._cancelled = True
            for proc in self._procs:
                with contextlib.suppress(OSError):
                    os.killpg(proc.pid, signal.SIGKILL)
            self._cond.notify_all()

    def run(self, argv: list[str], env: dict[str, str], alone: bool = False):
        """(Probe, or None when it hit the cap; seconds other probes ran beside it;
        CPU seconds a probe cut at the cap had used, None when unknown or not cut)."""
        proc, ticket = self._start(argv, env, alone)
        if proc is None:
            return Probe(False, "", ""), 0.0, None
        try:
            out, err = proc.communicate(timeout=PROBE_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            with self._cond:
                self._account()
                shared_s = ticket.shared_s
            busy_s = group_cpu_seconds(proc.pid)
            _kill(proc)
            return None, shared_s, busy_s
        finally:
            self._finish(proc, ticket)
        decode = lambda data: data.decode("utf-8", errors="replace")  # noqa: E731
        return Probe(proc.returncode == 0, decode(out), decode(err)), ticket.shared_s, None


def group_cpu_seconds(pgid: int) -> float | None:
    """CPU seconds the live processes of group `pgid` have used, their threads and the
    children they waited for included (Linux /proc); None where that cannot be read."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        names = [name for name in os.listdir("/proc") if name.isdigit()]
    except OSError:
        return None
    ticks, used, seen = os.sysconf("SC_CLK_TCK"), 0, False
    for name in names:
        try:
            with open(f"/proc/{name}/stat", "rb") as handle:
                fields = handle.read().rsplit(b")", 1)[1].split()
        except (OSError, IndexError):
            continue
        # After the name: state, ppid, pgrp, …; utime stime cutime cstime are 11-14.
        if len(fields) > 14 and int(fields[2]) == pgid:
            seen = True
            used += sum(int(value) for value in fields[11:15])
    return used / ticks if seen else None


def _kill(proc: subprocess.Popen) -> None:
    """Kill the probe's whole process group and let go of its pipes."""
    with contextlib.suppress(OSError):
        os.killpg(proc.pid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.communicate(timeout=1)
    for stream in (proc.stdout, proc.stderr):
        with contextlib.suppress(OSError):
            stream.close()
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=1)


def run_probe(
    launch: Launch, args: tuple[str, ...], env: dict[str, str], slots: Slots | None = None
) -> Probe:
    """Run the CLI once, bounded at PROBE_TIMEOUT_S; the whole process tree dies with it.

    A run that hits the cap while other probes ran beside it for a share of
    that time (RETRY_SHARED of the cap), and was working rather than waiting
    (its processes used RETRY_BUSY of the cap in CPU time, where /proc tells),
    gets one more try, alone, once the others are done: a slow CLI on a busy
    machine is not reported as broken. A run that had the cap's time (nearly)
    to itself, or spent it idle, is not tried again: a CLI that waits on its
    network would only wait once more, and hold every other probe up.
    """
    slots = slots or Slots(1)
    argv = [*launch.prefix, *args]
    probe, shared_s, busy_s = slots.run(argv, env)
    crowded = shared_s >= RETRY_SHARED * PROBE_TIMEOUT_S
    working = busy_s is None or busy_s >= RETRY_BUSY * PROBE_TIMEOUT_S
    if probe is None and crowded and working:
        probe = slots.run(argv, env, alone=True)[0]
    return probe or Probe(False, "", "")
