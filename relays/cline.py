"""Cline (`cline --json`): brief on stdin, NDJSON run events, act or plan mode.

A write run is Cline's act mode with `--auto-approve true`. A review run is
plan mode, and the relay only ever sends `--plan` together with
`--auto-approve false`, so Cline cannot approve its own switch back to act
mode. The brief goes through a real pipe: Cline reads piped stdin only from a
FIFO or a regular file and would ignore a socket. Cline's own `-t/--timeout`
is never passed; the relay's watchdog is the only clock. Cline's headless JSON
mode has no way to resume a session, so the relay has no resume flags
(`--session` and `--resume-last` are unknown options, as for any other).

Cline 3 starts a hub daemon on its first run (its own session, so the
relay's sweep of the run's process group does not reach it) and later runs
execute inside that hub. It outlives every run by design; when one is up
after a run, the result names it (`hubDaemon`) and the summary says how to
stop it.
"""

from __future__ import annotations

import os

from delegate_skills import registry
from delegate_skills.relay.adapter import Adapter, State
from delegate_skills.relay.options import NOT_SCHEDULABLE, Usage, switch_flag, value_flag
from delegate_skills.relay.parts import is_number

#: The positional prompt: Cline joins it with the piped brief.
STDIN_PROMPT = "Follow the task instructions provided on stdin."
ABORT_EVENTS = ("run_aborted", "run_abort_requested")
#: The hub's discovery record, under Cline's data dir.
HUB_RECORD = os.path.join("locks", "hub", "production.json")
HUB_FLAG = b"--cline-hub-daemon"


def hub_daemon(env: dict[str, str]) -> dict | None:
    """The running Cline hub daemon (pid, url) its discovery record names, if any."""
    from delegate_skills.reading import CONFIG_LIMIT, read_json_object

    data_dir = env.get("CLINE_DATA_DIR") or os.path.join(
        env.get("HOME") or os.path.expanduser("~"), ".cline", "data"
    )
    record = read_json_object(os.path.join(data_dir, HUB_RECORD), CONFIG_LIMIT) or {}
    pid = record.get("pid")
    if not isinstance(pid, int) or isinstance(pid, bool) or pid <= 0:
        return None
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as handle:
            if HUB_FLAG not in handle.read().split(b"\0"):
                return None
    except OSError:
        return None
    url = record.get("url")
    return {"pid": pid, "url": url if isinstance(url, str) else None}


class ClineState(State):
    def __init__(self, opts: dict) -> None:
        super().__init__(opts)
        self.final: str | None = None
        self.provider: str | None = None
        self.model: str | None = None
        self.usage: dict | None = None
        self.finish_reason: str | None = None
        self.duration_ms: int | float | None = None


def _string(*values) -> str | None:
    """The first truthy value, when it is a string (the run events' fallbacks)."""
    for value in values:
        if value:
            return value if isinstance(value, str) else None
    return None


