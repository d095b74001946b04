"""Grok (`grok`): headless run from a prompt file, streaming JSON events.

Autonomy is one of three settings built from grok's own flags:
workspace-write (the default: `--always-approve --sandbox workspace`),
full-access (`--always-approve --sandbox off`, only when asked) and read-only
(`--sandbox read-only --permission-mode plan`). Grok's read-only is treated as
best-effort: the relay reports the git tripwire (`readOnlyViolation`) and
never claims it enforced anything. A run grok cancels itself (a tool call
that needed approval nobody could give) is a failure, not a completion.
"""

from __future__ import annotations

import json
import re

from delegate_skills.relay.adapter import Adapter, State, TextTail, session_lines
from delegate_skills.relay.options import (
    Flag,
    Usage,
    check_exclusive,
    switch_flag,
    value_flag,
)
from delegate_skills.relay.parts import check_shell_tokens, resume_args

AUTONOMY = ("workspace-write", "read-only", "full-access")
AUTONOMY_ARGS = {
    "workspace-write": ("--always-approve", "--sandbox", "workspace"),
    "read-only": ("--sandbox", "read-only", "--permission-mode", "plan"),
    "full-access": ("--always-approve", "--sandbox", "off"),
}
CANCELLED = "cancelled"
CANCEL_TEXT = "User cancelled the execution"
_CANCEL_NOTE = re.compile(re.escape(CANCEL_TEXT) + r"[^\"\\\n]{0,200}")
_POSITIVE_INT = re.compile(r"[1-9][0-9]*")


class GrokState(State):
    def __init__(self, opts: dict) -> None:
        super().__init__(opts)
        self.session_id = opts.get("session") or None
        self.texts = TextTail()
        self.usage: dict | None = None
        self.stop_reason: str | None = None
        #: The last "User cancelled the execution…" note no later `end` event overruled.
        self.cancel_note: str | None = None


def _session_of(event: dict):
    found = event.get("sessionId") or event.get("session_id")
    session = event.get("session")
    if not found and isinstance(session, dict):
        found = session.get("id") or session.get("sessionId")
    return found if isinstance(found, str) and found else None


