"""The `delegate-discover.v1` report: every CLI's probes, side by side, and the cached answer.

discover() probes the CLIs found on this machine, a few processes at a time,
and stops them all at Ctrl-C; discover_cached() answers from the cache
(cache.py) what has not changed and probes the rest.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait

from .. import registry
from ..registry import Implementer
from .answers import auth_of, models_of, version_of
from .locate import Launch, locate
from .probing import Slots, probe_slots, run_probe
from .usage import usage_of


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
        # Only the probes still running: a finished one would end every wait at once.
        running = {f for probes in waiting for f in probes.futures if not f.done()}
        if running:
            wait(running, return_when=FIRST_COMPLETED)
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
    """The report, answering from the cache (cache.py) what has not changed.

    Returns (report, details): details holds `cached` and `probed` keys and the
    probe times (`seconds`) of what was probed now. Session usage is always
    read afresh (directory listings only).
    """
    from . import cache

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
