"""Before the implementer starts: is it ready, and does its `--version` answer in time.

A run that stops here still gets a result (`failed`, `*_unavailable`,
`timeout` 124, `aborted` 128+n) and leaves no worktree behind.
"""

from __future__ import annotations

import signal
import time

from ..pathsearch import which
from .child import Child, is_missing_binary, signal_name
from .console import say, write_stderr

PREFLIGHT_CAP_S = 10.0
TAIL_LINES = 20
_PROBE_OUTPUT_MAX = 1 << 20


def readiness(relay, launcher: list[str], env: dict[str, str]) -> str | None:
    """Why a dispatch would fail before it starts, from what is known already; or None.

    Missing sandbox tools, and a CLI the discover cache knows is signed out.
    Nothing here launches anything; --skip-preflight skips it. A missing
    implementer is the preflight's to report, first.
    """
    adapter = relay.adapter
    binary = which(launcher[0], env)
    if binary is None:
        return None
    missing = [(tool, pkg) for tool, pkg in adapter.required_tools(relay.opts)
               if which(tool, env) is None]  # fmt: skip
    if missing:
        tools = " and ".join(tool for tool, _ in missing)
        packages = " ".join(dict.fromkeys(pkg for _, pkg in missing))
        return (
            f"{adapter.display}'s shell sandbox needs {tools}, not found on PATH: install "
            f"{'it' if len(missing) == 1 else 'them'} (Debian/Ubuntu: sudo apt-get install "
            f"{packages}), or pass --skip-preflight to dispatch anyway"
        )
    from ..discover.cache import known_signed_out

    seen = known_signed_out(adapter.key, binary, env)
    if seen is not None:
        login = adapter.impl.login or f"{adapter.binary} login"
        when = time.strftime("%H:%M", time.localtime(seen))
        return (
            f"{adapter.display} is signed out (delegate discover saw so at {when}); "
            f"sign it in ({login}), or pass --skip-preflight to dispatch anyway"
        )
    return None


def not_ready(relay, problem: str) -> int:
    from .finish import finish
    from .prepare import drop_unlaunched_worktree

    drop_unlaunched_worktree(relay)
    finish(relay, "failed", 1, None, tail=[], error=problem, final="")
    say(problem)
    return 1


def preflight(relay, launcher: list[str], env: dict[str, str]) -> int | None:
    """Read the implementer's version; an exit code when the run must stop here."""
    adapter, opts = relay.adapter, relay.opts
    if relay.signals.received:
        return aborted_before_dispatch(relay)
    watchdog = adapter.watchdog_ms(opts)
    budget = PREFLIGHT_CAP_S if watchdog is None else min(watchdog / 1000, PREFLIGHT_CAP_S)
    ends = time.monotonic() + budget
    attempts = adapter.version_args(opts)
    for attempt, args in enumerate(attempts):
        remaining = ends - time.monotonic()
        kind, code, out, err = probe(relay, [*launcher, *args], env, remaining)
        if kind in ("ok", "failed") and not sandbox_shown(relay, kind == "ok"):
            # bwrap itself could not start here: the same probe again, without it
            kind, code, out, err = probe(relay, [*launcher, *args], env, ends - time.monotonic())
        if kind == "ok":
            relay.version = adapter.parse_version(out)
            return None
        if kind == "missing":
            return unavailable(relay)
        if kind == "signal":
            return aborted_before_dispatch(relay)
        if kind == "failed" and attempt < len(attempts) - 1:
            continue
        return preflight_failed(relay, kind, code, err, int(budget * 1000))
    return None


def sandbox_shown(relay, started: bool) -> bool:
    """After a command wrapped in a sandbox not yet seen to start: False when bwrap could not
    start here. The run then goes on unconfined, saying why (Sandbox.reason), and a
    read-only run's tripwire takes the fuller baseline detection needs, before anything of
    the implementer has run."""
    sandbox = relay.sandbox
    if sandbox is None or sandbox.unproven is None:
        return True
    if started:
        sandbox.unproven = None
        return True
    if sandbox.confirm():
        return True  # bwrap starts: what failed was the command inside it
    if relay.adapter.read_only(relay.opts):
        from .prepare import arm_read_only

        arm_read_only(relay)
    return False