class Grok(Adapter):
    key = "grok"
    resume_keeps_id = True  # checked against the real CLI
    display = "Grok"
    missing_at_launch_is_unavailable = False
    tool = "grok"
    install_hint = "Get it with `npm i -g @xai-official/grok`, then sign in: `grok login`."
    write_access = "workspace sandbox, tool calls approved"
    read_only_route = "`--read-only`: read-only sandbox and plan mode (best-effort)"
    about = (
        "Hands a brief to the Grok CLI through --prompt-file and records its\n"
        "streaming-json events. Default autonomy is workspace-write (grok's workspace\n"
        "sandbox, tool calls approved); --full-access turns the sandbox off and is\n"
        "opt-in. --read-only asks grok for its read-only sandbox and plan mode: that\n"
        "is best-effort, so the relay only reports what git saw (readOnlyViolation)\n"
        'and never claims enforcement. A run grok cancels itself ("User cancelled\n'
        'the execution", stopReason cancelled) is reported as failed.'
    )
    brief_via = "file"
    path_fields = ("brief", "events", "final")
    flags = (
        value_flag("--effort", "effort", "<level>", "Reasoning effort (grok --effort)."),
        value_flag(
            "--max-turns", "maxTurns", "<n>", "Positive limit on agent turns.", flagged=False
        ),
        Flag(
            "--read-only",
            sets={"autonomy": "read-only"},
            flags=("autonomy", "readOnly"),
            help="Best-effort read-only: grok's read-only sandbox + plan mode; the relay "
            "reports readOnlyViolation, it does not enforce.",
        ),
        Flag(
            "--full-access",
            sets={"autonomy": "full-access"},
            flags=("autonomy",),
            help="No sandbox, every tool call approved (opt-in). The last of --read-only "
            "and --full-access wins.",
        ),
        switch_flag(
            "--resume-last", "resumeLast", "Continue the most recent session (grok --continue)."
        ),
        value_flag(
            "--session", "session", "<id>", "Resume this session (grok --resume).", flagged=False
        ),
    )

    def defaults(self) -> dict:
        return {**super().defaults(), "autonomy": "workspace-write"}

    def validate(self, opts: dict) -> None:
        self.watchdog_ms(opts)
        if opts["autonomy"] not in AUTONOMY:
            raise Usage(f'invalid autonomy "{opts["autonomy"]}"')
        check_exclusive(opts, ("resumeLast", "--resume-last"), ("session", "--session"), "")
        check_shell_tokens(
            opts, (("model", "--model"), ("effort", "--effort"), ("session", "--session"))
        )
        turns = opts["maxTurns"]
        if turns is not None and not _POSITIVE_INT.fullmatch(turns):
            raise Usage("--max-turns must be a positive integer")

    def read_only(self, opts: dict) -> bool:
        return opts["autonomy"] == "read-only"

    def own_sandbox(self, opts: dict) -> bool:
        return opts["autonomy"] != "full-access"

    def extra_artifacts(self, opts: dict, run) -> dict[str, bytes]:
        # final.txt exists from the start, so finalPath is always a path.
        return {"final.txt": b""}

    def build_argv(self, opts: dict, run) -> list[str]:
        argv = [
            "--no-auto-update", "--no-alt-screen", "--output-format", "streaming-json",
            "--cwd", opts["cd"],
        ]  # fmt: skip
        argv += resume_args(opts)
        argv += AUTONOMY_ARGS[opts["autonomy"]]
        for flag, field in (
            ("--model", "model"),
            ("--effort", "effort"),
            ("--max-turns", "maxTurns"),
        ):
            if opts[field]:
                argv += [flag, opts[field]]
        argv += ["--prompt-file", run.file(self.brief_name)]
        return argv

    def new_state(self, opts: dict) -> State:
        return GrokState(opts)

    def on_event(self, state: GrokState, event: dict) -> None:
        session = _session_of(event)
        if session:
            state.session_id = session
        if isinstance(event.get("usage"), dict) and event["usage"]:
            state.usage = event["usage"]
        kind = event.get("type")
        if kind == "text":
            text = event.get("data") if isinstance(event.get("data"), str) else event.get("text")
            if isinstance(text, str) and text:
                state.texts.append(text)
        if kind not in ("end", "text", "thought"):
            # Tool updates and errors only: the model's own words may quote the phrase.
            note = _CANCEL_NOTE.search(json.dumps(event, ensure_ascii=False))
            if note:
                state.cancel_note = note.group(0).rstrip()
        if kind != "end":
            return
        stop = event.get("stopReason")
        state.stop_reason = stop if isinstance(stop, str) else None
        if state.stop_reason and state.stop_reason != CANCELLED:
            state.cancel_note = None

    def final_message(self, state: GrokState, run) -> str:
        return state.texts.text().strip()

    def failure(self, state: GrokState) -> str | None:
        if state.stop_reason != CANCELLED and state.cancel_note is None:
            return None
        said = state.cancel_note or f'stopReason "{CANCELLED}"'
        return (
            f"grok cancelled the run itself ({said}): a step needed an approval a headless "
            "run cannot give, so the brief was not carried out; inspect events.jsonl, then "
            "re-dispatch with the autonomy the task needs"
        )

    def config_fields(self, opts: dict, state: State) -> dict:
        return {
            "autonomy": opts["autonomy"],
            "model": opts["model"],
            "effort": opts["effort"],
            "resumeLast": opts["resumeLast"],
        }

    def metric_fields(self, state: GrokState) -> dict:
        return {"usage": state.usage, **super().metric_fields(state)}

    def summary_lines(self, opts: dict, state: GrokState, result: dict) -> list[str]:
        lines = [f"autonomy: {opts['autonomy']}"]
        if opts["autonomy"] == "read-only":
            lines.append(
                "read-only is best-effort for grok: readOnlyViolation reports what git saw; "
                "the relay does not enforce it."
            )
        if opts["resumeLast"]:
            lines.append("mode: resumed most recent session (--continue)")
        elif result["status"] != self.unavailable_status:
            lines += session_lines(state.session_id)
        if state.usage:
            usage = state.usage
            keys = ("total_tokens", "input_tokens", "output_tokens")
            shown = ["?" if usage.get(k) is None else usage[k] for k in keys]
            lines.append(f"tokens: {shown[0]} total (in {shown[1]}, out {shown[2]})")
        return lines


ADAPTER = Grok()
