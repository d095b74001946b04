"""The relay engine: one run of one implementer, from command line to result.json.

    parse flags → apply the lane → check options → read the brief
    → (signals watched from here) prepare the run directory → tripwire baseline
    → version preflight → launch → supervise (watchdog, signals) → result + summary

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
from ..jsjson import js_trim
from ..reading import read_limited, read_stream_limited
from .adapter import Adapter, State
from .child import Child, RelaySignals, is_missing_binary, signal_name
from .gitstate import Tripwire, touched_files
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

    # ------------------------------------------------------------ configuring

    def main(self, argv: list[str]) -> int:
        try:
            brief = self.configure(argv)
        except HelpRequested:
            sys.stdout.write(help_text(self.adapter))
            sys.stdout.flush()
            return 0
        except Usage as problem:
            _say(str(problem))
            return 2
        return self.dispatch(brief)

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
        }
        if adapter.has_model_flag:
            opts["model"] = None
        opts.update(adapter.defaults())
        table = {flag.name: flag for flag in adapter.flag_table()}
        given: list[tuple[str, str]] = []
        flagged = parse(argv, table, opts, given)
        if opts["worktree"]:
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

    def _enter_worktree(self, opts: dict) -> None:
        """Move the run into a new worktree of --cd's repository. Raises Usage.

        Lanes are resolved there, against the worktree's own project config,
        which carries the source's approval when its bytes are the approved ones.
        """
        from .worktree import WorktreeError, create

        check_directory(opts["cd"])
        try:
            self.worktree = create(opts["cd"])
        except WorktreeError as problem:
            raise Usage(str(problem)) from None
        opts["cd"] = self.worktree.cd

    def _drop_worktree(self) -> None:
        """Remove a worktree this relay made for a run that did not start."""
        if self.worktree is not None:
            from .worktree import remove

            remove(self.worktree.source, self.worktree.path, self.worktree.branch)
            self.worktree = None

    def _apply_lane(self, opts: dict, flagged: set[str]) -> None:
        from .. import lanes

        try:
            resolved = lanes.resolve(opts["cd"], opts["lane"], self.adapter.key)
        except UserError as problem:
            raise Usage(str(problem)) from None
        opts["laneSource"] = resolved["source"]
        self.adapter.refuse_dials(opts["lane"], resolved["dials"])
        lanes.merge_dials(
            opts,
            resolved["dials"],
            flagged,
            extra_blockers=dict(self.adapter.lane_blockers),
            apply=self.adapter.apply_dial,
        )

    # ------------------------------------------------------------ the run

    def dispatch(self, brief: str) -> int:
        adapter, opts = self.adapter, self.opts
        self.signals = RelaySignals()
        self.signals.install()
        started = iso_now()
        try:
            out_dir = opts["outDir"] or default_out_dir(opts["cd"], started)
        except OSError as problem:
            _say(f"cannot prepare run artifacts: {problem}")
            return self._not_started()
        self.run = RunDir(out_dir, started, brief)
        self.state = adapter.new_state(opts)
        self.state.run = self.run
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
            from .runs import remember

            remember(self.run.path)
        _say(f"{adapter.label} run started · {self.run.path} · relay pid {os.getpid()}")
        if self.worktree is not None:
            self._say_worktree()
        if adapter.read_only(opts):
            names = sorted({*fresh, RESULT, FINAL, RESERVE})
            self.tripwire = Tripwire(opts["cd"], [self.run.file(name) for name in names])
        env = adapter.child_env(opts)
        launcher = adapter.launcher(opts, env)
        if launcher is None:
            return self._unavailable()
        outcome = self._preflight(launcher, env)
        if outcome is not None:
            return outcome
        return self._supervise(launcher, env, brief)

    def _not_started(self) -> int:
        """A run that stops before it starts: usage exit, and no worktree left behind."""
        self._drop_worktree()
        return 2

    def _say_worktree(self) -> None:
        tree = self.worktree
        _say(f"worktree {tree.path} · branch {tree.branch} from {tree.base[:12]}")
        if tree.source_changes:
            _say(
                f"{tree.source} has {tree.source_changes} uncommitted change(s); they are "
                f"not in the worktree, which starts from commit {tree.base[:12]}"
            )

    def _fresh_artifacts(self, brief: str) -> dict[str, bytes]:
        from .runs import RUN_FILE, run_marker

        adapter, opts, run = self.adapter, self.opts, self.run
        marker = run_marker(adapter.key, opts["lane"], opts["cd"], run.path, run.started_at)
        fresh = {RUN_FILE: marker, adapter.brief_name: brief.encode("utf-8", errors="replace")}
        if adapter.events_name:
            fresh[adapter.events_name] = b""
        if adapter.stderr_file:
            fresh[STDERR_NAME] = b""
        fresh.update(adapter.extra_artifacts(self.opts, self.run))
        return fresh

    # ------------------------------------------------------------ preflight

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

        child = Child(
            argv,
            cwd=None,
            env=env,
            stdin=None,
            on_stdout=keep(out, False),
            on_stderr=keep(err, True),
            signals=self.signals,
        )
        try:
            child.start()
        except OSError as problem:
            child.close()
            if is_missing_binary(problem, None):
                return "missing", None, "", ""
            return "failed", None, "", str(problem)
        try:
            reason = child.pump(time.monotonic() + seconds)
            if reason != "closed":
                child.signal_tree(signal.SIGKILL)
                child.pump(None, watch_signals=False, stop_pipes_on_exit=True)
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
        self._finish(status, exit_code, None, tail=tail, error=error, final="")
        _say(error)
        return exit_code

    def _unavailable(self) -> int:
        adapter = self.adapter
        self._finish(adapter.unavailable_status, 127, None, final="")
        _say(f"`{adapter.binary}` not found on PATH. {adapter.install_hint}")
        return 127

    def _aborted_before_dispatch(self) -> int:
        adapter = self.adapter
        signum = self.signals.first()
        name = signal_name(signum) or "SIGTERM"
        error = (
            f"the relay was killed by {name} during the {adapter.binary} version preflight; "
            f"{adapter.display} was not dispatched"
        )
        self._finish("aborted", 128 + signum, name, tail=[], error=error, final="")
        return 128 + signum

    # ------------------------------------------------------------ dispatch

    def _supervise(self, launcher: list[str], env: dict[str, str], brief: str) -> int:
        adapter, opts, run = self.adapter, self.opts, self.run
        argv = [*launcher, *adapter.build_argv(opts, run)]
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
        self._record_group(child)
        try:
            return self._watch(child, scanner, decoder)
        finally:
            child.close()
            run.close()

    def _record_group(self, child: Child) -> None:
        """Add the implementer's process group to run.json, for `runs` to find."""
        from .runs import RUN_FILE, run_marker

        adapter, opts, run = self.adapter, self.opts, self.run
        marker = run_marker(
            adapter.key, opts["lane"], opts["cd"], run.path, run.started_at, group=child.pid
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
        return self._closed(child, fired)

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
        self._finish("aborted", code, name, tail=self.tail.snapshot(), error=error)
        child.pump(
            time.monotonic() + grace_s(ABORT_GRACE_ENV, DEFAULT_ABORT_GRACE_S), watch_signals=False
        )
        child.kill_tree()
        self._drain_scanner(scanner, decoder)
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
        if self.tripwire is not None:
            extra["readOnlyViolation"] = self.tripwire.verdict()
            if self.tripwire.changes:
                extra["readOnlyChanges"] = self.tripwire.changes
            elif self.tripwire.unverified:
                extra["readOnlyUnverified"] = self.tripwire.unverified
        elif adapter.null_verdict_on_write_runs:
            extra["readOnlyViolation"] = None
        extra.update(adapter.trailing_fields(state))
        if tail is not None:
            extra["stderrTail"] = tail
        if error:
            extra["error"] = error
        return {**base, **extra}


def grace_s(variable: str, default: float) -> float:
    """Seconds from the environment `variable` (0 to 3600), else `default`."""
    try:
        value = float(os.environ.get(variable, default))
    except ValueError:
        return default
    return value if 0 <= value <= 3600 else default


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
