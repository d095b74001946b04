"""The relay engine: one run of one implementer, from command line to result.json.

    (signals watched from here)
    configure.py   parse flags → [--continue] → [worktree] → apply the lane
                   → check options → read the brief
    prepare.py     the run directory and its record in the store (storing.py)
                   → snapshot the work tree → [read-only: sandbox, tripwire]
    launch.py      [--setup] → readiness → version preflight
    supervise.py   launch → stream, watchdog, signals → end every process of
                   the run → snapshot again
    finish.py      result.json, the store's record of the end, the summary

The relay is the child subreaper of everything it starts, so no process of
a run outlives it, whatever session or group it moved to (isolation/procgroup.py).
Which machine a run goes to is chosen above this (skillscripts/relay.py):
a --host run is remote/dispatch.py's.

Exit codes: 2 usage error (nothing written); 127 implementer missing; 124
version preflight hung; 128+n killed by signal n (the relay's own, when
aborted); otherwise the implementer's code, with 0 forced to 1 for a run
that did not succeed.
"""

from __future__ import annotations

import sys

from ..isolation import linux
from .adapter import Adapter, State
from .child import RelaySignals
from .console import say
from .options import HelpRequested, Usage
from .report import help_text
from .rundir import RunDir
from .supervise import StderrTail


class Relay:
    """One relay invocation for one adapter: the run's state, shared by the stages."""

    def __init__(self, adapter: Adapter) -> None:
        self.adapter = adapter
        self.opts: dict = {}
        self.defaults: dict = {}
        self.typed: list[str] = []
        self.lane_cwd: str | None = None
        self.lane_dials: dict = {}
        self.signals: RelaySignals | None = None
        self.run: RunDir | None = None
        self.state: State | None = None
        self.version: str | None = None
        self.tripwire = None
        self.tail = StderrTail()
        self.summary_printed = False
        self.ticker = None
        self.worktree = None
        #: False for the worktree a --continue run goes on in (another run made it).
        self.worktree_owned = True
        #: The run a --continue run resumes (its id in the store).
        self.previous_run: str | None = None
        #: A --continue of a read-only run: the continuation is read-only too.
        self.continues_read_only = False
        #: The worktree record of a --worktree run that never launched (its tree is removed).
        self.dropped_worktree: dict | None = None
        #: The run's record in the store (runstore/record.py), once the run directory exists.
        self.record = None
        #: The run's change record (snapshots/changes.py), when the work tree is in git.
        self.changes = None
        self.changes_field: tuple[dict | None, str | None] | None = None
        #: `git status --porcelain` started as the run settled (gitstate.TouchedFiles).
        self.touched = None
        self.sandbox = None
        #: Whether the run is to be confined (relay/confine.py), once configured.
        self.confined = False
        self.cgroup: str | None = None
        #: Moves the relay into the run's cgroup and out again (isolation/cgrouphost.py).
        self.cgroup_host = None
        self.settled = True
        self.paths = None
        self.launched = False
        self.repeated: bool | None = None
        self.fresh_names: list[str] = []
        #: Artifacts written after the run directory was prepared (result, final, patch, logs).
        self.wrote: set[str] = set()
        self.setup_outcome: dict | None = None
        self.check_outcome: dict | None = None
        self.deadline: float | None = None
        #: The implementer's command line as launched (before any sandbox prefix).
        self.implementer_argv: list[str] | None = None
        #: Set by remote/agent.py for a run from another machine: the worktree it
        #: made, and the lane as resolved where the run was dispatched.
        self.prepared_worktree = None
        self.lane_override: dict | None = None
        #: A --host run's id, reserved in the run store before its record is written
        #: (the branch there and here is named for it).
        self.reserved_id: str | None = None

    def run_id(self) -> str | None:
        return self.record.id if self.record is not None else None

    def stopping(self) -> bool:
        return bool(self.signals.received)

    def cgroup_for_child(self) -> str | None:
        """The run's cgroup for a child about to start, once the relay's own move has ended."""
        if self.cgroup_host is not None:
            self.cgroup_host.settle()
        return self.cgroup

    def release_cgroup(self) -> None:
        """Remove the run's cgroup, the relay out of it first (it stays while processes remain)."""
        if self.cgroup is None:
            return
        if self.cgroup_host is not None:
            self.cgroup_host.release()
        linux.cgroup_remove(self.cgroup)

    # ------------------------------------------------------------ the stages

    def main(self, argv: list[str], remote=None) -> int:
        """Configure, then dispatch here (or through `remote` for a --host run)."""
        # Signals are watched before anything is made (a worktree, a run
        # directory): one that arrives at any point ends in a result.
        self.signals = RelaySignals()
        self.signals.install()
        try:
            try:
                brief = self.configure(argv)
            except HelpRequested:
                sys.stdout.write(help_text(self.adapter))
                sys.stdout.flush()
                return 0
            except Usage as problem:
                say(str(problem))
                return 2
            if self.opts["dryRun"]:
                from .dryrun import dry_run

                return dry_run(self, brief)
            if self.opts["host"]:
                if remote is None:
                    say("--host runs go through the relay script or `delegate relay`")
                    return 2
                return remote(self, brief, argv)
            return self.dispatch(brief)
        finally:
            self.signals.uninstall()

    def configure(self, argv: list[str]) -> str:
        from .configure import configure

        return configure(self, argv)

    def dispatch(self, brief: str) -> int:
        """Run the implementer here; whichever way the run ends, its cgroup goes with it
        (unless processes of the run are still in it)."""
        try:
            return self._dispatch(brief)
        finally:
            self.release_cgroup()

    def _dispatch(self, brief: str) -> int:
        from . import launch, prepare
        from .supervise import supervise

        adapter, opts = self.adapter, self.opts
        stopped = prepare.open_run(self, brief)
        if stopped is not None:
            return stopped
        if self.signals.received:
            return launch.aborted_before_dispatch(self, during="before the launch")
        linux.become_subreaper()
        if opts["setup"] is not None:
            stopped = launch.run_setup(self)
            if stopped is not None:
                return stopped
        prepare.begin_changes(self)
        env = adapter.launch_env(opts)
        if self.record is not None:
            from ..runstore.record import TOKEN_ENV

            env[TOKEN_ENV] = self.record.get("token")
        launcher = adapter.launcher(opts, env)
        unconfined_env = env
        if self.confined:
            from . import confine

            confine.arm(self, env, launcher)
            env = self.sandbox.child_env(env)
        if adapter.read_only(opts):
            prepare.arm_read_only(self)
        try:
            if launcher is None:
                return launch.unavailable(self)
            problem = None if opts["skipPreflight"] else launch.readiness(self, launcher, env)
            if problem is not None:
                return launch.not_ready(self, problem)
            stopped = launch.preflight(self, launcher, env)
            if stopped is not None:
                return stopped
            if self.sandbox is not None and not self.sandbox.enforced:
                env = unconfined_env  # bwrap could not start after all (launch.sandbox_shown)
            return supervise(self, launcher, env, brief)
        finally:
            if self.sandbox is not None:
                self.sandbox.release()
