"""Cursor Agent (`cursor-agent --print`): brief on stdin, stream-json events, force or plan.

Write runs pass `--force` so no command approval can stall a headless run
(`--no-force` leaves approvals to Cursor's own rules). Read-only runs use
`--mode plan` instead of `--force`. `--sandbox enabled|disabled` is a
per-dispatch choice, never a lane dial. Model names may carry Cursor's
bracketed parameters (`name[context=1m,effort=high]`).
"""

from __future__ import annotations

from delegate_skills import registry
from delegate_skills.relay.adapter import Adapter, State, TextTail
from delegate_skills.relay.options import (
    Flag,
    Usage,
    check_exclusive,
    check_model,
    switch_flag,
    timeout_ms,
    value_flag,
)
from delegate_skills.relay.parts import (
    add_dir_args,
    add_dir_flag,
    check_session,
    is_init,
    resume_args,
    resume_lines,
    resumed,
    session_flags,
    text_blocks,
)

SANDBOX = ("enabled", "disabled")
#: Marks an explicit --force, which alone outranks a read-only lane.
FORCE_ON = "forceOn"


class CursorState(State):
    def __init__(self, opts: dict) -> None:
        super().__init__(opts)
        self.model: str | None = None
        self.permission_mode: str | None = None
        self.chunks = TextTail("\n\n")
        self.result_text: str | None = None
        self.is_error = False
        self.usage: dict | None = None


class Cursor(Adapter):
    key = "cursor"
    display = "Cursor"
    label = "cursor-agent"
    tool = "cursor-agent"
    version_field = "cursorAgentVersion"
    install_hint = "Get Cursor's CLI (https://cursor.com/cli), then sign in: `cursor-agent login`."
    write_access = "`--force`"
    read_only_route = "`--read-only`: plan mode"
    about = (
        "Runs `cursor-agent --print` (Cursor's agent CLI) with the brief piped to its\n"
        "stdin, and records the stream-json events. Write runs pass --force (turn it off with\n"
        "--no-force); --read-only runs in Cursor's plan mode instead. --sandbox\n"
        "enabled|disabled is chosen per dispatch."
    )
    default_timeout = "30m"
    stderr_file = True
    path_fields = ("brief", "final", "events", "stderr")
    lane_blockers = (("readOnly", (FORCE_ON,)), ("force", ("readOnly",)))
    flags = (
        switch_flag(
            "--read-only",
            "readOnly",
            "Cursor's plan mode (--mode plan) instead of --force.",
            flagged=True,
        ),
        Flag(
            "--force",
            sets={"force": True},
            flags=("force", FORCE_ON),
            help="Pass --force: run commands without approval (the default).",
        ),
        Flag(
            "--no-force",
            sets={"force": False},
            flags=("force",),
            help="Leave --force off; Cursor's own approval rules apply.",
        ),
        value_flag("--sandbox", "sandbox", "<mode>", "enabled | disabled, for this dispatch only."),
        *session_flags(
            "Continue the most recent session (--continue).",
            "Continue this session (--resume <id>).",
        ),
        add_dir_flag("Extra workspace directory (repeatable; relative to --cd)."),
    )

    @property
    def unavailable_status(self) -> str:
        return "cursor_agent_unavailable"

    def defaults(self) -> dict:
        return {**super().defaults(), "force": None}

    def validate(self, opts: dict) -> None:
        sandbox = opts["sandbox"]
        if sandbox is not None and sandbox not in SANDBOX:
            raise Usage(f'--sandbox "{sandbox}" is invalid; expected enabled or disabled')
        check_session(opts)
        check_exclusive(opts, ("readOnly", "--read-only"), ("force", "--force"))
        check_model(opts, registry.CURSOR_MODEL)
        timeout_ms(opts)

    def forced(self, opts: dict) -> bool:
        return opts["force"] is not False and not opts["readOnly"]

    def build_argv(self, opts: dict, run) -> list[str]:
        argv = ["--print", "--output-format", "stream-json", "--trust"]
        if opts["readOnly"]:
            argv += ["--mode", "plan"]
        elif self.forced(opts):
            argv.append("--force")
        if opts["sandbox"]:
            argv += ["--sandbox", opts["sandbox"]]
        if opts["model"]:
            argv += ["--model", opts["model"]]
        return argv + resume_args(opts) + add_dir_args(opts)

    def new_state(self, opts: dict) -> State:
        return CursorState(opts)

    def on_event(self, state: CursorState, event: dict) -> None:
        if isinstance(event.get("session_id"), str):
            state.session_id = event["session_id"]
        kind = event.get("type")
        if is_init(event):
            if isinstance(event.get("model"), str):
                state.model = event["model"]
            if isinstance(event.get("permissionMode"), str):
                state.permission_mode = event["permissionMode"]
        elif kind == "assistant" and isinstance(event.get("message"), dict):
            state.chunks.extend(text_blocks(event["message"].get("content")))
        elif kind == "result":
            if isinstance(event.get("result"), str):
                state.result_text = event["result"]
            if event.get("is_error") is True:
                state.is_error = True
            if isinstance(event.get("usage"), dict):
                state.usage = event["usage"]

    def final_message(self, state: CursorState, run) -> str:
        if state.result_text and state.result_text.strip():
            return state.result_text
        return state.chunks.text()

    def failure(self, state: CursorState) -> str | None:
        if state.is_error:
            return "cursor-agent reported an error result (is_error: true in its result event)"
        return None

    def config_fields(self, opts: dict, state: State) -> dict:
        return {
            "model": opts["model"],
            "readOnly": opts["readOnly"],
            "force": self.forced(opts),
            "sandbox": opts["sandbox"],
            "resumed": resumed(opts),
        }

    def id_fields(self, state: CursorState) -> dict:
        return {
            "sessionId": state.session_id,
            "resolvedModel": state.model,
            "permissionMode": state.permission_mode,
            "usage": state.usage,
        }

    def summary_lines(self, opts: dict, state: CursorState, result: dict) -> list[str]:
        lines = ["mode: read-only (plan)"] if opts["readOnly"] else []
        if state.model:
            mode = f"  ·  permission mode: {state.permission_mode}" if state.permission_mode else ""
            lines.append(f"model: {state.model}{mode}")
        return [*lines, *resume_lines(result["resumed"], state.session_id)]


ADAPTER = Cursor()
