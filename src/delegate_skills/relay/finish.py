"""The end of a run: result.json, the store's record of how it ended, the summary.

`finish` may run twice for one run (an aborted run gets a first result at
once, and the final one when its processes are gone); the summary is
printed once.
"""

from __future__ import annotations

import sys

from .. import registry
from ..errors import UserError
from ..runstore.record import FINAL_COPY
from ..snapshots.gitstate import touched_files
from .artifacts import written_artifacts
from .console import say
from .report import summary
from .rundir import FINAL, RESULT, iso_now

#: The most of a final answer the store keeps a private copy of.
FINAL_COPY_LIMIT = 4 * 1024 * 1024


def finish(
    relay,
    status: str,
    exit_code: int,
    signal_: str | None,
    *,
    tail: list[str] | None = None,
    error: str | None = None,
    final: str | None = None,
) -> int:
    """Write result.json (again, if need be), record the end in the store, print the summary."""
    adapter, run = relay.adapter, relay.run
    run.release()
    if final is None:
        final = adapter.final_message(relay.state, run)
        if final and not adapter.child_writes_final:
            try:
                run.write_final(final)
                relay.wrote.add(FINAL)
            except OSError:
                pass
    result = build_result(relay, status, exit_code, signal_, final, tail, error)
    if run.moved():
        exit_code = _moved(relay, result, exit_code)
    if relay.setup_outcome is not None:
        result["setup"] = relay.setup_outcome
    _check_after(relay, result)
    _remember_session(relay, result, final)
    try:
        run.write_result(result)
        relay.wrote.add(RESULT)
    except OSError as problem:
        say(f"cannot write {run.result_path}: {problem.strerror or problem}")
        exit_code = exit_code or 1
    record_end(relay, result, final)
    if relay.ticker is not None:
        relay.ticker.clear()
    if not relay.summary_printed:
        relay.summary_printed = True
        extra = adapter.summary_lines(relay.opts, relay.state, result)
        extra = [*extra, *hook_lines(result)]
        text = summary(adapter, result, extra, run.result_path)
        try:
            sys.stdout.write(text)
            sys.stdout.flush()
        except OSError:
            pass
    return exit_code


def _moved(relay, result: dict, exit_code: int) -> int:
    """A run directory moved or replaced during the run: the run fails, its verdict is unproven.

    Our files still go into the directory the run was given (its handle),
    wherever it is now; nothing is written where its path points instead.
    """
    problem = (
        f"the run directory {relay.run.path} was moved or replaced during the run; the "
        "relay's files are in the directory it was given, wherever that is now"
    )
    result["error"] = f"{result['error']}; {problem}" if result.get("error") else problem
    if result["status"] == "completed":
        result["status"] = "failed"
    if result.get("readOnlyViolation") is False:
        result["readOnlyViolation"] = None
    exit_code = exit_code or 1
    result["exitCode"] = exit_code
    return exit_code


def record_end(relay, result: dict, final: str) -> None:
    """How the run ended, in the store: what later commands act on."""
    record = relay.record
    if record is None:
        return
    adapter = relay.adapter
    session = result.get(adapter.session_field) if adapter.session_field else None
    fields: dict = {
        "ended": {
            "status": result["status"],
            "exitCode": result["exitCode"],
            "signal": result["signal"],
            "finishedAt": result.get("finishedAt"),
            "settled": relay.settled,
        },
        "artifacts": written_artifacts(relay),
    }
    if isinstance(session, str) and session:
        fields["session"] = {"field": adapter.session_field, "id": session}
    changes = result.get("changes")
    if relay.changes is not None and relay.changes.before is not None:
        from .storing import changes_entry

        totals = None
        if isinstance(changes, dict):
            totals = {k: changes[k] for k in ("filesChanged", "linesAdded", "linesRemoved")}
        fields["changes"] = changes_entry(relay, totals)
    fields["overlap"] = result.get("overlap")  # a worktree run's: found by runs apply
    # What the implementer reported it used (null: nothing); `runs usage` sums these.
    usage = result.get("tokenUsage")
    fields["tokenUsage"] = usage if isinstance(usage, dict) else None
    for name in ("setup", "check"):
        if isinstance(result.get(name), dict):
            fields[name] = result[name]
    if relay.settled and final:
        try:
            record.keep(FINAL_COPY, final[:FINAL_COPY_LIMIT])
        except OSError:
            pass
    try:
        record.update(**fields)
    except (OSError, UserError):
        pass


