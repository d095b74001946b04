"""The words a relay prints: --help, and the summary after every run."""

from __future__ import annotations

import os

from .adapter import Adapter
from .options import Flag

TOUCHED_SHOWN = 40
STDERR_SHOWN = 8
NO_COMMIT = (
    "relay does not commit. Review the diff, re-run the project gates yourself, "
    "then commit from the orchestrator."
)


def _flag_usage(flag: Flag) -> str:
    return f"{flag.name} {flag.metavar}".rstrip()


def help_text(adapter: Adapter) -> str:
    flags = adapter.flag_table()
    width = max(len(_flag_usage(f)) for f in flags) + 2
    options = [f"  {_flag_usage(f):<{width}}{f.help}" for f in flags]
    options.append(f"  {'-h, --help':<{width}}Show this help.")
    default = adapter.watchdog_default or adapter.default_timeout or "off"
    from ..invocation import skill_folder

    # The command as it was run: this folder's relay.py, or `delegate relay KEY`.
    command = "python3 relay.py" if skill_folder() else f"delegate relay {adapter.key}"
    return "\n".join(
        [
            f"delegate-skills · {adapter.key}-delegate · {command.removeprefix('python3 ')}",
            "",
            adapter.about.strip(),
            "",
            "The relay never commits: the orchestrator reviews the diff, re-runs the",
            "project's gates and lands the work. It starts no network traffic of its",
            f"own; it runs `{adapter.binary}` and `git`, and {adapter.display} signs in as it",
            "does at your terminal.",
            "",
            "Usage:",
            f"  {command} --brief <file> [options]",
            f"  cat brief.txt | {command} [options]",
            "",
            "Options:",
            *options,
            "",
            f"Watchdog default: {default}. Read-only runs report readOnlyViolation: true",
            "(git saw a change), false (nothing changed) or null (git could not say).",
            "",
            "Result: <out-dir>/result.json (delegate-relay.result.v1) and a summary on",
            "stdout: status, exitCode, signal, the session id to resume, finalMessage,",
            "touchedFiles (git status --porcelain, null when git cannot say).",
            "",
            "Exit codes: 2 usage error (no result.json); 127 "
            f"`{adapter.binary}` not found ({adapter.unavailable_status});",
            "124 the version preflight hung; 128+n the relay or the implementer was",
            "killed by signal n; otherwise the implementer's own code. Once the brief",
            "is accepted, result.json is written whatever happens: completed, failed,",
            f"timeout, aborted or {adapter.unavailable_status}.",
            "",
        ]
    )


def _touched_lines(touched: list[str] | None) -> list[str]:
    if touched is None:
        return ["touched files: git unavailable — inspect the working tree directly"]
    lines = [f"touched files: {len(touched)}"]
    lines.extend(f"  {line}" for line in touched[:TOUCHED_SHOWN])
    if len(touched) > TOUCHED_SHOWN:
        lines.append(f"  … and {len(touched) - TOUCHED_SHOWN} more")
    return lines


def _hints(adapter: Adapter, result: dict) -> list[str]:
    if result["status"] != "failed":
        return []
    label = adapter.label
    article = "an" if label[:1] in "aeiou" else "a"
    if result["signal"] == "SIGKILL":
        return [
            "hint: the host killed the process (commonly the OOM killer or a supervisor "
            f"timeout) — this is not {article} {label} error; check host memory and "
            "re-dispatch, or split the task into smaller briefs."
        ]
    if result["signal"] == "SIGTERM":
        return [
            f"hint: something outside the relay terminated {label} (a supervisor, the "
            "session ending, or a manual kill) — when the relay itself does the killing it "
            'reports status "timeout" or "aborted" instead; inspect the working tree '
            "before re-dispatching."
        ]
    hint = adapter.exit_hints.get(result["exitCode"])
    return [f"hint: {hint}"] if hint else []


def _enforcement_line(result: dict) -> list[str]:
    if "readOnlyEnforced" not in result:
        return []
    if result["readOnlyEnforced"]:
        return [f"read-only: enforced ({result['readOnlyEnforced']}: the repository was read-only)"]
    why = result.get("readOnlyUnenforced") or "no sandbox"
    return [f"read-only: detected only, not enforced ({why})"]


def _changes_lines(result: dict) -> list[str]:
    if "changes" not in result:
        return []
    changes = result["changes"]
    if changes is None:
        why = result.get("changesUnavailable") or "no record"
        return [f"changes: not recorded ({why})"]
    if not changes["files"]:
        return ["changes: none (this run changed no file)"]
    return [
        f"changes: {changes['filesChanged']} file(s), +{changes['linesAdded']} "
        f"-{changes['linesRemoved']} by this run; patch: {changes.get('patch')}"
    ]


def _overlap_lines(result: dict) -> list[str]:
    """The paths this run changed that already held the user's uncommitted changes."""
    overlap = result.get("overlap")
    if not overlap:
        return []
    more = f" (and {len(overlap) - SHOWN_CHANGES} more)" if len(overlap) > SHOWN_CHANGES else ""
    return [
        f"overlap: {len(overlap)} path(s) this run changed held your uncommitted changes from "
        f"before it: {', '.join(overlap[:SHOWN_CHANGES])}{more}"
    ]


