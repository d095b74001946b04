"""The implementer's life: launch, stream its output, the watchdog, signals, the sweep.

stdout goes to the events file and the adapter's scanner, stderr to the
terminal, stderr.txt (where the adapter keeps one) and the tail; the
watchdog sends SIGTERM to the whole tree, then SIGKILL; a signal to the relay
aborts the run. Once the implementer has exited, whatever it left running is
ended before the verdict is taken.
"""

from __future__ import annotations

import gc
import signal
import time

from ..isolation import linux
from ..pathsearch import which
from .child import Child, is_missing_binary, signal_name
from .console import grace_s, say, write_stderr
from .progress import Ticker
from .scan import LineScanner, ObjectScanner, Utf8Stream

#: Seconds an aborted tree gets between SIGTERM and SIGKILL.
ABORT_GRACE_ENV = "DELEGATE_RELAY_ABORT_GRACE"
DEFAULT_ABORT_GRACE_S = 2.0
#: How long a sandboxed run's own bubblewrap processes may take to leave after it exited.
SANDBOX_SETTLE_S = 0.5
#: Seconds between the watchdog's SIGTERM and its SIGKILL to the whole tree.
KILL_GRACE_ENV = "DELEGATE_RELAY_KILL_GRACE"
DEFAULT_KILL_GRACE_S = 10.0
TAIL_LINES = 20
_TAIL_PARTIAL_MAX = 65536


class StderrTail:
    """The last non-blank lines of a stream, with lines split across reads kept whole."""

    def __init__(self) -> None:
        self._decode = Utf8Stream()
        self._partial = ""
        self.lines: list[str] = []

    def feed(self, data: bytes) -> None:
        parts = (self._partial + self._decode.decode(data)).split("\n")
        self._partial = parts.pop()[-_TAIL_PARTIAL_MAX:]
        self._keep(parts)

    def _keep(self, parts: list[str]) -> None:
        self.lines.extend(p.rstrip() for p in parts if p.strip())
        del self.lines[:-TAIL_LINES]

    def snapshot(self) -> list[str]:
        return [*self.lines, *([self._partial.rstrip()] if self._partial.strip() else [])][
            -TAIL_LINES:
        ]


class TextFeed:
    """Hands decoded stdout text to an adapter that reads plain text."""

    def __init__(self, on_text) -> None:
        self.feed = on_text

    def finish(self) -> None:
        pass


def mask_brief(argv: list[str], brief: str) -> list[str]:
    """`argv` with the brief text (an argument, or a `--flag=` value) written `<brief>`."""
    if not brief:
        return list(argv)
    masked = []
    for arg in argv:
        if arg == brief:
            arg = "<brief>"
        elif arg.endswith(brief) and arg[: -len(brief)].startswith("-"):
            arg = arg[: -len(brief)] + "<brief>"
        masked.append(arg)
    return masked


def supervise(relay, launcher: list[str], env: dict[str, str], brief: str) -> int:
    """Launch the implementer and see it to its end; the run's exit code."""
    from .artifacts import STDERR_NAME
    from .finish import finish
    from .launch import unavailable

    adapter, opts, run = relay.adapter, relay.opts, relay.run
    argv = [*launcher, *adapter.build_argv(opts, run)]
    relay.implementer_argv = mask_brief(argv, run.brief)
    if relay.sandbox is not None and relay.sandbox.enforced:
        resolved = which(argv[0], env)
        if resolved is None:
            return unavailable(relay)
        argv = relay.sandbox.wrap([resolved, *argv[1:]])
    decoder = Utf8Stream()
    scanner = _scanner(relay)

    def on_stdout(data: bytes) -> None:
        run.append(adapter.events_name, data)
        if scanner is not None:
            scanner.feed(decoder.decode(data))

    ticker = relay.ticker = Ticker(adapter.label)

    def on_stderr(data: bytes) -> None:
        ticker.clear()
        write_stderr(data)
        run.append(STDERR_NAME, data)
        relay.tail.feed(data)

    stdin = brief.encode("utf-8", errors="replace") if adapter.brief_via == "stdin" else None
    adapter.before_launch(relay.state)
    child = Child(
        argv,
        cwd=opts["cd"],
        env=env,
        stdin=stdin,
        on_stdout=on_stdout,
        on_stderr=on_stderr,
        signals=relay.signals,
        on_tick=ticker.tick,
        cgroup=relay.cgroup_for_child(),
    )
    try:
        child.start()
    except OSError as problem:
        child.close()
        if is_missing_binary(problem, opts["cd"]) and adapter.missing_at_launch_is_unavailable:
            return unavailable(relay)
        return finish(
            relay, "failed", 1, None, error=f"could not start {adapter.binary}: {problem}"
        )
    relay.launched = True
    if relay.cgroup_host is not None:
        relay.cgroup_host.leave()  # the implementer is inside: its children are born there
    # Off since start-up (the skill entry); the run may last hours. What start-up made lives
    # as long as the relay: frozen, the first collection does not walk all of it again.
    gc.freeze()
    gc.enable()
    _record_group(relay, child)
    try:
        return _watch(relay, child, scanner, decoder)
    finally:
        child.close()
        run.close()