def _check_after(relay, result: dict) -> None:
    """Run --check where the implementer worked, once its change is recorded."""
    from .hooks import CHECK_LOG, budget_s, run_shell

    command = relay.opts.get("check")
    if command is None or result["status"] != "completed" or not relay.settled:
        return
    if relay.check_outcome is None:
        say(f"check: {command}")
        relay.wrote.add(CHECK_LOG)
        relay.check_outcome = run_shell(
            command, relay.opts["cd"], relay.run, CHECK_LOG, relay.stopping, budget_s(relay)
        )
    result["check"] = relay.check_outcome


def _touched_files(relay) -> list[str] | None:
    """`git status --porcelain` as the run left the tree: the one started as the run settled
    (read once), else asked now."""
    pending, relay.touched = relay.touched, None
    if pending is not None:
        return pending.take()
    return touched_files(relay.opts["cd"])


def path_fields(relay) -> dict:
    from .artifacts import STDERR_NAME

    run, adapter = relay.run, relay.adapter
    known = {
        "brief": ("briefPath", run.file(adapter.brief_name)),
        "events": ("eventsPath", run.file(adapter.events_name)),
        "final": ("finalPath", run.existing(FINAL)),
        "stderr": ("stderrPath", run.file(STDERR_NAME)),
    }
    fields = {}
    for entry in adapter.path_fields:
        field, value = known[entry] if isinstance(entry, str) else (entry[0], run.file(entry[1]))
        fields[field] = value
    return fields


def build_result(
    relay,
    status: str,
    exit_code: int,
    signal_: str | None,
    final: str,
    tail: list[str] | None,
    error: str | None,
) -> dict:
    """result.json, field by field in the Node relays' order."""
    adapter, opts, state = relay.adapter, relay.opts, relay.state
    base = {
        "schema": registry.RESULT_VERSION,
        "lane": opts["lane"],
        "laneSource": opts["laneSource"],
    }
    if adapter.tool is not None:
        base["tool"] = adapter.tool
    base["workdir"] = opts["cd"]
    base.update(adapter.config_fields(opts, state))
    base[adapter.version_field] = relay.version
    base.update(adapter.after_version_fields(state))
    base["startedAt"] = relay.run.started_at
    base["finishedAt"] = iso_now()
    base.update(path_fields(relay))
    extra = {"status": status, "exitCode": exit_code, "signal": signal_}
    extra.update(adapter.id_fields(state))
    extra["finalMessage"] = final
    extra.update(adapter.metric_fields(state))
    extra["touchedFiles"] = _touched_files(relay)
    if relay.worktree is not None:
        from .worktree import diffstat

        extra["worktree"] = relay.worktree.record()
        extra["diffstat"] = diffstat(relay.worktree.path, relay.worktree.base)
    elif relay.dropped_worktree is not None:
        extra["worktree"] = relay.dropped_worktree
        extra["diffstat"] = None
    changes = changes_field(relay)
    extra["changes"] = changes[0]
    if changes[1]:
        extra["changesUnavailable"] = changes[1]
    extra["overlap"] = overlap_field(relay, changes[0])
    extra["relayRunId"] = relay.run_id()
    extra["implementerArgv"] = relay.implementer_argv
    extra.update(_confined_fields(relay))
    extra.update(_session_fields(relay, {**base, **extra}, final, changes[0]))
    if relay.previous_run is not None:
        extra["previousRun"] = relay.previous_run
    if relay.tripwire is not None:
        files = changes[0]["files"] if changes[0] is not None else None
        extra["readOnlyViolation"] = relay.tripwire.verdict(files, settled=relay.settled)
        if relay.tripwire.changes:
            extra["readOnlyChanges"] = relay.tripwire.changes
        elif relay.tripwire.unverified:
            extra["readOnlyUnverified"] = relay.tripwire.unverified
        extra["readOnlyEnforced"] = relay.sandbox.enforced if relay.sandbox else None
        if relay.sandbox is not None and relay.sandbox.reason:
            extra["readOnlyUnenforced"] = relay.sandbox.reason
    elif adapter.null_verdict_on_write_runs:
        extra["readOnlyViolation"] = None
    extra.update(adapter.trailing_fields(state))
    if tail is not None:
        extra["stderrTail"] = tail
    if error:
        extra["error"] = error
    return {**base, **extra}


