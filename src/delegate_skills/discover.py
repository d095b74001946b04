"""Which implementer CLIs are installed, and what they say about themselves.

For each implementer: where it is (PATH, executable files only; a pinned
COMMANDCODE_BIN; the desktop bundle of a CLI that ships inside an app), its
version, whether it is logged in (where the CLI can tell), which models it
offers, and with `usage` how many sessions it has stored and when it was last
used (directory listings and mtimes only: session files hold conversations
and are never opened). Every probe is bounded at 10 s, as in the Node bundle;
probes of different CLIs, and the independent probes of one CLI, run side by
side, a few at a time (probe_slots), and a probe that hit the cap while
others ran is tried once more on its own.

The report is `delegate-discover.v1`, key for key as the Node bundle prints it.
"""

from __future__ import annotations

import collections
import contextlib
import datetime
import json
import os
import re
import signal
import stat
import subprocess
import sys
import threading
import time
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait

from . import registry
from .registry import Implementer

PROBE_TIMEOUT_S = 10.0
#: A probe cut at the cap is tried again when others ran beside it this share of the cap…
RETRY_SHARED = 0.05
#: …and it was busy: its processes used this share of the cap in CPU time (where known).
RETRY_BUSY = 0.25
MAX_MODELS = 200
_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_COLON_VERSION = re.compile(r"([^:\s]+):")


class Launch:
    """How to start one CLI: its path, and the argv prefix that runs it."""

    __slots__ = ("path", "prefix")

    def __init__(self, path: str, prefix: list[str]) -> None:
        self.path = path
        self.prefix = prefix


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


# ---------------------------------------------------------------- finding a CLI


def which(binary: str, env: dict[str, str]) -> str | None:
    """The first executable regular file named `binary` on PATH."""
    for entry in env.get("PATH", "").split(os.pathsep):
        entry = entry[1:-1] if len(entry) > 1 and entry[0] == entry[-1] == '"' else entry
        if not entry:
            continue
        candidate = os.path.join(os.path.abspath(entry), binary)
        try:
            info = os.stat(candidate)
        except OSError:
            continue
        if stat.S_ISREG(info.st_mode) and os.access(candidate, os.X_OK):
            return candidate
    return None


def _expand(raw: str, env: dict[str, str], home: str) -> str:
    expanded = home + raw[1:] if raw.startswith("~/") else raw
    return re.sub(r"%([A-Za-z_][A-Za-z0-9_]*)%", lambda m: env.get(m.group(1), ""), expanded)


def _commandcode_pin(configured: str, env: dict[str, str], platform: str) -> Launch | None:
    """COMMANDCODE_BIN: a path (or a PATH name) that must name a regular file.

    On Windows it must be absolute, neither a .cmd/.bat shim nor cmd.exe itself,
    so `cmd` is never mistaken for Command Code.
    """
    if platform == "win32" and not os.path.isabs(configured):
        return None
    if "/" in configured or "\\" in configured:
        command = os.path.abspath(configured)
    else:
        command = which(configured, env)
    if not command:
        return None
    if platform == "win32":
        if command.lower().endswith((".cmd", ".bat")):
            return None
        comspec = env.get("ComSpec") or env.get("COMSPEC")
        if comspec and os.path.realpath(command).lower() == os.path.realpath(comspec).lower():
            return None
    return Launch(command, [command]) if os.path.isfile(command) else None


def locate(impl: Implementer, env: dict[str, str], platform: str, home: str) -> Launch | None:
    """Where `impl` is installed, or None when it is missing."""
    if impl.key == "commandcode" and env.get("COMMANDCODE_BIN"):
        return _commandcode_pin(env["COMMANDCODE_BIN"], env, platform)
    if impl.key == "commandcode" and platform == "win32":
        return None
    found = which(impl.binary, env)
    if found:
        return Launch(found, [found])
    if impl.locate is None:
        return None
    for raw in impl.locate.candidates.get(platform, ()):
        bundle = _expand(raw, env, home)
        if os.path.isfile(bundle):
            launcher = which(impl.locate.launcher, env) or impl.locate.launcher
            return Launch(bundle, [launcher, bundle])
    return None


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


def version_of(
    impl: Implementer, launch: Launch, env: dict[str, str], slots: Slots | None = None
) -> str | None:
    for args in filter(None, (impl.version_args, impl.version_fallback_args)):
        probe = run_probe(launch, args, env, slots)
        if not probe.ok:
            continue
        lines = probe.stdout.strip().splitlines()
        first = lines[0].strip() if lines else ""
        if not first:
            continue
        if impl.version_format == "colon-prefix":
            match = _COLON_VERSION.match(first)
            return match.group(1) if match else first
        return first
    return None