def probe(relay, argv: list[str], env: dict[str, str], seconds: float):
    """(kind, exit code, stdout, stderr) of one version probe, bounded by `seconds`."""
    if seconds <= 0:
        return "timeout", None, "", ""
    out, err = bytearray(), bytearray()

    def keep(buffer: bytearray, passthrough: bool):
        def take(data: bytes) -> None:
            if passthrough:
                write_stderr(data)
            if len(buffer) < _PROBE_OUTPUT_MAX:
                buffer.extend(data)

        return take

    enforced = relay.sandbox is not None and relay.sandbox.enforced
    if enforced:
        resolved = which(argv[0], env)
        if resolved is None:
            return "missing", None, "", ""
        argv = relay.sandbox.wrap([resolved, *argv[1:]])
    child = Child(
        argv,
        cwd=relay.opts["cd"] if enforced else None,
        env=env,
        stdin=None,
        on_stdout=keep(out, False),
        on_stderr=keep(err, True),
        signals=relay.signals,
        cgroup=relay.cgroup_for_child(),
    )
    try:
        child.start()
    except OSError as problem:
        child.close()
        if is_missing_binary(problem, None):
            return "missing", None, "", ""
        return "failed", None, "", str(problem)
    try:
        # Output a lingering descendant still holds is not waited for: the
        # version is printed by the time the probe exits.
        reason = child.pump(time.monotonic() + seconds, stop_pipes_on_exit=True)
        if reason != "closed":
            child.signal_tree(signal.SIGKILL)
            child.pump(None, watch_signals=False, stop_pipes_on_exit=True)
        child.kill_tree()  # nothing of the probe outlives it
    finally:
        child.close()
    text = out.decode("utf-8", errors="replace"), err.decode("utf-8", errors="replace")
    if reason == "signal":
        return "signal", None, *text
    if reason == "deadline":
        return "timeout", None, *text
    code = child.exited.mapped_code
    return ("ok" if code == 0 else "failed"), code, *text


def preflight_failed(relay, kind: str, code: int | None, err: str, budget_ms: int) -> int:
    from .finish import finish
    from .prepare import drop_unlaunched_worktree

    adapter = relay.adapter
    probe_name = adapter.probe_name(relay.opts)
    if kind == "timeout":
        status, exit_code = "timeout", 124
        error = (
            f"{probe_name} preflight timed out after {budget_ms}ms; "
            f"{adapter.display} was not dispatched"
        )
    else:
        status, exit_code = "failed", code or 1
        with_exit = f" with exit {code}" if code is not None else ""
        error = f"{probe_name} preflight failed{with_exit}; {adapter.display} was not dispatched"
    tail = err.strip().split("\n")[-TAIL_LINES:] if err.strip() else []
    drop_unlaunched_worktree(relay)
    finish(relay, status, exit_code, None, tail=tail, error=error, final="")
    say(error)
    return exit_code


def unavailable(relay) -> int:
    from .finish import finish
    from .prepare import drop_unlaunched_worktree

    adapter = relay.adapter
    drop_unlaunched_worktree(relay)
    error = adapter.unavailable_error or None
    finish(relay, adapter.unavailable_status, 127, None, error=error, final="")
    say(f"`{adapter.binary}` not found on PATH. {adapter.install_hint}")
    return 127


def aborted_before_dispatch(relay, during: str | None = None) -> int:
    from .finish import finish
    from .prepare import drop_unlaunched_worktree

    adapter = relay.adapter
    signum = relay.signals.first()
    name = signal_name(signum) or "SIGTERM"
    during = during or f"during the {adapter.binary} version preflight"
    error = f"the relay was killed by {name} {during}; {adapter.display} was not dispatched"
    drop_unlaunched_worktree(relay)
    finish(relay, "aborted", 128 + signum, name, tail=[], error=error, final="")
    return 128 + signum


def run_setup(relay) -> int | None:
    """Run --setup in the new worktree; an exit code when the run must stop here."""
    from .finish import finish
    from .hooks import SETUP_LOG, budget_s, run_shell

    command, log = relay.opts["setup"], relay.run.file(SETUP_LOG)
    say(f"setup: {command}")
    relay.wrote.add(SETUP_LOG)
    relay.setup_outcome = run_shell(
        command, relay.opts["cd"], relay.run, SETUP_LOG, relay.stopping, budget_s(relay)
    )
    if relay.signals.received:
        return aborted_before_dispatch(relay, during="during --setup")
    code = relay.setup_outcome["exitCode"]
    if code == 0:
        return None
    tree = relay.worktree.path if relay.worktree is not None else relay.opts["cd"]
    problem = (
        f"--setup {command!r} exited {code}; its output is in {log}; "
        f"the worktree is kept for inspection at {tree}"
    )
    finish(relay, "failed", 1, None, tail=relay.setup_outcome["tail"], error=problem, final="")
    return 1