def _record_group(relay, child: Child) -> None:
    """Note the implementer's process group in the store (and in run.json, for readers)."""
    from .marker import RUN_FILE, run_marker
    from .storing import update_record

    adapter, opts, run = relay.adapter, relay.opts, relay.run
    marker = run_marker(
        adapter.key, opts["lane"], opts["cd"], run.path, run.started_at, group=child.pid,
        run_id=relay.run_id(), argv=relay.implementer_argv,
    )  # fmt: skip
    update_record(
        relay,
        group={"pgid": child.pid, "start": linux.process_start(child.pid)},
        implementerArgv=relay.implementer_argv,
    )
    try:
        run.replace(RUN_FILE, marker)
    except OSError:
        pass  # the run goes on; run.json then names only the relay


def _scanner(relay):
    parser = relay.adapter.parser
    if parser is None:
        return None
    if parser == "text":
        return TextFeed(lambda text: relay.adapter.on_text(relay.state, text))

    def on_object(event: dict) -> None:
        relay.adapter.on_event(relay.state, event)

    return ObjectScanner(on_object) if parser == "objects" else LineScanner(on_object)


def _watch(relay, child: Child, scanner, decoder: Utf8Stream) -> int:
    watchdog = relay.adapter.watchdog_ms(relay.opts)
    deadline = None if watchdog is None else time.monotonic() + watchdog / 1000
    relay.deadline = deadline
    fired = False
    reason = child.pump(deadline)
    if reason == "deadline":
        fired = True
        child.signal_tree(signal.SIGTERM)
        reason = child.pump(
            time.monotonic() + grace_s(KILL_GRACE_ENV, DEFAULT_KILL_GRACE_S),
            stop_pipes_on_exit=True,
        )
        if reason == "deadline":
            child.signal_tree(signal.SIGKILL)
            reason = child.pump(None, stop_pipes_on_exit=True)
    if reason == "signal":
        return _abort(relay, child, scanner, decoder)
    if fired:
        child.kill_tree()
    else:
        _sweep(relay, child)
    _drain_scanner(scanner, decoder)
    settle(relay)
    return _closed(relay, child, fired)


def settle(relay) -> None:
    """Every process of the run is gone: take the second snapshot, drop the cgroup."""
    from .storing import changes_entry, update_record

    if relay.changes is not None:
        from ..snapshots.gitstate import TouchedFiles

        relay.touched = TouchedFiles(relay.opts["cd"])  # beside the second snapshot
        relay.changes.end()
        if relay.changes.after is not None:
            update_record(relay, changes=changes_entry(relay))
    relay.release_cgroup()


def _sweep(relay, child: Child) -> None:
    """End what the implementer left running, before the verdict is taken."""
    sandboxed = relay.sandbox is not None and relay.sandbox.enforced
    left = child.sweep(
        grace_s(ABORT_GRACE_ENV, DEFAULT_ABORT_GRACE_S),
        settle_s=SANDBOX_SETTLE_S if sandboxed else 0.0,
    )
    if left:
        pids = ", ".join(str(pid) for pid in left)
        say(f"ended {len(left)} process(es) {relay.adapter.display} left running (pid {pids})")


def _drain_scanner(scanner, decoder: Utf8Stream) -> None:
    if scanner is not None:
        scanner.feed(decoder.flush())
        scanner.finish()


def _closed(relay, child: Child, fired: bool) -> int:
    from .finish import finish

    adapter, opts = relay.adapter, relay.opts
    exited = child.exited
    state = relay.state
    state.exited, state.exit_code, state.signal = True, exited.code, exited.signal_name
    problem = adapter.failure(state)
    succeeded = exited.code == 0 and not fired and problem is None
    mapped = exited.mapped_code
    exit_code = 0 if succeeded else (1 if mapped == 0 else mapped)
    status = "completed" if succeeded else ("timeout" if fired else "failed")
    error = (
        f"{adapter.label} did not finish within --timeout {opts['timeout']}; "
        "killed by the relay watchdog"
        if fired
        else problem
    )
    if relay.run.write_error is not None:
        name, problem = relay.run.write_error
        succeeded, status, exit_code = False, "failed", 1
        error = (
            f"cannot record {name} in {relay.run.path}: {problem.strerror or problem}; "
            f"{adapter.display} ran on unrecorded from there"
        )
    tail = None if succeeded else relay.tail.snapshot()
    return finish(relay, status, exit_code, exited.signal_name, tail=tail, error=error)


def _abort(relay, child: Child, scanner, decoder: Utf8Stream) -> int:
    from .finish import finish

    signum = relay.signals.first()
    name = signal_name(signum) or "SIGTERM"
    code = 128 + signum
    error = (
        f"the relay was killed by {name}; {relay.adapter.label} was terminated with it — "
        "inspect the working tree before re-dispatching"
    )
    child.signal_tree(signal.SIGTERM)
    # A first result at once (a relay killed outright during the grace still
    # leaves one), with no verdict: processes of the run are still alive.
    relay.settled = False
    finish(relay, "aborted", code, name, tail=relay.tail.snapshot(), error=error)
    grace = grace_s(ABORT_GRACE_ENV, DEFAULT_ABORT_GRACE_S)
    child.pump(time.monotonic() + grace, watch_signals=False)
    child.processes().end(0, keep=child.pid)
    _drain_scanner(scanner, decoder)
    settle(relay)
    relay.settled = True
    finish(relay, "aborted", code, name, tail=relay.tail.snapshot(), error=error)
    return code