def _json_field(text: str, field: str) -> bool | None:
    try:
        value = json.loads(text).get(field)
    except (ValueError, AttributeError):
        return None
    return value if isinstance(value, bool) else None


def auth_of(impl: Implementer, probe: Probe | None) -> bool | None:
    """Logged in: True / False, or None when the CLI cannot tell us."""
    spec = impl.auth_probe
    if spec is None or probe is None:
        return None
    if spec.json_field:
        if probe.ok:
            return _json_field(probe.stdout, spec.json_field)
        combined = probe.stdout + probe.stderr
        return _json_field(combined, spec.json_field) if combined.strip() else None
    output = probe.output
    if spec.fail is not None and spec.fail.search(output):
        return False
    if spec.success is not None:
        if spec.success.search(output):
            return True
        return False if probe.ok and spec.miss_means_false else None
    return True if probe.ok else None


def _models(identifiers, status: str = "reported") -> dict:
    unique = list(dict.fromkeys(i for i in identifiers if i))
    return {"status": status, "values": unique[:MAX_MODELS], "truncated": len(unique) > MAX_MODELS}


def _failed_models() -> dict:
    return {"status": "failed", "values": [], "truncated": False}


def parse_model_list(raw: str, format: str | None) -> dict:
    lines = [line.strip() for line in re.split(r"\r?\n", raw) if line.strip()]
    if format == "cursor":
        names = [
            re.split(r"\s+-\s+", line, maxsplit=1)[0]
            for line in lines
            if line != "Available models" and not line.startswith("Tip:")
        ]
    elif format == "grok":
        names = [
            re.sub(r"\s*\(default\)$", "", line[2:]).strip()
            for line in lines
            if line.startswith("* ")
        ]
    elif format == "commandcode":
        names = [first for first in (line.split()[0] for line in lines) if "/" in first]
    elif format == "table":
        names = [
            f"{cols[0]}/{cols[1]}"
            for cols in (line.split() for line in lines[1:])
            if len(cols) >= 2
        ]
    else:
        names = lines
    return _models(names)


def _state_dir(env_dir: str | None, home_subdir: str, env: dict[str, str], home: str) -> str:
    return (env_dir and env.get(env_dir)) or os.path.join(home, home_subdir)


def models_of(impl: Implementer, probe: Probe | None, env: dict[str, str], home: str) -> dict:
    spec = impl.model_probe
    if spec is None:
        return {"status": "unsupported", "values": [], "truncated": False}
    if spec.static:
        return _models(spec.static, "aliases")
    if spec.file:
        path = os.path.join(_state_dir(spec.env_dir, spec.home_subdir, env, home), spec.file)
        try:
            with open(path, encoding="utf-8") as handle:
                cache = json.loads(handle.read())
        except (OSError, ValueError):
            return _failed_models()
        entries = cache.get("models") if isinstance(cache, dict) else None
        if not isinstance(entries, list):
            return _failed_models()
        return _models(
            e.get("slug") if isinstance(e, dict) and isinstance(e.get("slug"), str) else ""
            for e in entries
        )
    if probe is None or not probe.ok:
        return _failed_models()
    return parse_model_list(probe.stdout, spec.format)


# ---------------------------------------------------------------- usage


def _iso_ms(ms: int) -> str:
    moment = datetime.datetime.fromtimestamp(ms / 1000, tz=datetime.timezone.utc)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{ms % 1000:03d}Z"


def _entries(directory: str) -> list[os.DirEntry]:
    try:
        with os.scandir(directory) as it:
            return list(it)
    except OSError:
        return []


def _mtime_ms(path: str) -> int:
    return os.stat(path).st_mtime_ns // 1_000_000


def usage_of(impl: Implementer, env: dict[str, str], home: str) -> dict | None:
    """Session count and last use from listings and mtimes; None when unknown."""
    spec = impl.usage_probe
    if spec is None:
        return None
    base = _state_dir(spec.env_dir, spec.home_subdir, env, home)
    if not os.path.isdir(base):
        return None
    containers = [base]
    for segment in spec.path:
        containers = [
            entry.path
            for directory in containers
            for entry in _entries(directory)
            if entry.is_dir(follow_symlinks=False) and segment in ("*", entry.name)
        ]
    sessions, last = 0, 0
    for directory in containers:
        for entry in _entries(directory):
            is_dir = entry.is_dir(follow_symlinks=False)
            if spec.entry != "any" and is_dir != (spec.entry == "dir"):
                continue
            if not spec.match.search(entry.name):
                continue
            sessions += 1
            try:
                last = max(last, _mtime_ms(entry.path))
                if is_dir:
                    # A directory's mtime stays put while a file inside grows.
                    for child in _entries(entry.path):
                        last = max(last, _mtime_ms(child.path))
            except OSError:
                pass
    return {"sessions": sessions, "lastUsed": _iso_ms(last) if last > 0 else None}


