"""`runs wait` and `runs cancel`: following a run to its end, or ending it as Ctrl-C would.

A run whose relay died while its implementer's processes live on is ended
here, so `lost` means that nothing of the run is still running. A --host run
whose relay here is gone is taken up again (remote/dispatch.reattach). An
aborted run writes a first result before its processes are gone: `wait`
returns once its relay has exited.
"""

from __future__ import annotations

import itertools
import os
import signal
import time

from ..errors import UserError
from ..isolation import linux
from ..runstore import liveness, lookup
from .view import Run, show

WAIT_POLL_S = 0.1
#: How long `wait` gives a run that has not started yet to appear, when no
#: live process names its directory (a relay starts one well within it).
APPEAR_S = 1.0
#: How long `wait` gives an orphaned run between SIGTERM and SIGKILL.
ORPHAN_GRACE_S = 2.0
#: How long `cancel` waits for the relay to write its `aborted` result.
CANCEL_WAIT_S = 60.0


def _path_like(ref: str) -> bool:
    return os.sep in ref or ref.startswith(".") or os.path.isdir(ref)


def _not_there(ref: str, waited_s: float) -> None:
    """Raise why `ref` names no run, unless a relay given it as --out-dir is starting."""
    if not _path_like(ref) or (os.path.isdir(ref) and lookup.is_run_dir(ref)):
        lookup.resolve(ref)  # raises, saying why
    if waited_s > APPEAR_S and not _named_by_a_process(ref):
        raise UserError(
            f"{ref}: no relay run there, and no running relay names it "
            "(a relay that stopped on a usage error printed why)"
        )


def wait(ref: str, timeout_s: float | None) -> tuple[Run, bool]:
    """Block until the run has ended or is lost; (run, timed_out). Raises UserError."""
    started = time.monotonic()
    deadline = None if timeout_s is None else started + timeout_s
    while True:
        record = lookup.find(ref)
        now = time.monotonic()
        if record is None:
            _not_there(ref, now - started)
            if deadline is not None and now >= deadline:
                raise UserError(f"{ref}: no relay run there yet after {timeout_s:g} s")
        else:
            if liveness.status(record) == "orphaned":
                liveness.end_orphans(record, ORPHAN_GRACE_S)
            if liveness.status(record) != "running" and not liveness.relay_alive(record):
                if liveness.ended(record.reloaded()) is None and record.section("remote"):
                    from ..remote.dispatch import reattach

                    reattach(Run.of(record))  # a --host run goes on there: follow it to its end
                    continue
                liveness.drop_cgroup(record)
                return Run.of(record.reloaded()), False
            if deadline is not None and now >= deadline:
                return Run.of(record.reloaded()), True
        time.sleep(WAIT_POLL_S)


def cancel(ref: str, timeout_s: float = CANCEL_WAIT_S) -> dict:
    """End a run as Ctrl-C would. Raises UserError.

    The relay gets SIGINT: it stops the implementer and everything it
    started, then writes its `aborted` result. A run whose relay is gone has
    its processes ended here. A finished run is left as it is.
    """
    run = show(ref)
    record = run.record
    status = run.status
    remote = record.section("remote")
    going_there = bool(remote) and liveness.ended(record) is None
    if status not in liveness.IN_FLIGHT and not going_there:
        return {"id": run.id, "outDir": run.out_dir, "cancelled": False, "status": status}
    pid, start = liveness.relay_of(record)
    if going_there and not liveness.pid_alive(pid, start):
        from ..remote.dispatch import signal_there

        signal_there(run, "SIGINT")  # the run goes on there; wait below follows it
    if status == "running" and liveness.pid_alive(pid, start):
        try:
            os.kill(pid, signal.SIGINT)
        except ProcessLookupError:
            pass  # it ended on its own meanwhile
        except PermissionError:
            raise UserError(f"{run.out_dir}: its relay (pid {pid}) is not yours to stop") from None
    run, timed_out = wait(run.id, timeout_s)
    if timed_out:
        raise UserError(
            f"{run.out_dir}: its relay (pid {pid}) did not stop within {timeout_s:.0f} s of SIGINT"
        )
    return {
        "id": run.id,
        "outDir": run.out_dir,
        "cancelled": True,
        "status": run.status,
        "leftRunning": liveness.leftovers(run.record),
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