class Cline(Adapter):
    key = "cline"
    resume_field = None
    latest_field = None
    display = "cline"
    tool = "cline"
    install_hint = "Get the Cline CLI (npm i -g cline) or put it on PATH, then dispatch again."
    resumable = False
    write_access = "act mode, `--auto-approve true`"
    read_only_route = "`--plan`: plan mode with `--auto-approve false`"
    about = (
        "Hands a brief to the Cline CLI (`cline --json`) through a pipe on stdin and\n"
        "records its NDJSON run events. Act mode with --auto-approve true edits\n"
        "headlessly; --plan is plan mode, always paired with --auto-approve false so\n"
        "Cline cannot approve its own switch to act mode. Cline's headless JSON mode\n"
        "cannot resume a session: every dispatch is a fresh brief."
    )
    default_timeout = "30m"
    timeout_message = NOT_SCHEDULABLE
    stderr_file = True
    path_fields = ("brief", "final", "events", "stderr")
    flags = (
        value_flag("--provider", "provider", "<name>", "Cline's provider id (else its default)."),
        switch_flag(
            "--plan", "planMode", "Plan mode (analysis, no edits); sent with --auto-approve false."
        ),
        value_flag(
            "--auto-approve",
            "autoApprove",
            "<bool>",
            "true or false (default: true, or false with --plan).",
            flagged=False,
        ),
    )

    def validate(self, opts: dict) -> None:
        approve = opts["autoApprove"]
        if approve is not None and approve not in ("true", "false"):
            raise Usage("--auto-approve must be true or false")
        if opts["planMode"] and approve == "true":
            raise Usage(
                "--plan conflicts with --auto-approve true; plan mode requires "
                "auto-approve false to prevent a switch to act mode"
            )
        for field in ("model", "provider"):
            value = opts[field]
            if value is not None and not registry.SHELL_SAFE.accepts(value):
                raise Usage(
                    f"--{field} value contains unsupported characters "
                    f"(allowed: {registry.SHELL_SAFE.allowed})"
                )
        self.watchdog_ms(opts)

    def sandbox_refusal(self, opts: dict, env: dict[str, str]) -> str | None:
        hub = hub_daemon(env)
        if hub is None:
            return None
        return f"cline runs inside its hub daemon (pid {hub['pid']}), outside any sandbox"

    def read_only(self, opts: dict) -> bool:
        return opts["planMode"]

    def auto_approve(self, opts: dict) -> bool:
        if opts["autoApprove"] is None:
            return not opts["planMode"]
        return opts["autoApprove"] == "true"

    def build_argv(self, opts: dict, run) -> list[str]:
        argv = ["--json", "-v", "--auto-approve", "true" if self.auto_approve(opts) else "false"]
        if opts["provider"]:
            argv += ["--provider", opts["provider"]]
        if opts["model"]:
            argv += ["--model", opts["model"]]
        if opts["planMode"]:
            argv.append("--plan")
        argv.append(STDIN_PROMPT)
        return argv

    def new_state(self, opts: dict) -> State:
        return ClineState(opts)

    def on_event(self, state: ClineState, event: dict) -> None:
        kind = event.get("type")
        if kind == "run_start":
            if event.get("sessionId"):
                state.session_id = event["sessionId"]
            model = _string(event.get("modelId"), event.get("model"))
            provider = _string(event.get("providerId"), event.get("provider"))
            state.model = model or state.model
            state.provider = provider or state.provider
        elif kind == "run_result":
            if isinstance(event.get("finishReason"), str):
                state.finish_reason = event["finishReason"]
            if isinstance(event.get("text"), str):
                state.final = event["text"]
            if isinstance(event.get("usage"), dict):
                state.usage = event["usage"]
            model = event.get("model")
            if isinstance(model, dict):
                model = model.get("id")
            if isinstance(model, str):
                state.model = model
            duration = event.get("durationMs")
            if is_number(duration):
                state.duration_ms = duration
        elif kind in ABORT_EVENTS and state.finish_reason in (None, "completed"):
            # Cline 3.0.65 follows a failed run_result with run_aborted; the
            # result's own reason ("error") is the one worth keeping.
            state.finish_reason = "aborted"

    def final_message(self, state: ClineState, run) -> str:
        return state.final or ""

    def failure(self, state: ClineState) -> str | None:
        if state.finish_reason is None:
            return "cline exited without a run_result event; inspect events.jsonl and stderr.txt"
        if state.finish_reason != "completed":
            return f'cline ended with finishReason "{state.finish_reason}"'
        return None

    def config_fields(self, opts: dict, state: State) -> dict:
        return {
            "provider": opts["provider"],
            "model": opts["model"],
            "planMode": opts["planMode"],
            "autoApprove": self.auto_approve(opts),
        }

    def id_fields(self, state: ClineState) -> dict:
        return {
            "sessionId": state.session_id,
            "actualProvider": state.provider,
            "actualModel": state.model,
            "usage": state.usage,
            "finishReason": state.finish_reason,
            "durationMs": state.duration_ms,
        }

    def trailing_fields(self, state: ClineState) -> dict:
        hub = hub_daemon(dict(os.environ))
        return {"hubDaemon": hub} if hub else {}

    def summary_lines(self, opts: dict, state: ClineState, result: dict) -> list[str]:
        lines = []
        hub = result.get("hubDaemon")
        if hub:
            lines.append(
                f"cline hub daemon still running by design (pid {hub['pid']}, {hub['url']}); "
                "stop it with: cline hub stop"
            )
        if opts["planMode"]:
            lines.append("mode: plan-only (analysis, no edits)")
        if state.model:
            provider = f" (provider: {state.provider})" if state.provider else ""
            lines.append(f"model: {state.model}{provider}")
        if state.session_id:
            lines.append(f"session id: {state.session_id}")
        return lines


ADAPTER = Cline()