# ---------------------------------------------------------------- the report


class _Pending:
    """The probes of one CLI; `start` submits one kind, `entry()` builds the report."""

    #: The order probes of every CLI are started in: the ones that wait longest
    #: (a model list over the network) first, so they overlap the rest.
    ORDER = ("models", "auth", "version", "usage")

    def __init__(
        self,
        impl: Implementer,
        launch: Launch,
        env: dict[str, str],
        home: str,
        with_usage: bool,
        pool,
        slots: Slots,
    ) -> None:
        self.impl, self.launch, self.env, self.home = impl, launch, env, home
        self.with_usage, self.pool, self.slots = with_usage, pool, slots
        #: Seconds each probe took (from its start to its answer), by what it asked.
        self.seconds: dict[str, float] = {}
        self.auth_args = impl.auth_probe.args if impl.auth_probe else None
        model = impl.model_probe
        self.model_args = model.args if model and model.args else None
        # One run answers both (grok's `models` says "not authenticated" when logged out).
        self.shared = bool(
            self.model_args and self.model_args == self.auth_args and not impl.auth_probe.json_field
        )
        self.version = self.auth = self.models = self.usage = None
        self.futures: set = set()

    def start(self, what: str) -> None:
        """Submit the probe `what` (one of ORDER), when this CLI has one."""
        submit, slots, launch, env = self.pool.submit, self.slots, self.launch, self.env
        future = None
        if what == "version":
            future = self.version = submit(
                self._timed, "version", version_of, self.impl, launch, env, slots
            )
        elif what == "models" and self.model_args and not self.shared:
            future = self.models = submit(
                self._timed, "models", run_probe, launch, self.model_args, env, slots
            )
        elif what == "auth" and self.auth_args:
            future = self.auth = submit(
                self._timed, "auth", run_probe, launch, self.auth_args, env, slots
            )
            if self.shared:
                self.models = future
        elif what == "usage" and self.with_usage:
            future = self.usage = submit(usage_of, self.impl, env, self.home)
        if future is not None:
            self.futures.add(future)

    def _timed(self, what: str, probe, *args):
        """Run a probe; its seconds are its processes' own, not its wait for a slot."""
        start, waited = time.monotonic(), self.slots.waited()
        try:
            return probe(*args)
        finally:
            queued = self.slots.waited() - waited
            self.seconds[what] = round(time.monotonic() - start - queued, 3)

    def entry(self) -> dict:
        impl = self.impl
        entry = {
            "key": impl.key,
            "skill": impl.skill,
            "binary": impl.binary,
            "version": self.version.result(),
            "path": self.launch.path,
            "authenticated": auth_of(impl, self.auth.result() if self.auth else None),
            "supports": list(impl.supports),
            "models": models_of(
                impl, self.models.result() if self.models else None, self.env, self.home
            ),
        }
        if self.usage is not None:
            entry["usage"] = self.usage.result()
        return entry


class _CtrlC:
    """Ctrl-C while probes run: kill them all at once, and stop where it is safe to.

    KeyboardInterrupt raised at any point of the waiting could leave a lock of
    concurrent.futures held and the threads waiting on it forever; instead,
    while discovery runs on the main thread with Python's own SIGINT handler
    in place, SIGINT cancels the probes (which ends every wait) and the
    KeyboardInterrupt is raised from `check()`.
    """

    def __init__(self, runner: Slots) -> None:
        self.runner = runner
        self.hit = False
        self.previous = None

    def _on_sigint(self, signum, frame) -> None:
        self.hit = True
        self.runner.cancel()

    def __enter__(self) -> _CtrlC:
        if (
            threading.current_thread() is threading.main_thread()
            and signal.getsignal(signal.SIGINT) is signal.default_int_handler
        ):
            self.previous = signal.signal(signal.SIGINT, self._on_sigint)
        return self

    def __exit__(self, *exc) -> None:
        if self.previous is not None:
            signal.signal(signal.SIGINT, self.previous)

    def check(self) -> None:
        if self.hit:
            raise KeyboardInterrupt


def _answered(pending: list[_Pending], ctrl_c: _CtrlC):
    """Each CLI's entry as soon as all of its probes are done."""
    waiting = list(pending)
    while waiting:
        wait(set().union(*(probes.futures for probes in waiting)), return_when=FIRST_COMPLETED)
        ctrl_c.check()
        for probes in [p for p in waiting if all(f.done() for f in p.futures)]:
            waiting.remove(probes)
            yield probes.impl.key, probes.entry()