def _confined_fields(relay) -> dict:
    """For a run asked to be confined: `confined` ("bwrap" or null) and, when null, why."""
    if not relay.confined:
        return {}
    if relay.sandbox is not None and relay.sandbox.enforced:
        return {"confined": relay.sandbox.enforced}
    why = relay.sandbox.reason if relay.sandbox is not None else None
    return {"confined": None, "confinedUnavailable": why or "the implementer was not started"}


def _session_fields(relay, so_far: dict, final: str, changes: dict | None) -> dict:
    """sessionRequested, sessionChanged and repeatedFinal, for a run that resumed one."""
    adapter = relay.adapter
    requested = adapter.session_requested(relay.opts)
    if requested is None:
        return {}
    reported = so_far.get(adapter.session_field) if adapter.session_field else None
    reported = reported if isinstance(reported, str) and reported else None
    changed = None if requested == "last" or reported is None else reported != requested
    if relay.repeated is None and relay.settled and relay.launched:
        from ..runstore import sessions

        known = [requested if requested != "last" else None, reported]
        same_answer = sessions.repeats(adapter.key, [k for k in known if k], final)
        idle = changes is not None and not changes["files"] and not adapter.read_only(relay.opts)
        relay.repeated = same_answer or idle
    return {
        "sessionRequested": requested,
        "sessionChanged": changed,
        "repeatedFinal": bool(relay.repeated),
    }


def _remember_session(relay, result: dict, final: str) -> None:
    field = relay.adapter.session_field
    session = result.get(field) if field else None
    if relay.settled and relay.launched and isinstance(session, str) and session:
        from ..runstore import sessions

        sessions.remember(relay.adapter.key, session, final)


def changes_field(relay) -> tuple[dict | None, str | None]:
    """`changes` (or None and why), computed once the run has settled."""
    if not relay.launched:
        return None, f"{relay.adapter.display} was not started"
    if relay.changes is None:
        if relay.paths is None or relay.paths.toplevel is None:
            return None, "git cannot read the work tree (not a repository, or no git)"
        return None, "the run has no private record to keep a change record in"
    if not relay.settled:
        return None, "processes of the run were still being stopped"
    if relay.changes_field is None:
        relay.changes_field = relay.changes.field(relay.run)
        if relay.changes_field[0] is not None and relay.changes_field[0].get("patch"):
            from ..snapshots.changes import PATCH_NAME

            relay.wrote.add(PATCH_NAME)
    return relay.changes_field


def overlap_field(relay, changes: dict | None) -> list[str] | None:
    """`overlap`: the paths this run changed that held the user's uncommitted changes when it
    began (sorted; [] for none). None when that cannot be known: no change record, or a
    --worktree run, whose overlap is with its source and is found when `runs apply` lands it.
    """
    if changes is None or relay.changes is None:
        return None
    if relay.worktree is not None or relay.dropped_worktree is not None:
        return None
    return relay.changes.overlap(changes["files"])


def hook_lines(result: dict) -> list[str]:
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
