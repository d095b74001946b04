"""The relay engine: one run of one implementer, from command line to result.json.

    (signals watched from here) parse flags → [worktree] → apply the lane
    → check options → read the brief → prepare the run directory and its
    private record → snapshot the work tree → [read-only: sandbox, tripwire
    baseline] → version preflight → launch → supervise (watchdog, signals)
    → end every process of the run → snapshot again → result + summary

The relay is the child subreaper of everything it starts, so no process of
a run outlives it, whatever session or group it moved to (procgroup.py).

Exit codes: 2 usage error (nothing written); 127 implementer missing; 124
version preflight hung; 128+n killed by signal n (the relay's own, when
aborted); otherwise the implementer's code, with 0 forced to 1 for a run
that did not succeed.
"""

from __future__ import annotations

import os
import signal
import sys
import time

from .. import registry
from ..errors import UserError
from ..isolation import linux
from ..jsjson import js_trim
from ..reading import read_limited, read_stream_limited
from ..snapshots.gitstate import Tripwire, touched_files
from .adapter import Adapter, State
from .child import Child, RelaySignals, is_missing_binary, signal_name
from .options import (
    HelpRequested,
    Usage,
    check_directory,
    check_flag_tokens,
    parse,
    refuse_option_like,
)
from .progress import Ticker
from .report import help_text, summary
from .rundir import FINAL, RESERVE, RESULT, RunDir, default_out_dir, iso_now
from .scan import LineScanner, ObjectScanner, Utf8Stream

PREFLIGHT_CAP_S = 10.0
#: Option fields that decide what an implementer may write: on a read-only lane,
#: an explicit flag that changes one of them and makes the run a write run is refused.
PERMISSION_FIELDS = frozenset(
    {
        "readOnly", "sandbox", "sandboxConfigured", "dangerouslySkipPermissions", "planMode",
        "autoApprove", "agent", "auto", "toolsAll", "autonomy", "fullAccess", "planOnly",
        "enabledTools", "disabledTools", "approve", "allowAllTools", "force", "permissionMode",
        "mode", "disallowedTools", "permissions", "architect", "skipTrust",
    }
)  # fmt: skip
#: Seconds an aborted tree gets between SIGTERM and SIGKILL.
ABORT_GRACE_ENV = "DELEGATE_RELAY_ABORT_GRACE"
DEFAULT_ABORT_GRACE_S = 2.0
#: Seconds between the watchdog's SIGTERM and its SIGKILL to the whole tree.
KILL_GRACE_ENV = "DELEGATE_RELAY_KILL_GRACE"
DEFAULT_KILL_GRACE_S = 10.0
TAIL_LINES = 20
_TAIL_PARTIAL_MAX = 65536
_PROBE_OUTPUT_MAX = 1 << 20
STDERR_NAME = "stderr.txt"
#: The largest brief a relay reads; relays whose CLI takes less say so themselves.
BRIEF_LIMIT = 64 * 1024 * 1024


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


def _write_stderr(data: bytes) -> None:
    try:
        os.write(2, data)
    except OSError:
        pass


def _say(line: str) -> None:
    _write_stderr(f"relay: {line}\n".encode("utf-8", errors="replace"))