def discover(
    with_usage: bool = False,
    env: dict[str, str] | None = None,
    platform: str | None = None,
    only: set[str] | None = None,
    progress=None,
    slots: int | None = None,
    seconds: dict | None = None,
) -> dict:
    """The delegate-discover.v1 report for this machine (`only`: just these keys).

    `seconds`, when given, receives each probed CLI's probe times.

    `progress`, when given, is called with each CLI's entry as it is ready.
    `slots`: how many probes may run at once (default: probe_slots()).
    Interrupted (Ctrl-C), every probe still running is killed and no other
    starts before the KeyboardInterrupt goes on.
    """
    env = dict(os.environ if env is None else env)
    # Command Code updates itself (a detached `npm install -g`) whenever it starts.
    env.setdefault("COMMANDCODE_SKIP_UPDATES", "1")
    platform = platform or sys.platform
    home = env.get("HOME") or os.path.expanduser("~")
    wanted = [impl for impl in registry.IMPLEMENTERS if only is None or impl.key in only]
    launches = {impl.key: locate(impl, env, platform, home) for impl in wanted}
    found = [impl for impl in wanted if launches[impl.key] is not None]
    runner = Slots(slots or probe_slots())
    entries: dict[str, dict] = {}
    with _CtrlC(runner) as ctrl_c:
        # A thread for each probe (at most four per CLI); Slots bounds the processes.
        pool = ThreadPoolExecutor(max_workers=max(1, 4 * len(found)))
        try:
            pending = [
                _Pending(impl, launches[impl.key], env, home, with_usage, pool, runner)
                for impl in found
            ]
            for what in _Pending.ORDER:
                for probes in pending:
                    probes.start(what)
            for key, entry in _answered(pending, ctrl_c):
                entries[key] = entry
                if progress is not None:
                    progress(entry)
            if seconds is not None:
                seconds.update({probes.impl.key: dict(probes.seconds) for probes in pending})
        except BaseException:
            runner.cancel()
            raise
        finally:
            pool.shutdown(wait=True, cancel_futures=True)
    ctrl_c.check()
    missing = [
        {"key": impl.key, "binary": impl.binary, "skill": impl.skill}
        for impl in wanted
        if launches[impl.key] is None
    ]
    discovered = [entries[impl.key] for impl in found]
    return {"version": registry.DISCOVER_VERSION, "discovered": discovered, "missing": missing}


def discover_cached(
    *,
    with_usage: bool = False,
    only: set[str] | None = None,
    fresh: bool = False,
    progress=None,
    env: dict[str, str] | None = None,
) -> tuple[dict, dict]:
    """The report, answering from the cache (discovercache.py) what has not changed.

    Returns (report, details): details holds `cached` and `probed` keys and the
    probe times (`seconds`) of what was probed now. Session usage is always
    read afresh (directory listings only).
    """
    from . import discovercache as cache

    env = dict(os.environ if env is None else env)
    home = env.get("HOME") or os.path.expanduser("~")
    wanted = [impl for impl in registry.IMPLEMENTERS if only is None or impl.key in only]
    launches = {impl.key: locate(impl, env, sys.platform, home) for impl in wanted}
    remembered = {} if fresh else cache.load(env)
    now = time.time()
    reused: dict[str, dict] = {}
    for impl in wanted:
        launch = launches[impl.key]
        hit = (
            None
            if launch is None
            else cache.fresh_entry(remembered, impl.key, launch.path, env, now)
        )
        if hit is not None and hit["entry"].get("path") == launch.path:
            reused[impl.key] = dict(hit["entry"])
            if progress is not None:
                progress(reused[impl.key])
    to_probe = {impl.key for impl in wanted if launches[impl.key] is not None} - set(reused)
    seconds: dict[str, dict] = {}
    probed: dict[str, dict] = {}
    if to_probe:
        report = discover(env=env, only=to_probe, progress=progress, seconds=seconds)
        probed = {entry["key"]: entry for entry in report["discovered"]}
        try:
            cache.store(
                {key: {"entry": entry, "path": entry["path"], "seconds": seconds.get(key)}
                 for key, entry in probed.items()},
                env,
            )  # fmt: skip
        except Exception:
            pass
    discovered = []
    for impl in wanted:
        entry = reused.get(impl.key) or probed.get(impl.key)
        if entry is None:
            continue
        if with_usage:
            entry = {**entry, "usage": usage_of(impl, env, home)}
        discovered.append(entry)
    missing = [
        {"key": impl.key, "binary": impl.binary, "skill": impl.skill}
        for impl in wanted
        if launches[impl.key] is None
    ]
    report = {"version": registry.DISCOVER_VERSION, "discovered": discovered, "missing": missing}
    details = {"cached": sorted(reused), "probed": sorted(probed), "seconds": seconds}
    return report, details
