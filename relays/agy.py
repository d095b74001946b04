"""Antigravity (`agy`): brief as `--print=<brief>`, plain-text report on stdout.

Antigravity asks for permission before tools that need it; a headless
`--print` run cannot be asked, so such a tool is auto-denied, and the relay
turns that denial into a failure that says so. `--dangerously-skip-permissions`
is the opt-in way past it and cannot be combined with `--read-only` (agy's plan
mode). agy prints no events: the report is its stdout, and the project and
conversation ids come from the log it writes with `--log-file`. A run that
exits 0 with no report and no visible change to the work tree is not taken as
done. agy stops itself at `--print-timeout` (30m); the relay's watchdog
defaults to that plus 60 seconds.
"""

from __future__ import annotations

import os
import re

from delegate_skills import durations, registry
from delegate_skills.jstext import js_trim
from delegate_skills.reading import part_of_file
from delegate_skills.relay.adapter import State, session_lines
from delegate_skills.relay.artifacts import STDERR_NAME
from delegate_skills.relay.options import (
    Usage,
    check_choice,
    check_exclusive,
    check_model,
    switch_flag,
    value_flag,
)
from delegate_skills.relay.parts import (
    StdoutReportAdapter,
    StdoutState,
    add_dir_args,
    add_dir_flag,
    check_argv_brief,
    check_read_only_or_skip,
    read_only_flag,
    resume_last_flag,
    resumed,
    skip_permissions_flag,
)
from delegate_skills.relay.scan import first_group
from delegate_skills.snapshots.changes import ChangeRecord, nested_records

LOG = "agy.log"
DEFAULT_PRINT_TIMEOUT = "30m"
GRACE_MS = 60_000
_READ_CAP = 16 * 1024 * 1024
TIMEOUT_MESSAGE = '--timeout "{value}" must be an h/m/s duration from 1s through 596h31m23s'
PRINT_TIMEOUT_MESSAGE = (
    '--print-timeout "{value}" must be an h/m/s duration from 1s through 596h30m23s '
    "so its 60s grace fits the relay watchdog limit"
)
TOO_BIG = (
    "brief is {kb}KB; agy passes the prompt as a CLI argument, which the OS caps (~128KB on "
    "Linux). Trim it, or have agy read large context from the workspace instead of inlining it."
)
_VERSION = re.compile(r"([^:\s]+):")
_DENIED = re.compile(
    r'no output produced\s+[—-]\s+a tool required the "([^"]+)" permission that headless\s+'
    r"mode cannot prompt for, so it was auto-denied",
    re.IGNORECASE,
)
_PROJECT_ID = tuple(
    re.compile(p, re.IGNORECASE)
    for p in (
        r'project: created project "[^"]*" \(id=([0-9a-f-]+)\)',
        r"Conversation using project ID: ([0-9a-f-]+)",
        r"Backend project ID updated dynamically to: ([0-9a-f-]+)",
    )
)
_CONVERSATION_ID = tuple(
    re.compile(p, re.IGNORECASE)
    for p in (r"Print mode: conversation=([0-9a-f-]+)", r"Created conversation ([0-9a-f-]+)")
)


def _read(path: str) -> str:
    return part_of_file(path, _READ_CAP).decode("utf-8", errors="replace")


class AgyState(StdoutState):
    def __init__(self, opts: dict) -> None:
        super().__init__(opts)
        #: Change records inside each dirty submodule or nested repository: with
        #: the run's own, the evidence that a silent run did something.
        self.nested: list[ChangeRecord] = []


