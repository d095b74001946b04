"""Qoder (`qodercli -p`): brief in argv, stream-json events, permission modes.

Write runs use qodercli's `--permission-mode` (`auto` unless asked otherwise;
`bypass_permissions` only when asked for by name). `--permission-mode plan` is
refused: qodercli 1.1.52 no longer lists it and, given it, starts in `default`
mode with Edit and Bash still offered. Read-only runs (--read-only or a
read-only lane) send `--permission-mode default --tools Read,Grep,Glob
--strict-mcp-config` instead, which qodercli honours (its init event then lists
exactly Glob, Grep and Read), and a run whose init event offers any other tool
is reported as failed, never as a read-only run.
"""

from __future__ import annotations

from delegate_skills import registry
from delegate_skills.relay.adapter import State, TextTail
from delegate_skills.relay.options import (
    SESSION,
    Usage,
    check_count,
    check_exclusive,
    check_filled,
    check_token,
    timeout_ms,
    value_flag,
)
from delegate_skills.relay.parts import (
    ArgvBriefAdapter,
    ResultState,
    add_dir_args,
    add_dir_flag,
    event_session,
    first_set,
    is_init,
    read_only_flag,
    read_result_event,
    resume_args,
    resume_last_flag,
    resume_lines,
    resumed,
    text_blocks,
)

PLAN = "plan"
PLAN_REFUSED = (
    "--permission-mode plan is not honoured by qodercli headless (it starts in default mode "
    "with Edit and Bash offered); use --read-only, the relay's read-only route"
)
DEFAULT_MODE = "auto"
BYPASS = "bypass_permissions"
#: What a read-only run may use: qodercli's built-in readers and nothing else.
READ_TOOLS = ("Read", "Grep", "Glob")
#: The mode a read-only run is started in: anything beyond the readers asks, and
#: a headless run has no one to answer.
READ_ONLY_MODE = "default"
TOO_BIG = "brief is {kb}KB; keep large context in workspace files instead of argv"


class QoderState(ResultState):
    def __init__(self, opts: dict) -> None:
        super().__init__(opts)
        self.model: str | None = None
        self.permission_mode: str | None = None
        self.tools: list | None = None
        self.chunks = TextTail("\n\n")
        self.deltas = TextTail()
        self.result_text = ""
        self.errors: list = []
        self.denials: list = []