def _session_lines(adapter: Adapter, result: dict, result_path: str) -> list[str]:
    """Which id continues the conversation, when a resumed run came back with another."""
    lines = []
    field = adapter.session_field
    reported = result.get(field) if field else None
    if result.get("sessionChanged") is True and reported:
        lines.append(
            f"note: {adapter.display} answered in session {reported}, not the "
            f"{result['sessionRequested']} asked for: continue with {reported}"
        )
    if result.get("repeatedFinal"):
        lines.append(
            "warning: this follow-up changed no file or repeated the session's last answer; "
            "the implementer may be stuck: undo what regressed, stop, and report the options"
        )
    run_id = result.get("relayRunId")
    if reported and run_id and adapter.resumable and result.get("host"):
        lines.append(f"next: session {reported} lives on {result['host']}: resume it with "
                     f"--host {result['host']} and this relay's resume flag")  # fmt: skip
    elif reported and run_id and adapter.resumable:
        lines.append(f"next: --continue {run_id} resumes this session ({reported}) where it ran")
    return lines


def _read_only_lines(result: dict) -> list[str]:
    if "readOnlyViolation" not in result:
        return []
    verdict = result["readOnlyViolation"]
    if verdict is True:
        lines = [
            "warning: a git-visible change was detected during this read-only run; "
            "inspect the working tree immediately."
        ]
        changes = result.get("readOnlyChanges") or []
        if changes:
            more = (
                f" (and {len(changes) - SHOWN_CHANGES} more)"
                if len(changes) > SHOWN_CHANGES
                else ""
            )
            lines.append("changed: " + ", ".join(changes[:SHOWN_CHANGES]) + more)
        return lines
    if verdict is None:
        why = result.get("readOnlyUnverified")
        reason = (
            why
            if why
            else "git could not report, or a submodule or unreadable path left coverage incomplete"
        )
        return [
            f"warning: this read-only run could not be verified ({reason}): its coverage is "
            "incomplete; inspect the working tree directly."
        ]
    return []


def _worktree_lines(result: dict, result_path: str) -> list[str]:
    tree = result.get("worktree")
    if not isinstance(tree, dict):
        return []
    lines = [f"worktree: {tree.get('path')} (branch {tree.get('branch')})"]
    stat = result.get("diffstat")
    if isinstance(stat, dict):
        lines.append(
            f"diffstat: {stat.get('filesChanged')} file(s), "
            f"+{stat.get('linesAdded')} -{stat.get('linesRemoved')} against the start commit"
        )
    if tree.get("sourceUncommitted"):
        lines.append(
            f"note: {tree['sourceUncommitted']} uncommitted change(s) in {tree.get('source')} "
            "were not in the worktree"
        )
    included, skipped = tree.get("worktreeIncluded"), tree.get("worktreeIncludeSkipped")
    if included or skipped:
        left = f" ({len(skipped)} left out)" if isinstance(skipped, list) and skipped else ""
        count = len(included) if isinstance(included, list) else 0
        lines.append(f"included: {count} ignored file(s) from .worktreeinclude{left}")
    from ..invocation import quoted, runs_command
    from ..runstore.record import valid_id

    # The run id when the store has the run, else its directory; each line pastes as it is.
    run_id = result.get("relayRunId")
    run = run_id if valid_id(run_id) else quoted(os.path.dirname(result_path))
    lines.append(f"land with: {runs_command()} apply {run}")
    lines.append(f"drop with: {runs_command()} discard {run}")
    return lines


#: How many changed items the summary names.
SHOWN_CHANGES = 5


def summary(adapter: Adapter, result: dict, extra_lines: list[str], result_path: str) -> str:
    killed = f", killed by {result['signal']}" if result.get("signal") else ""
    version = result.get(adapter.version_field) or "?"
    # Some CLIs print their own name in their version ("aider 0.86.2"): say it once.
    named = version.lower().startswith(adapter.label.lower())
    tool = version if named else f"{adapter.label} {version}"
    lines = [
        "",
        f"relay: {result['status']} (exit {result['exitCode']}{killed})  ·  {tool}",
        *_hints(adapter, result),
        *_read_only_lines(result),
        *_enforcement_line(result),
        *extra_lines,
        *_touched_lines(result.get("touchedFiles")),
        *_changes_lines(result),
        *_overlap_lines(result),
        *_session_lines(adapter, result, result_path),
        *_worktree_lines(result, result_path),
    ]
    tail = result.get("stderrTail") or []
    if tail:
        lines.append("last stderr:")
        lines.extend(f"  {line}" for line in tail[-STDERR_SHOWN:])
    lines += [
        "",
        f"--- {adapter.report_name or adapter.label} final report ---",
        result.get("finalMessage") or "(no final message captured)",
        "--- end report ---",
        "",
        f"result: {result_path}",
        NO_COMMIT,
    ]
    # A file name need not be UTF-8; the summary always is.
    return ("\n".join(lines) + "\n").encode("utf-8", "surrogateescape").decode("utf-8", "replace")