class Agy(StdoutReportAdapter):
    key = "agy"
    session_id_after_signal = False
    resume_field = "conversation"
    display = "Antigravity"
    tool = "agy"
    watchdog_default = "--print-timeout plus 60s grace (31m with the default 30m)"
    install_hint = "Install the Antigravity CLI, then start it once to finish its setup."
    session_field = "conversationId"
    write_access = "Antigravity's permissions; prompts are auto-denied"
    read_only_route = "`--read-only`: plan mode"
    about = (
        "Hands a brief to the Antigravity CLI as `agy --print=<brief>` and records its\n"
        "plain-text report (stdout, copied to stdout.txt) and its log (agy.log, for\n"
        "the project and conversation ids). Antigravity's permissions apply: a tool\n"
        "that needs a prompt is auto-denied headlessly, and the relay reports that\n"
        "as a failure. --dangerously-skip-permissions opts out of them (full access;\n"
        "not with --read-only, which is agy's plan mode). Exit 0 with no report and\n"
        "no visible work-tree change is reported as failed. The watchdog defaults to\n"
        "--print-timeout plus 60s (31m). The brief rides argv (visible in ps), so it\n"
        "is capped at 120 KiB."
    )
    brief_via = "argv"
    timeout_message = TIMEOUT_MESSAGE
    timeout_help = "Relay watchdog as h/m/s (default: --print-timeout plus 60s)."
    path_fields = ("brief", "final", ("logPath", LOG), "stderr")
    flags = (
        value_flag("--effort", "effort", "<level>", "low | medium | high"),
        value_flag(
            "--project",
            "project",
            "<id>",
            "Use this Antigravity project.",
            flagged=False,
            token=registry.SHELL_SAFE,
        ),
        switch_flag(
            "--new-project", "newProject", "Start in a new project (what a fresh run does anyway)."
        ),
        resume_last_flag("Continue the most recent conversation (agy --continue)."),
        value_flag(
            "--conversation",
            "conversation",
            "<id>",
            "Continue this conversation.",
            flagged=False,
            token=registry.SESSION_ID,
        ),
        switch_flag(
            "--sandbox", "sandbox", "Run agy's tools in its sandbox (agy --sandbox).", flagged=True
        ),
        read_only_flag("agy's plan mode (--mode plan); the relay reports readOnlyViolation."),
        skip_permissions_flag("Skip Antigravity's permission checks (full access; opt-in)."),
        value_flag(
            "--print-timeout",
            "printTimeout",
            "<dur>",
            "agy's own time limit (default 30m); the watchdog default follows it.",
            flagged=False,
        ),
        add_dir_flag("Another directory agy may use (repeatable; relative to --cd).", "addDir"),
    )

    def defaults(self) -> dict:
        return {**super().defaults(), "printTimeout": DEFAULT_PRINT_TIMEOUT}

    def validate(self, opts: dict) -> None:
        check_choice(opts, "effort", "--effort", registry.AGY_EFFORT)
        check_model(opts, registry.LABEL)
        check_read_only_or_skip(opts)
        check_exclusive(opts, ("resumeLast", "--resume-last"), ("conversation", "--conversation"))
        super().watchdog_ms(opts)  # refuses a bad --timeout, worded as TIMEOUT_MESSAGE
        print_ms = durations.parse_timeout_ms(opts["printTimeout"])
        if print_ms is None or print_ms + GRACE_MS > durations.MAX_TIMER_MS:
            raise Usage(PRINT_TIMEOUT_MESSAGE.format(value=opts["printTimeout"]))
        resuming = resumed(opts, "conversation")
        if opts["project"] and resuming:
            raise Usage("--project cannot be combined with --resume-last or --conversation")
        if opts["project"] and opts["newProject"]:
            raise Usage("--project and --new-project are mutually exclusive")
        if opts["newProject"] and resuming:
            raise Usage("--new-project cannot be combined with --resume-last or --conversation")
        if opts["timeout"] is None:
            # The engine names opts["timeout"] in its watchdog message; say where it came from.
            watchdog = durations.format_duration(print_ms + GRACE_MS)
            opts["timeout"] = f"{watchdog} (--print-timeout {opts['printTimeout']} plus 60s grace)"
            opts["watchdogMs"] = print_ms + GRACE_MS

    def watchdog_ms(self, opts: dict) -> int | None:
        return opts.get("watchdogMs") or super().watchdog_ms(opts)

    def check_brief(self, opts: dict, brief: str) -> None:
        check_argv_brief(brief, "--print", TOO_BIG)

    def child_env(self, opts: dict) -> dict[str, str]:
        return {**os.environ, "PWD": opts["cd"]}

    def probe_name(self, opts: dict) -> str:
        return "agy changelog version"

    def parse_version(self, stdout: str) -> str:
        lines = [line for line in stdout.strip().split("\n") if line]
        if not lines:
            return "unknown"
        found = _VERSION.match(lines[0])
        return found.group(1) if found else lines[0]

    def new_state(self, opts: dict) -> State:
        return AgyState(opts)

    def extra_artifacts(self, opts: dict, run) -> dict[str, bytes]:
        # Created empty so a reused --out-dir cannot lend stale ids, and so the
        # read-only tripwire treats the log as the relay's own artifact.
        return {LOG: b""}

    def before_launch(self, state: AgyState) -> None:
        if state.scratch is not None:
            state.nested = nested_records(state.opts["cd"], state.scratch)

    def build_argv(self, opts: dict, run) -> list[str]:
        if opts["project"]:
            argv = ["--project", opts["project"]]
        elif opts["conversation"]:
            argv = ["--conversation", opts["conversation"]]
        elif opts["resumeLast"]:
            argv = ["--continue"]
        else:
            argv = ["--new-project"]
        if not resumed(opts, "conversation"):
            argv += ["--add-dir", os.path.normpath(opts["cd"])]
            argv += add_dir_args(opts, field="addDir")
        for flag, field in (("--model", "model"), ("--effort", "effort")):
            if opts[field]:
                argv += [flag, opts[field]]
        if opts["readOnly"]:
            argv += ["--mode", "plan"]
        if opts["sandbox"]:
            argv.append("--sandbox")
        if opts["dangerouslySkipPermissions"]:
            argv.append("--dangerously-skip-permissions")
        argv += ["--print-timeout", opts["printTimeout"], "--log-file", run.file(LOG)]
        argv.append(f"--print={run.brief}")
        return argv

    def failure(self, state: AgyState) -> str | None:
        stderr = _read(state.run.file(STDERR_NAME)) if state.run else ""
        denied = _DENIED.search(stderr)
        if denied:
            return (
                f"Antigravity auto-denied the {denied.group(1)} permission because headless "
                "--print cannot prompt; ask the human whether to re-dispatch with "
                "--dangerously-skip-permissions and treat that run as full access"
            )
        if not js_trim(state.stdout.text()) and not self._tree_changed(state):
            return (
                "agy ended without a final message or observable working-tree changes; "
                "the relay cannot confirm this dispatch completed"
            )
        return None

    def _tree_changed(self, state: AgyState) -> bool:
        """Whether the work tree, or a repository dirty inside it, provably changed."""
        for record in state.nested:
            record.end()
        records = [state.changes, *state.nested] if state.changes else state.nested
        return any(record.same() is False for record in records)

    def config_fields(self, opts: dict, state: State) -> dict:
        return {
            "model": opts["model"],
            "effort": opts["effort"],
            "project": opts["project"],
            "sandbox": opts["sandbox"],
            "readOnly": opts["readOnly"],
            "dangerouslySkipPermissions": opts["dangerouslySkipPermissions"],
            "resumed": resumed(opts, "conversation"),
        }

    def _ids(self, state: AgyState) -> tuple[str | None, str | None]:
        log = _read(state.run.file(LOG)) if state.run else ""
        return first_group(_PROJECT_ID, log), first_group(_CONVERSATION_ID, log)

    def after_version_fields(self, state: AgyState) -> dict:
        project, conversation = self._ids(state)
        return {"projectId": project, "conversationId": conversation}

    def summary_lines(self, opts: dict, state: AgyState, result: dict) -> list[str]:
        lines = []
        if result["resumed"]:
            lines.append("mode: resumed an existing conversation")
        if opts["dangerouslySkipPermissions"]:
            lines.append("warning: Antigravity's permission checks were skipped (full access).")
        if result["projectId"]:
            lines.append(f"project id: {result['projectId']}")
        return lines + session_lines(result["conversationId"], "--conversation", "conversation id")


ADAPTER = Agy()