class Qoder(ArgvBriefAdapter):
    key = "qoder"
    resume_field = "resume"
    display = "Qoder"
    label = "qodercli"
    tool = "qoder"
    report_name = "qoder"
    install_hint = (
        "Install it (https://docs.qoder.com/en/cli/quick-start) and sign in with "
        "`qodercli login`; unattended machines can export QODER_PERSONAL_ACCESS_TOKEN."
    )
    write_access = "`--permission-mode auto`"
    read_only_route = "`--read-only`: Read, Grep and Glob only, no MCP servers"
    about = (
        "Hands a brief to the Qoder CLI (`qodercli -p <brief>`) and records its\n"
        "stream-json events. Write runs use --permission-mode (auto by default;\n"
        "bypass_permissions only when named; plan is refused, qodercli ignores it\n"
        "headless). Read-only runs (--read-only or a read-only lane) give qodercli\n"
        "its Read, Grep and Glob tools only and no MCP servers; a run whose init\n"
        "event offers more is reported as failed. The brief travels in argv (120KB\n"
        "at most)."
    )
    too_big = TOO_BIG
    argv_brief_where = "qodercli's argv"
    flags = (
        value_flag(
            "--context-window",
            "contextWindow",
            "<n>",
            "Context window size for models that support one.",
            flagged=False,
        ),
        value_flag(
            "--resume",
            "resume",
            "<id>",
            "Continue this qodercli session id (--resume <id>).",
            flagged=False,
        ),
        resume_last_flag("Continue the most recent session (-c)."),
        add_dir_flag("Extra workspace directory (repeatable; relative to --cd)."),
        value_flag(
            "--permission-mode",
            "permissionMode",
            "<mode>",
            "default | accept_edits | auto | bypass_permissions | dont_ask "
            "(default: auto; for a read-only run use --read-only).",
        ),
        read_only_flag("Read, Grep and Glob only, no MCP servers."),
    )

    def validate(self, opts: dict) -> None:
        check_exclusive(opts, ("resumeLast", "--resume-last"), ("resume", "--resume"))
        check_filled(opts, "resume", "--resume")
        check_token(opts, "resume", "--resume", SESSION)
        check_filled(opts, "model", "--model")
        check_count(opts, "contextWindow", "--context-window must be a positive integer")
        mode = opts["permissionMode"]
        if mode is not None and mode not in registry.QODER_PERMISSION:
            raise Usage(f"unsupported --permission-mode: {mode}")
        if mode == PLAN:
            raise Usage(PLAN_REFUSED)
        if opts["readOnly"] and mode not in (None, PLAN):
            raise Usage(
                f"--read-only and --permission-mode {mode} are mutually exclusive; pass only one"
            )
        timeout_ms(opts)
        if opts["readOnly"]:
            opts["permissionMode"] = PLAN
        opts["permissionMode"] = opts["permissionMode"] or DEFAULT_MODE
        opts["readOnly"] = opts["permissionMode"] == PLAN

    def apply_dial(self, opts: dict, field: str, value) -> None:
        # A read-only lane resolves to `permissionMode: plan` (as lane resolve
        # prints it); here that means the read-only route, never the mode itself.
        if field == "permissionMode" and value == PLAN:
            opts["readOnly"] = True
            return
        super().apply_dial(opts, field, value)

    def check_brief(self, opts: dict, brief: str) -> None:
        super().check_brief(opts, brief)
        if len(brief) > 1 and brief[0] == "-" and not brief[1].isspace():
            raise Usage(
                'brief starts with "-", which qodercli would take for one of its own options '
                "(the brief is a command-line argument); begin it with a word"
            )

    def build_argv(self, opts: dict, run) -> list[str]:
        argv = ["--output-format", "stream-json"]
        if opts["readOnly"]:
            argv += ["--permission-mode", READ_ONLY_MODE]
            argv += ["--tools", ",".join(READ_TOOLS), "--strict-mcp-config"]
        else:
            argv += ["--permission-mode", opts["permissionMode"]]
        argv += resume_args(opts, ("-c",), session="resume")
        if opts["model"]:
            argv += ["--model", opts["model"]]
        if opts["contextWindow"]:
            argv += ["--context-window", opts["contextWindow"]]
        argv += add_dir_args(opts)
        argv += ["-p", run.brief]
        return argv

    def new_state(self, opts: dict) -> State:
        return QoderState(opts)

    def on_event(self, state: QoderState, event: dict) -> None:
        session = event_session(event)
        if isinstance(session, str):
            state.session_id = session
        kind = event.get("type")
        if is_init(event):
            if isinstance(event.get("model"), str):
                state.model = event["model"]
            mode = first_set(event, "permissionMode", "permission_mode")
            if isinstance(mode, str):
                state.permission_mode = mode
            if isinstance(event.get("tools"), list):
                state.tools = event["tools"]
        if kind == "assistant" or event.get("role") == "assistant":
            message = event.get("message")
            content = message.get("content") if isinstance(message, dict) else None
            if content is None:
                content = event.get("content")
            state.chunks.extend(text_blocks(content))
        if kind == "content_block_delta":
            delta = event.get("delta")
            if isinstance(delta, dict) and isinstance(delta.get("text"), str):
                state.deltas.append(delta["text"])
        elif kind in ("result", "final"):
            self._on_result(state, event)

    def _on_result(self, state: QoderState, event: dict) -> None:
        # The outcome, subtype and usage as Claude-style result events carry them.
        read_result_event(state, event)
        state.is_error = state.is_error or event.get("status") == "error"
        text = first_set(event, "result", "final_message", "finalMessage")
        message = event.get("message")
        if isinstance(text, str):
            state.result_text = text
        elif not state.result_text and isinstance(message, str):
            state.result_text = message
        elif not state.result_text and isinstance(message, dict):
            state.result_text = "\n\n".join(text_blocks(message.get("content")))
        if isinstance(event.get("errors"), list):
            state.errors = event["errors"]
        if isinstance(event.get("permission_denials"), list):
            state.denials = event["permission_denials"]

    def final_message(self, state: QoderState, run) -> str:
        return state.result_text or state.chunks.text() or state.deltas.text()

    def extra_tools(self, state: QoderState) -> list[str]:
        """Tools the init event offered a read-only run beyond the readers."""
        if not state.opts["readOnly"] or state.tools is None:
            return []
        return [str(tool) for tool in state.tools if tool not in READ_TOOLS]

    def failure(self, state: QoderState) -> str | None:
        extra = self.extra_tools(state)
        if extra:
            return (
                "qodercli offered tools beyond Read, Grep and Glob to a read-only run "
                f"({', '.join(extra)}); this was not a read-only run"
            )
        if not state.saw_result:
            return "qodercli exited without a result event; inspect events.jsonl and stderr.txt"
        if state.opts["readOnly"] and state.tools is None:
            return (
                "qodercli never reported its tool list, so this read-only run could not be "
                "confirmed as one; inspect the working tree"
            )
        if state.is_error:
            return "qodercli reported an error result; see finalMessage"
        return None

    def config_fields(self, opts: dict, state: State) -> dict:
        return {
            "model": opts["model"],
            "contextWindow": opts["contextWindow"],
            "permissionMode": opts["permissionMode"],
            "readOnly": opts["readOnly"],
            "toolSurface": list(READ_TOOLS) if opts["readOnly"] else None,
            "resumed": resumed(opts, "resume"),
        }

    def id_fields(self, state: QoderState) -> dict:
        return {
            "sessionId": state.session_id,
            "actualModel": state.model,
            "actualPermissionMode": state.permission_mode,
            "usage": state.usage,
            "resultSubtype": state.subtype,
            "qoderErrors": state.errors,
            "permissionDenials": state.denials,
        }

    def summary_lines(self, opts: dict, state: QoderState, result: dict) -> list[str]:
        lines = []
        if opts["readOnly"]:
            lines.append("mode: read-only (Read, Grep and Glob only; no MCP servers)")
        elif opts["permissionMode"] == BYPASS:
            lines.append(
                "warning: bypass_permissions was explicitly chosen; qodercli ran every tool "
                "without asking."
            )
        if state.model:
            lines.append(f"model: {state.model}")
        if opts["contextWindow"]:
            lines.append(f"context window requested: {opts['contextWindow']}")
        return [*lines, *resume_lines(result["resumed"], state.session_id, "--resume")]


ADAPTER = Qoder()