class Relay:
    """One relay invocation for one adapter."""

    def __init__(self, adapter: Adapter) -> None:
        self.adapter = adapter
        self.opts: dict = {}
        self.signals: RelaySignals | None = None
        self.run: RunDir | None = None
        self.state: State | None = None
        self.version: str | None = None
        self.tripwire: Tripwire | None = None
        self.tail = StderrTail()
        self.summary_printed = False
        self.ticker: Ticker | None = None
        self.worktree = None
        #: False for the worktree a --continue run goes on in (another run made it).
        self.worktree_owned = True
        #: The run a --continue run resumes (its private record's id).
        self.previous_run: str | None = None
        #: The worktree record of a --worktree run that never launched (its tree is removed).
        self.dropped_worktree: dict | None = None
        #: The run's private record (record.py), once the run directory exists.
        self.record = None
        #: The run's change record (changes.py), when the work tree is in git.
        self.changes = None
        self.changes_field: tuple[dict | None, str | None] | None = None
        self.sandbox = None
        self.cgroup: str | None = None
        self.settled = True
        self.paths = None
        self.launched = False
        self._repeated: bool | None = None
        self._fresh_names: list[str] = []
        #: The implementer's command line as launched (before any sandbox prefix).
        self.implementer_argv: list[str] | None = None
        #: Set by remote/agent.py for a run from another machine: the worktree it
        #: made, and the lane as resolved where the run was dispatched.
        self.prepared_worktree = None
        self.lane_override: dict | None = None

    # ------------------------------------------------------------ configuring

    def main(self, argv: list[str]) -> int:
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
                _say(str(problem))
                return 2
            if self.opts["dryRun"]:
                return self.dry_run(brief)
            if self.opts["host"]:
                from ..remote.dispatch import dispatch

                return dispatch(self, brief, argv)
            return self.dispatch(brief)
        finally:
            self.signals.uninstall()

    def configure(self, argv: list[str]) -> str:
        adapter = self.adapter
        opts = {
            "lane": None,
            "laneSource": None,
            "brief": None,
            "cd": os.getcwd(),
            "outDir": None,
            "timeout": adapter.default_timeout,
            "worktree": False,
            "host": None,
            "includeUncommitted": False,
            "continueRun": None,
            "dryRun": False,
            "skipPreflight": False,
            "setup": None,
            "check": None,
        }
        if adapter.has_model_flag:
            opts["model"] = None
        opts.update(adapter.defaults())
        self._defaults = {k: list(v) if isinstance(v, list) else v for k, v in opts.items()}
        table = {flag.name: flag for flag in adapter.flag_table()}
        given: list[tuple[str, str]] = []
        self._typed: list[str] = []
        flagged = parse(argv, table, opts, given, self._typed)
        if opts["continueRun"]:
            self._continue_from(opts)
        # Lanes come from where the user dispatches: with --worktree, the source,
        # whose config and approval count whether or not the config is committed;
        # a run in one of our worktrees (--continue, a review) takes its source's.
        self._lane_cwd = _lane_home(opts["cd"])
        if opts["outDir"] and not opts["dryRun"] and os.path.isdir(opts["outDir"]):
            from ..runs.landing import unlanded_reason

            held = unlanded_reason(opts["outDir"])
            if held is not None:
                raise Usage(held)
        if opts["worktree"] and not opts["dryRun"] and not opts["host"]:
            self._enter_worktree(opts)
        try:
            brief = self._check(opts, table, flagged, given)
        except Usage:
            self._drop_worktree()
            raise
        self.opts = opts
        return brief

    def _check(self, opts: dict, table: dict, flagged: set[str], given: list) -> str:
        """Apply the lane, check every option, read the brief. Raises Usage."""
        adapter = self.adapter
        if opts["lane"]:
            self._apply_lane(opts, flagged)
        adapter.validate(opts)
        if opts["lane"]:
            self._hold_read_only_lane(opts, table)
        if opts["setup"] is not None and not opts["worktree"] and not opts["host"]:
            raise Usage("--setup runs in the run's new worktree; add --worktree")
        if opts["includeUncommitted"] and not opts["host"]:
            raise Usage("--include-uncommitted goes with --host (a local --worktree run "
                        "starts from HEAD)")  # fmt: skip
        if opts["host"] and opts["continueRun"]:
            raise Usage("--continue resumes where that run ran; leave out --host")
        if opts["check"] is not None and adapter.read_only(opts):
            raise Usage("--check runs a command that may write; a read-only run takes none")
        for flag in ("setup", "check"):
            if opts[flag] is not None and not opts[flag].strip():
                raise Usage(f"--{flag} needs a command")
        check_flag_tokens(table, opts)
        check_directory(opts["cd"])
        if opts["outDir"] and os.path.exists(opts["outDir"]) and not os.path.isdir(opts["outDir"]):
            raise Usage(f"--out-dir is not a directory: {opts['outDir']}")
        if opts["outDir"]:
            adapter.check_out_dir(opts["outDir"])
        brief = read_brief(opts.get("brief"))
        adapter.check_brief(opts, brief)
        refuse_option_like(given)
        return brief

    def _continue_from(self, opts: dict) -> None:
        """Resume the session of an earlier run, where it ran. Raises Usage."""
        from ..runs.view import show

        adapter = self.adapter
        ref = opts["continueRun"]
        for flag in ("--cd", "--worktree", "--session", "--resume-last", "--conversation",
                     "--resume", "--continue-last"):  # fmt: skip
            if flag in self._typed:
                raise Usage(f"--continue {ref} resumes where that run ran; leave out {flag}")
        try:
            run = show(ref)
        except UserError as problem:
            raise Usage(f"--continue {ref}: {problem}") from None
        status = run.status
        if status in ("running", "orphaned"):
            raise Usage(f"--continue {ref}: that run is still {status}; wait for it first")
        result = run.result or {}
        implementer = run.marker.get("implementer") or result.get("tool")
        if implementer != adapter.key:
            skill = registry.BY_KEY[implementer].skill if implementer in registry.BY_KEY else "?"
            raise Usage(
                f"--continue {ref}: that run was {implementer} (use {skill}); "
                f"this relay is {adapter.key}"
            )
        session = result.get(adapter.session_field) if adapter.session_field else None
        if not adapter.resumable or (not session and not adapter.latest_field):
            raise Usage(f"--continue {ref}: that run left no session id to resume")
        adapter.resume_options(opts, session if isinstance(session, str) else None)
        workdir = result.get("workdir") or run.marker.get("workdir")
        if not isinstance(workdir, str) or not os.path.isdir(workdir):
            raise Usage(f"--continue {ref}: the folder that run worked in is gone ({workdir})")
        opts["cd"] = workdir
        if not opts["lane"] and isinstance(run.marker.get("lane"), str):
            opts["lane"] = run.marker["lane"]
        self.previous_run = run.id
        tree = run.private.get("worktree") if run.private is not None else None
        if isinstance(tree, dict) and not tree.get("removed") and os.path.isdir(tree["path"]):
            from .worktree import Worktree

            self.worktree = Worktree(
                tree["path"], tree["branch"], tree["base"], tree["source"], workdir,
                tree.get("sourceUncommitted") or 0,
            )  # fmt: skip
            self.worktree.git_dir, self.worktree.gitfile = tree.get("gitDir"), tree.get("gitfile")
            self.worktree_owned = False

    def _enter_worktree(self, opts: dict) -> None:
        """Move the run into a new worktree of --cd's repository. Raises Usage.

        Lanes are resolved in the source (see configure); the worktree's own
        project config carries the source's approval when its bytes are the
        approved ones, for what runs inside it.
        """
        from .worktree import WorktreeError, create

        if self.prepared_worktree is not None:  # made for a run from another machine
            self.worktree = self.prepared_worktree
            opts["cd"] = self.worktree.cd
            return
        check_directory(opts["cd"])
        try:
            self.worktree = create(opts["cd"])
        except WorktreeError as problem:
            raise Usage(str(problem)) from None
        opts["cd"] = self.worktree.cd

    def _drop_worktree(self) -> None:
        """Remove a worktree this relay made for a run that did not start."""
        if self.worktree is not None and self.worktree_owned:
            from .worktree import remove

            tree = self.worktree
            remove(tree.source, tree.common_dir or tree.source, tree.path, tree.branch)
            self.worktree = None

    def _hold_read_only_lane(self, opts: dict, table: dict) -> None:
        """A read-only lane is a policy: no flag may turn its runs into write runs. Raises Usage.

        (The Node relays let an explicit flag win over every lane dial.)
        """
        adapter = self.adapter
        lane_only = {k: list(v) if isinstance(v, list) else v for k, v in self._defaults.items()}
        lane_only.update(lane=opts["lane"], cd=opts["cd"])
        from .. import lanes

        lanes.merge_dials(
            lane_only,
            self._lane_dials,
            set(),
            extra_blockers=dict(adapter.lane_blockers),
            apply=adapter.apply_dial,
        )
        try:
            adapter.validate(lane_only)
        except Usage:
            return
        if not adapter.read_only(lane_only) or adapter.read_only(opts):
            return
        offenders = []
        for name in dict.fromkeys(self._typed):
            flag = table[name]
            fields = {*([flag.dest] if flag.dest else []), *flag.sets} & PERMISSION_FIELDS
            if any(opts.get(field) != lane_only.get(field) for field in fields):
                offenders.append(name)
        named = " ".join(offenders) or "the flags given"
        raise Usage(
            f"lane {opts['lane']} is read-only, and {named} would let {adapter.display} "
            "write; a read-only lane is a policy: drop the flag, or dispatch through a lane "
            "that may write"
        )

    def _apply_lane(self, opts: dict, flagged: set[str]) -> None:
        from .. import lanes

        try:
            resolved = self.lane_override or lanes.resolve(
                self._lane_cwd, opts["lane"], self.adapter.key
            )
        except UserError as problem:
            raise Usage(str(problem)) from None
        opts["laneSource"] = resolved["source"]
        self._lane_dials = resolved["dials"]
        self.adapter.refuse_dials(opts["lane"], resolved["dials"])
        lanes.merge_dials(
            opts,
            resolved["dials"],
            flagged,
            extra_blockers=dict(self.adapter.lane_blockers),
            apply=self.adapter.apply_dial,
        )

    # ------------------------------------------------------------ the run

    def dry_run(self, brief: str) -> int:
        """Print what a dispatch would launch, and why it would or would not; launch nothing."""
        from ..isolation import sandbox
        from ..jsjson import stringify
        from .rundir import default_root

        adapter, opts = self.adapter, self.opts
        env = adapter.launch_env(opts)
        launcher = adapter.launcher(opts, env)
        out_dir = opts["outDir"] or os.path.join(default_root(), "<new run directory>")
        run = RunDir(out_dir, iso_now(), brief)
        binary = None if launcher is None else _which(launcher[0], env)
        argv = None
        if launcher is not None:
            argv = mask_brief([*launcher, *adapter.build_argv(opts, run)], brief)
        read_only = adapter.read_only(opts)
        report = {
            "dryRun": True,
            "implementer": adapter.key,
            "lane": opts["lane"],
            "laneSource": opts["laneSource"],
            "workdir": opts["cd"],
            "worktree": bool(opts["worktree"]) or self.worktree is not None,
            "outDir": opts["outDir"],
            "binary": binary,
            "implementerArgv": argv,
            "briefVia": adapter.brief_via if adapter.brief_via == "stdin" else "argv",
            "timeout": opts["timeout"],
            "sessionRequested": adapter.session_requested(opts),
            "previousRun": self.previous_run,
            "readOnly": read_only,
        }
        if read_only:
            from ..gitmeta import repo_paths
            from ..runstore.record import state_dir

            paths = repo_paths(opts["cd"])
            ro = [opts["cd"], state_dir(), paths.toplevel, paths.git_dir, paths.common_dir]
            plan = sandbox.plan(
                read_only=[p for p in ro if p],
                writable=[_temp_dir(env), *adapter.sandbox_writable(opts)],
                cwd=opts["cd"],
                env=env,
                refused=adapter.sandbox_refusal(opts, env),
            )
            report["readOnlyRoute"] = adapter.read_only_route or None
            report["readOnlyEnforced"] = plan.enforced
            report["readOnlyUnenforced"] = plan.reason
        if binary is None:
            report["problem"] = f"`{adapter.binary}` not found on PATH. {adapter.install_hint}"
        sys.stdout.write(stringify(report, 2) + "\n")
        sys.stdout.flush()
        return 0

    def dispatch(self, brief: str) -> int:
        adapter, opts = self.adapter, self.opts
        started = iso_now()
        try:
            out_dir = opts["outDir"] or default_out_dir(opts["cd"], started)
        except OSError as problem:
            _say(f"cannot prepare run artifacts: {problem}")
            return self._not_started()
        self.run = RunDir(out_dir, started, brief)
        self.state = adapter.new_state(opts)
        self.state.run = self.run
        self._make_record(out_dir, started)
        self.state.scratch = self.record.dir if self.record is not None else None
        fresh = self._fresh_artifacts(brief)
        foreign = self.run.foreign_artifact({*fresh, RESULT, FINAL, RESERVE})
        if foreign is not None:
            _say(
                f"--out-dir {out_dir} already holds {os.path.basename(foreign)}, which no relay "
                f"run wrote; move {foreign} aside or choose a new --out-dir"
            )
            return self._not_started()
        try:
            self.run.prepare(fresh)
        except OSError as problem:
            _say(f"cannot prepare run artifacts: {problem}")
            return self._not_started()
        self.run.reserve()
        if opts["outDir"]:
            from ..runs.view import remember

            remember(self.run.path)
        run_id = f" · run id {self.record.id}" if self.record else ""
        _say(f"{adapter.label} run started · {self.run.path} · relay pid {os.getpid()}{run_id}")
        if self.worktree is not None:
            self._say_worktree()
        if self.signals.received:
            return self._aborted_before_dispatch(during="before the launch")
        linux.become_subreaper()
        if opts["setup"] is not None:
            outcome = self._setup()
            if outcome is not None:
                return outcome
        self._begin_changes()
        env = adapter.launch_env(opts)
        if self.record is not None:
            from ..runstore.record import TOKEN_ENV

            env[TOKEN_ENV] = self.record.get("token")
        if adapter.read_only(opts):
            self._arm_read_only(env)
        launcher = adapter.launcher(opts, env)
        if launcher is None:
            return self._unavailable()
        problem = None if opts["skipPreflight"] else self._readiness(launcher, env)
        if problem is not None:
            return self._not_ready(problem)
        outcome = self._preflight(launcher, env)
        if outcome is not None:
            return outcome
        return self._supervise(launcher, env, brief)

    def _setup(self) -> int | None:
        """Run --setup in the new worktree; an exit code when the run must stop here."""
        from .hooks import SETUP_LOG, run_shell

        command, log = self.opts["setup"], self.run.file(SETUP_LOG)
        _say(f"setup: {command}")
        self.setup_outcome = run_shell(command, self.opts["cd"], log, self._stopping)
        if self.signals.received:
            return self._aborted_before_dispatch(during="during --setup")
        code = self.setup_outcome["exitCode"]
        if code == 0:
            return None
        tree = self.worktree.path if self.worktree is not None else self.opts["cd"]
        problem = (
            f"--setup {command!r} exited {code}; its output is in {log}; "
            f"the worktree is kept for inspection at {tree}"
        )
        self._finish("failed", 1, None, tail=self.setup_outcome["tail"], error=problem, final="")
        return 1

    def _stopping(self) -> bool:
        return bool(self.signals.received)

    def _check_after(self, result: dict) -> None:
        """Run --check where the implementer worked, once its change is recorded."""
        from .hooks import CHECK_LOG, run_shell

        command = self.opts.get("check")
        if command is None or result["status"] != "completed" or not self.settled:
            return
        if getattr(self, "check_outcome", None) is None:
            _say(f"check: {command}")
            self.check_outcome = run_shell(
                command, self.opts["cd"], self.run.file(CHECK_LOG), self._stopping
            )
        result["check"] = self.check_outcome

    def _make_record(self, out_dir: str, started: str) -> None:
        """The run's private record (record.py); a run goes on without one, unrecorded."""
        from ..runs.view import process_start
        from ..runstore import record

        worktree = None
        if self.worktree is not None:
            tree = self.worktree
            worktree = {**tree.record(), "gitDir": tree.git_dir, "gitfile": tree.gitfile}
        try:
            self.record = record.new(
                out_dir,
                implementer=self.adapter.key,
                lane=self.opts["lane"],
                workdir=self.opts["cd"],
                startedAt=started,
                relay={"pid": os.getpid(), "start": process_start(os.getpid())},
                worktree=worktree,
                previousRun=self.previous_run,
            )
        except OSError as problem:
            _say(f"cannot write the run's private record: {problem}; runs cannot follow it")
            return
        self.cgroup = linux.cgroup_create(self.record.id)
        if self.cgroup:
            self._update_record(cgroup=self.cgroup)

    def _update_record(self, **fields) -> None:
        if self.record is None:
            return
        try:
            self.record.update(**fields)
        except (OSError, UserError):
            pass  # the record keeps what it had; the result still says everything

    def _begin_changes(self) -> None:
        """Snapshot the work tree before the implementer can touch it."""
        from ..gitmeta import repo_paths

        self.paths = repo_paths(self.opts["cd"])
        if self.paths.toplevel is None or self.record is None:
            return
        from ..snapshots.changes import ChangeRecord

        self.changes = ChangeRecord.for_run(
            self.paths, self.record.dir, [self.run.file(name) for name in self._artifact_names()]
        )
        self.changes.begin()
        self.state.changes = self.changes
        if self.changes.before is not None:
            self._update_record(changes=self._changes_entry())

    def _changes_entry(self) -> dict:
        """The change record's trees and where they were taken, for the private record."""
        paths = self.paths
        return {
            "before": self.changes.before,
            "after": self.changes.after,
            "workTree": paths.toplevel,
            "gitDir": paths.git_dir,
            "commonDir": paths.common_dir,
        }

    def _arm_read_only(self, env: dict[str, str]) -> None:
        """The sandbox (sandbox.py) and the tripwire baseline of a read-only run."""
        from ..isolation import sandbox
        from ..runstore.record import state_dir
        from ..snapshots.gitprint import RepoSpec
        from ..snapshots.gitstate import Excluded

        paths = self.paths
        adapter, opts = self.adapter, self.opts
        read_only = [opts["cd"], state_dir()]
        spec = None
        if paths.toplevel is not None:
            read_only += [paths.toplevel, paths.git_dir, paths.common_dir]
            spec = RepoSpec(
                paths.toplevel,
                paths.git_dir,
                paths.common_dir,
                own_branch=self.worktree.branch if self.worktree is not None else None,
                sibling_root=_worktrees_root(),
                cli_state=list(adapter.git_dir_state),
            )
        writable = [self.run.path, _temp_dir(env), *adapter.sandbox_writable(opts)]
        if paths.common_dir is not None:
            writable += [os.path.join(paths.common_dir, name) for name in adapter.git_dir_state]
        self.sandbox = sandbox.plan(
            read_only=read_only,
            writable=writable,
            cwd=opts["cd"],
            env=env,
            refused=adapter.sandbox_refusal(opts, env),
        )
        excluded = Excluded(self.changes.excluded if self.changes is not None else [])
        self.tripwire = Tripwire(
            spec, self.changes, excluded, enforced=self.sandbox.enforced is not None
        )

    def _not_started(self) -> int:
        """A run that stops before it starts: usage exit, and no worktree left behind."""
        self._drop_worktree()
        self._forget_record()
        return 2

    def _forget_record(self) -> None:
        """Remove the private record of a run that never wrote a result."""
        if self.record is None:
            return
        import shutil

        if self.cgroup:
            linux.cgroup_remove(self.cgroup)
        shutil.rmtree(self.record.dir, ignore_errors=True)
        self.record = None

    def _drop_unlaunched_worktree(self) -> None:
        """A --worktree run that never launched its implementer leaves no worktree behind."""
        if self.worktree is not None:
            self.dropped_worktree = {**self.worktree.record(), "removed": True}
            self._drop_worktree()
            self._update_record(worktree=self.dropped_worktree)

    def _say_worktree(self) -> None:
        tree = self.worktree
        _say(f"worktree {tree.path} · branch {tree.branch} from {tree.base[:12]}")
        if tree.source_changes:
            _say(
                f"{tree.source} has {tree.source_changes} uncommitted change(s); they are "
                f"not in the worktree, which starts from commit {tree.base[:12]}"
            )

    def _fresh_artifacts(self, brief: str) -> dict[str, bytes]:
        from ..runs.view import RUN_FILE, run_marker

        adapter, opts, run = self.adapter, self.opts, self.run
        marker = run_marker(
            adapter.key, opts["lane"], opts["cd"], run.path, run.started_at, run_id=self._run_id()
        )
        fresh = {RUN_FILE: marker, adapter.brief_name: brief.encode("utf-8", errors="replace")}
        if adapter.events_name:
            fresh[adapter.events_name] = b""
        if adapter.stderr_file:
            fresh[STDERR_NAME] = b""
        fresh.update(adapter.extra_artifacts(self.opts, self.run))
        self._fresh_names = list(fresh)
        return fresh

    # ------------------------------------------------------------ preflight

    def _readiness(self, launcher: list[str], env: dict[str, str]) -> str | None:
        """Why a dispatch would fail before it starts, from what is known already; or None.

        Missing sandbox tools, and a CLI the discover cache knows is signed out.
        Nothing here launches anything; --skip-preflight skips it.
        """
        adapter = self.adapter
        binary = _which(launcher[0], env)
        if binary is None:
            return None  # the preflight reports the implementer missing, first
        missing = [(tool, pkg) for tool, pkg in adapter.required_tools(self.opts)
                   if _which(tool, env) is None]  # fmt: skip
        if missing:
            tools = " and ".join(tool for tool, _ in missing)
            packages = " ".join(dict.fromkeys(pkg for _, pkg in missing))
            return (
                f"{adapter.display}'s shell sandbox needs {tools}, not found on PATH: install "
                f"{'it' if len(missing) == 1 else 'them'} (Debian/Ubuntu: sudo apt-get install "
                f"{packages}), or pass --skip-preflight to dispatch anyway"
            )
        from ..discovercache import known_signed_out

        seen = known_signed_out(adapter.key, binary, env)
        if seen is not None:
            login = adapter.impl.login or f"{adapter.binary} login"
            when = time.strftime("%H:%M", time.localtime(seen))
            return (
                f"{adapter.display} is signed out (delegate discover saw so at {when}); "
                f"sign it in ({login}), or pass --skip-preflight to dispatch anyway"
            )
        return None

    def _not_ready(self, problem: str) -> int:
        self._drop_unlaunched_worktree()
        self._finish("failed", 1, None, tail=[], error=problem, final="")
        _say(problem)
        return 1

    def _preflight(self, launcher: list[str], env: dict[str, str]) -> int | None:
        """Read the implementer's version; an exit code when the run must stop here."""
        adapter, opts = self.adapter, self.opts
        if self.signals.received:
            return self._aborted_before_dispatch()
        watchdog = adapter.watchdog_ms(opts)
        budget = PREFLIGHT_CAP_S if watchdog is None else min(watchdog / 1000, PREFLIGHT_CAP_S)
        ends = time.monotonic() + budget
        for attempt, args in enumerate(adapter.version_args(opts)):
            remaining = ends - time.monotonic()
            kind, code, out, err = self._probe([*launcher, *args], env, remaining)
            if kind == "ok":
                self.version = adapter.parse_version(out)
                return None
            if kind == "missing":
                return self._unavailable()
            if kind == "signal":
                return self._aborted_before_dispatch()
            last_try = attempt == len(adapter.version_args(opts)) - 1
            if kind == "failed" and not last_try:
                continue
            return self._preflight_failed(kind, code, err, int(budget * 1000))
        return None

    def _probe(
        self, argv: list[str], env: dict[str, str], seconds: float
    ) -> tuple[str, int | None, str, str]:
        if seconds <= 0:
            return "timeout", None, "", ""
        out, err = bytearray(), bytearray()

        def keep(buffer: bytearray, passthrough: bool):
            def take(data: bytes) -> None:
                if passthrough:
                    _write_stderr(data)
                if len(buffer) < _PROBE_OUTPUT_MAX:
                    buffer.extend(data)

            return take

        if self.sandbox is not None and self.sandbox.enforced:
            resolved = _which(argv[0], env)
            if resolved is None:
                return "missing", None, "", ""
            argv = self.sandbox.wrap([resolved, *argv[1:]])
        child = Child(
            argv,
            cwd=self.opts["cd"] if self.sandbox is not None and self.sandbox.enforced else None,
            env=env,
            stdin=None,
            on_stdout=keep(out, False),
            on_stderr=keep(err, True),
            signals=self.signals,
            cgroup=self.cgroup,
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

    def _preflight_failed(self, kind: str, code: int | None, err: str, budget_ms: int) -> int:
        adapter = self.adapter
        probe = adapter.probe_name(self.opts)
        if kind == "timeout":
            status, exit_code = "timeout", 124
            error = (
                f"{probe} preflight timed out after {budget_ms}ms; "
                f"{adapter.display} was not dispatched"
            )
        else:
            status, exit_code = "failed", code or 1
            with_exit = f" with exit {code}" if code is not None else ""
            error = f"{probe} preflight failed{with_exit}; {adapter.display} was not dispatched"
        tail = err.strip().split("\n")[-TAIL_LINES:] if err.strip() else []
        self._drop_unlaunched_worktree()
        self._finish(status, exit_code, None, tail=tail, error=error, final="")
        _say(error)
        return exit_code

    def _unavailable(self) -> int:
        adapter = self.adapter
        self._drop_unlaunched_worktree()
        error = adapter.unavailable_error or None
        self._finish(adapter.unavailable_status, 127, None, error=error, final="")
        _say(f"`{adapter.binary}` not found on PATH. {adapter.install_hint}")
        return 127

    def _aborted_before_dispatch(self, during: str | None = None) -> int:
        adapter = self.adapter
        signum = self.signals.first()
        name = signal_name(signum) or "SIGTERM"
        during = during or f"during the {adapter.binary} version preflight"
        error = f"the relay was killed by {name} {during}; {adapter.display} was not dispatched"
        self._drop_unlaunched_worktree()
        self._finish("aborted", 128 + signum, name, tail=[], error=error, final="")
        return 128 + signum

    # ------------------------------------------------------------ dispatch

    def _supervise(self, launcher: list[str], env: dict[str, str], brief: str) -> int:
        adapter, opts, run = self.adapter, self.opts, self.run
        argv = [*launcher, *adapter.build_argv(opts, run)]
        self.implementer_argv = mask_brief(argv, run.brief)
        if self.sandbox is not None and self.sandbox.enforced:
            resolved = _which(argv[0], env)
            if resolved is None:
                return self._unavailable()
            argv = self.sandbox.wrap([resolved, *argv[1:]])
        decoder = Utf8Stream()
        scanner = self._scanner()

        def on_stdout(data: bytes) -> None:
            run.append(adapter.events_name, data)
            if scanner is not None:
                scanner.feed(decoder.decode(data))

        ticker = self.ticker = Ticker(adapter.label)

        def on_stderr(data: bytes) -> None:
            ticker.clear()
            _write_stderr(data)
            run.append(STDERR_NAME, data)
            self.tail.feed(data)

        stdin = brief.encode("utf-8", errors="replace") if adapter.brief_via == "stdin" else None
        adapter.before_launch(self.state)
        child = Child(
            argv,
            cwd=opts["cd"],
            env=env,
            stdin=stdin,
            on_stdout=on_stdout,
            on_stderr=on_stderr,
            signals=self.signals,
            on_tick=ticker.tick,
            cgroup=self.cgroup,
        )
        try:
            child.start()
        except OSError as problem:
            child.close()
            if is_missing_binary(problem, opts["cd"]) and adapter.missing_at_launch_is_unavailable:
                return self._unavailable()
            return self._finish(
                "failed", 1, None, error=f"could not start {adapter.binary}: {problem}"
            )
        self.launched = True
        self._record_group(child)
        try:
            return self._watch(child, scanner, decoder)
        finally:
            child.close()
            run.close()

    def _record_group(self, child: Child) -> None:
        """Add the implementer's process group to run.json, for `runs` to find."""
        from ..runs.view import RUN_FILE, process_start, run_marker

        adapter, opts, run = self.adapter, self.opts, self.run
        marker = run_marker(
            adapter.key, opts["lane"], opts["cd"], run.path, run.started_at, group=child.pid,
            run_id=self._run_id(), argv=self.implementer_argv,
        )  # fmt: skip
        self._update_record(
            group={"pgid": child.pid, "start": process_start(child.pid)},
            implementerArgv=self.implementer_argv,
        )
        try:
            run.replace(RUN_FILE, marker)
        except OSError:
            pass  # the run goes on; `runs` then only knows the relay's pid

    def _scanner(self):
        parser = self.adapter.parser
        if parser is None:
            return None
        if parser == "text":
            return TextFeed(lambda text: self.adapter.on_text(self.state, text))

        def on_object(event: dict) -> None:
            self.adapter.on_event(self.state, event)

        return ObjectScanner(on_object) if parser == "objects" else LineScanner(on_object)

    def _watch(self, child: Child, scanner, decoder: Utf8Stream) -> int:
        watchdog = self.adapter.watchdog_ms(self.opts)
        deadline = None if watchdog is None else time.monotonic() + watchdog / 1000
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
            return self._abort(child, scanner, decoder)
        if fired:
            child.kill_tree()
        else:
            self._sweep(child)
        self._drain_scanner(scanner, decoder)
        self._settle()
        return self._closed(child, fired)

    def _settle(self) -> None:
        """Every process of the run is gone: take the second snapshot, drop the cgroup."""
        if self.changes is not None:
            self.changes.end()
            if self.changes.after is not None:
                self._update_record(changes=self._changes_entry())
        if self.cgroup:
            linux.cgroup_remove(self.cgroup)

    def _sweep(self, child: Child) -> None:
        """End what the implementer left running, before the verdict is taken."""
        left = child.sweep(grace_s(ABORT_GRACE_ENV, DEFAULT_ABORT_GRACE_S))
        if left:
            pids = ", ".join(str(pid) for pid in left)
            _say(f"ended {len(left)} process(es) {self.adapter.display} left running (pid {pids})")

    def _drain_scanner(self, scanner, decoder: Utf8Stream) -> None:
        if scanner is not None:
            scanner.feed(decoder.flush())
            scanner.finish()

    def _closed(self, child: Child, fired: bool) -> int:
        adapter, opts = self.adapter, self.opts
        exited = child.exited
        state = self.state
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
        if self.run.write_error is not None:
            name, problem = self.run.write_error
            succeeded, status, exit_code = False, "failed", 1
            error = (
                f"cannot record {name} in {self.run.path}: {problem.strerror or problem}; "
                f"{adapter.display} ran on unrecorded from there"
            )
        tail = None if succeeded else self.tail.snapshot()
        return self._finish(status, exit_code, exited.signal_name, tail=tail, error=error)

    def _abort(self, child: Child, scanner, decoder: Utf8Stream) -> int:
        signum = self.signals.first()
        name = signal_name(signum) or "SIGTERM"
        code = 128 + signum
        error = (
            f"the relay was killed by {name}; {self.adapter.label} was terminated with it — "
            "inspect the working tree before re-dispatching"
        )
        child.signal_tree(signal.SIGTERM)
        # A first result at once (a relay killed outright during the grace still
        # leaves one), with no verdict: processes of the run are still alive.
        self.settled = False
        self._finish("aborted", code, name, tail=self.tail.snapshot(), error=error)
        grace = grace_s(ABORT_GRACE_ENV, DEFAULT_ABORT_GRACE_S)
        child.pump(time.monotonic() + grace, watch_signals=False)
        child.processes().end(0, keep=child.pid)
        self._drain_scanner(scanner, decoder)
        self._settle()
        self.settled = True
        self._finish("aborted", code, name, tail=self.tail.snapshot(), error=error)
        return code

    # ------------------------------------------------------------ the result

    def _finish(
        self,
        status: str,
        exit_code: int,
        signal_: str | None,
        *,
        tail: list[str] | None = None,
        error: str | None = None,
        final: str | None = None,
    ) -> int:
        """Write result.json (again, if need be) and print the summary once."""
        adapter, run = self.adapter, self.run
        run.release()
        if final is None:
            final = adapter.final_message(self.state, run)
            if final and not adapter.child_writes_final:
                try:
                    run.write_final(final)
                except OSError:
                    pass
        result = self.result(status, exit_code, signal_, final, tail, error)
        if getattr(self, "setup_outcome", None) is not None:
            result["setup"] = self.setup_outcome
        self._check_after(result)
        self._remember_session(result, final)
        try:
            run.write_result(result)
        except OSError as problem:
            _say(f"cannot write {run.result_path}: {problem.strerror or problem}")
            exit_code = exit_code or 1
        if self.ticker is not None:
            self.ticker.clear()
        if not self.summary_printed:
            self.summary_printed = True
            extra = adapter.summary_lines(self.opts, self.state, result)
            extra = [*extra, *_hook_lines(result)]
            text = summary(adapter, result, extra, run.result_path)
            try:
                sys.stdout.write(text)
                sys.stdout.flush()
            except OSError:
                pass
        return exit_code

    def _path_fields(self) -> dict:
        run, adapter = self.run, self.adapter
        known = {
            "brief": ("briefPath", run.file(adapter.brief_name)),
            "events": ("eventsPath", run.file(adapter.events_name)),
            "final": ("finalPath", run.existing(FINAL)),
            "stderr": ("stderrPath", run.file(STDERR_NAME)),
        }
        fields = {}
        for entry in adapter.path_fields:
            field, value = (
                known[entry] if isinstance(entry, str) else (entry[0], run.file(entry[1]))
            )
            fields[field] = value
        return fields

    def result(
        self,
        status: str,
        exit_code: int,
        signal_: str | None,
        final: str,
        tail: list[str] | None,
        error: str | None,
    ) -> dict:
        adapter, opts, state = self.adapter, self.opts, self.state
        base = {
            "schema": registry.RESULT_VERSION,
            "lane": opts["lane"],
            "laneSource": opts["laneSource"],
        }
        if adapter.tool is not None:
            base["tool"] = adapter.tool
        base["workdir"] = opts["cd"]
        base.update(adapter.config_fields(opts, state))
        base[adapter.version_field] = self.version
        base.update(adapter.after_version_fields(state))
        base["startedAt"] = self.run.started_at
        base["finishedAt"] = iso_now()
        base.update(self._path_fields())
        extra = {"status": status, "exitCode": exit_code, "signal": signal_}
        extra.update(adapter.id_fields(state))
        extra["finalMessage"] = final
        extra.update(adapter.metric_fields(state))
        extra["touchedFiles"] = touched_files(opts["cd"])
        if self.worktree is not None:
            from .worktree import diffstat

            extra["worktree"] = self.worktree.record()
            extra["diffstat"] = diffstat(self.worktree.path, self.worktree.base)
        elif self.dropped_worktree is not None:
            extra["worktree"] = self.dropped_worktree
            extra["diffstat"] = None
        changes = self._changes_field()
        extra["changes"] = changes[0]
        if changes[1]:
            extra["changesUnavailable"] = changes[1]
        extra["relayRunId"] = self._run_id()
        extra["implementerArgv"] = self.implementer_argv
        extra.update(self._session_fields({**base, **extra}, final, changes[0]))
        if self.previous_run is not None:
            extra["previousRun"] = self.previous_run
        if self.tripwire is not None:
            files = changes[0]["files"] if changes[0] is not None else None
            extra["readOnlyViolation"] = self.tripwire.verdict(files, settled=self.settled)
            if self.tripwire.changes:
                extra["readOnlyChanges"] = self.tripwire.changes
            elif self.tripwire.unverified:
                extra["readOnlyUnverified"] = self.tripwire.unverified
            extra["readOnlyEnforced"] = self.sandbox.enforced if self.sandbox else None
            if self.sandbox is not None and self.sandbox.reason:
                extra["readOnlyUnenforced"] = self.sandbox.reason
        elif adapter.null_verdict_on_write_runs:
            extra["readOnlyViolation"] = None
        extra.update(adapter.trailing_fields(state))
        if tail is not None:
            extra["stderrTail"] = tail
        if error:
            extra["error"] = error
        return {**base, **extra}

    def _session_fields(self, so_far: dict, final: str, changes: dict | None) -> dict:
        """sessionRequested, sessionChanged and repeatedFinal, for a run that resumed one."""
        adapter = self.adapter
        requested = adapter.session_requested(self.opts)
        if requested is None:
            return {}
        reported = so_far.get(adapter.session_field) if adapter.session_field else None
        reported = reported if isinstance(reported, str) and reported else None
        changed = None if requested == "last" or reported is None else reported != requested
        if self._repeated is None and self.settled and self.launched:
            from ..runstore import sessions

            known = [requested if requested != "last" else None, reported]
            same_answer = sessions.repeats(adapter.key, [k for k in known if k], final)
            idle = changes is not None and not changes["files"] and not adapter.read_only(self.opts)
            self._repeated = same_answer or idle
        return {
            "sessionRequested": requested,
            "sessionChanged": changed,
            "repeatedFinal": bool(self._repeated),
        }

    def _artifact_names(self) -> list[str]:
        """Every file the relay writes in the run directory."""
        from ..runs.view import RUN_FILE
        from ..snapshots.changes import PATCH_NAME

        adapter = self.adapter
        names = {
            RUN_FILE,
            adapter.brief_name,
            RESULT,
            FINAL,
            RESERVE,
            PATCH_NAME,
            "relay-stderr.txt",
            "setup.log",
            "check.log",
        }
        names.update(name for name in (adapter.events_name, STDERR_NAME) if name)
        names.update(self._fresh_names)
        names.update(entry[1] for entry in adapter.path_fields if not isinstance(entry, str))
        return sorted(names)

    def _remember_session(self, result: dict, final: str) -> None:
        field = self.adapter.session_field
        session = result.get(field) if field else None
        if self.settled and self.launched and isinstance(session, str) and session:
            from ..runstore import sessions

            sessions.remember(self.adapter.key, session, final)

    def _run_id(self) -> str | None:
        return self.record.id if self.record is not None else None

    def _changes_field(self) -> tuple[dict | None, str | None]:
        """`changes` (or None and why), computed once the run has settled."""
        if not self.launched:
            return None, f"{self.adapter.display} was not started"
        if self.changes is None:
            if self.paths is None or self.paths.toplevel is None:
                return None, "git cannot read the work tree (not a repository, or no git)"
            return None, "the run has no private record to keep a change record in"
        if not self.settled:
            return None, "processes of the run were still being stopped"
        if self.changes_field is None:
            self.changes_field = self.changes.field(self.run)
        return self.changes_field


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


def _which(program: str, env: dict[str, str]) -> str | None:
    """`program` as an absolute path, searched on the child's PATH."""
    import shutil

    if os.sep in program:
        return program if os.access(program, os.X_OK) else None
    return shutil.which(program, path=env.get("PATH"))


def _temp_dir(env: dict[str, str]) -> str:
    """The child's temp dir, as its environment names it (tempfile would write to find out)."""
    for name in ("TMPDIR", "TEMP", "TMP"):
        if env.get(name):
            return env[name]
    return "/tmp"


def _worktrees_root() -> str:
    from .worktree import worktrees_root

    return worktrees_root()


def grace_s(variable: str, default: float) -> float:
    """Seconds from the environment `variable` (0 to 3600), else `default`."""
    try:
        value = float(os.environ.get(variable, default))
    except ValueError:
        return default
    return value if 0 <= value <= 3600 else default


def _lane_home(cd: str) -> str:
    """Where a run's lanes are read: `cd`, or for a folder in one of our worktrees its source."""
    from .worktree import worktrees_root

    root = os.path.realpath(worktrees_root())
    real = os.path.realpath(cd)
    if not real.startswith(root + os.sep):
        return cd
    from ..gitmeta import git_outcome

    common = git_outcome(cd, "rev-parse", "--path-format=absolute", "--git-common-dir")
    source = os.path.dirname(os.fsdecode(common.out.strip())) if common.ok else ""
    return source if os.path.isdir(source) else cd


def _hook_lines(result: dict) -> list[str]:
    """The summary's lines for --setup and --check."""
    lines = []
    for name in ("setup", "check"):
        outcome = result.get(name)
        if isinstance(outcome, dict):
            code = outcome["exitCode"]
            verdict = "passed" if code == 0 else ("stopped" if code is None else "FAILED")
            lines.append(f"{name}: {outcome['command']} {verdict} (exit {code}, "
                         f"{outcome['seconds']:.1f}s)")  # fmt: skip
    return lines


def read_brief(path: str | None) -> str:
    """The brief from `path`, else from a piped stdin. Raises Usage."""
    if path:
        if not os.path.exists(path):
            raise Usage(f"brief file not found: {path}")
        try:
            raw = read_limited(path, BRIEF_LIMIT, label=f"brief file {path}", what="brief")
        except UserError as problem:
            raise Usage(str(problem)) from None
        if raw is None:
            raise Usage(f"brief file not found: {path}")
    else:
        try:
            interactive = os.isatty(0)
        except OSError:
            interactive = False
        if interactive:
            raise Usage(
                "no --brief given and stdin is a TTY; "
                "pass --brief <file> or pipe the brief on stdin"
            )
        try:
            stdin = sys.stdin.buffer if sys.stdin is not None else None
            raw = read_stream_limited(stdin, BRIEF_LIMIT, "the brief on stdin") if stdin else b""
        except (OSError, ValueError):
            raw = b""
        except UserError as problem:
            raise Usage(str(problem)) from None
    brief = raw.decode("utf-8", errors="replace")
    if not js_trim(brief):
        raise Usage("empty brief (pass --brief <file> or pipe the brief on stdin)")
    return brief
