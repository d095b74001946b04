"""Mistral Vibe (`vibe`): brief as `--prompt=<brief>`, streaming JSON lines, autonomy by agent.

`accept-edits` (the default) applies file edits and refuses shell commands
that need approval; `auto-approve` (--full-access) approves everything and is
opt-in; read-only (--plan-only, or a lane's readOnly) runs the `ask` agent,
which runs no tool that needs approval. The Node bundle sends `--agent plan`,
which vibe 3.x no longer has (it rejects it with "Agent 'plan' not found";
vibe itself maps the old plan agent to `ask`).
"""

from __future__ import annotations

import re

from delegate_skills import registry
from delegate_skills.jsjson import js_number
from delegate_skills.relay.adapter import Adapter, State
from delegate_skills.relay.options import (
    Flag,
    Usage,
    check_exclusive,
    switch_flag,
    value_flag,
)
from delegate_skills.relay.parts import check_argv_brief, resume_lines, resumed, text_blocks

WRITE_AGENT = "accept-edits"
FULL_AGENT = "auto-approve"
#: vibe 3.x's read-only agent: a tool that needs approval is refused headlessly.
READ_ONLY_AGENT = "ask"
LIMIT_EXIT = 3
_POSITIVE_INT = re.compile(r"[1-9][0-9]*")
_POSITIVE_DECIMAL = re.compile(r"(?:0|[1-9][0-9]*)(?:\.[0-9]+)?")
_SAFE_INT_MAX = 2**53 - 1
LIMITS = (
    ("--max-turns", "maxTurns", "positive safe integer"),
    ("--max-price", "maxPrice", "positive decimal number"),
    ("--max-tokens", "maxTokens", "positive safe integer"),
)


def agent_of(opts: dict) -> str:
    if opts["planOnly"]:
        return READ_ONLY_AGENT
    return FULL_AGENT if opts["fullAccess"] else WRITE_AGENT


def _limit_value(text: str, kind: str) -> float | None:
    """The number a limit flag stands for, or None when it is not acceptable."""
    if kind == "positive decimal number":
        if not _POSITIVE_DECIMAL.fullmatch(text) or float(text) <= 0:
            return None
        value = float(text)
        return int(value) if value.is_integer() and value <= _SAFE_INT_MAX else value
    if not _POSITIVE_INT.fullmatch(text) or int(text) > _SAFE_INT_MAX:
        return None
    return int(text)


class VibeState(State):
    def __init__(self, opts: dict) -> None:
        super().__init__(opts)
        # Only what vibe itself reports: a --session id it never confirmed stays null.
        self.session_id = None
        self.last_text = ""


class Vibe(Adapter):
    key = "vibe"
    resume_keeps_id = True  # checked against the real CLI
    display = "Vibe"
    tool = "vibe"
    install_hint = "Install it with `uv tool install mistral-vibe` and export MISTRAL_API_KEY."
    write_access = "accept-edits agent; shell commands that need approval refused"
    read_only_route = "`--plan-only`: the ask agent"
    about = (
        "Hands a brief to Mistral Vibe headlessly (`vibe --prompt=<brief> --output\n"
        "streaming --trust`) and records its JSON lines. The agent sets autonomy:\n"
        "accept-edits by default (edits applied, shell commands that need approval\n"
        "refused), auto-approve only with --full-access, and ask for --plan-only\n"
        "(vibe 3.x has no plan agent; ask runs no tool that needs approval). A\n"
        "resumed session keeps the agent it was started with, whatever --agent says.\n"
        "The brief rides argv (visible in ps), so it is capped at 120 KiB."
    )
    has_model_flag = False
    default_timeout = "30m"
    stderr_file = True
    parser = "lines"
    brief_via = "argv"
    path_fields = ("brief", "final", "events", "stderr")
    flags = (
        value_flag(
            "--max-turns", "maxTurns", "<n>", "Stop after n turns (vibe exits 3).", flagged=False
        ),
        value_flag("--max-price", "maxPrice", "<usd>", "Stop at this cost in USD.", flagged=False),
        value_flag("--max-tokens", "maxTokens", "<n>", "Stop at this many tokens.", flagged=False),
        value_flag(
            "--session",
            "session",
            "<id>",
            "Resume this session (vibe --resume).",
            flagged=False,
            token=registry.SESSION_ID,
        ),
        switch_flag(
            "--resume-last", "resumeLast", "Continue the most recent session (vibe --continue)."
        ),
        Flag(
            "--plan-only",
            sets={"planOnly": True},
            flags=("planOnly", "readOnly"),
            help="Read-only: the ask agent (tools needing approval are refused).",
        ),
        Flag(
            "--full-access",
            sets={"fullAccess": True},
            flags=("fullAccess", "planOnly", "readOnly"),
            help="The auto-approve agent: every tool call approved (opt-in).",
        ),
        value_flag(
            "--enabled-tools",
            "enabledTools",
            "<tool>",
            "Allow only these tools (repeatable).",
            flagged=False,
            append=True,
            token=registry.TOOL_PATTERN,
        ),
        value_flag(
            "--disabled-tools",
            "disabledTools",
            "<tool>",
            "Refuse this tool (repeatable).",
            flagged=False,
            append=True,
            token=registry.TOOL_PATTERN,
        ),
    )

    def validate(self, opts: dict) -> None:
        for flag, field, kind in LIMITS:
            text = opts[field]
            if text is not None and _limit_value(text, kind) is None:
                raise Usage(f"{flag} must be a {kind}; got: {text}")
        check_exclusive(opts, ("resumeLast", "--resume-last"), ("session", "--session"))
        if opts["session"] is not None and not opts["session"].strip():
            raise Usage("--session must not be empty")
        check_exclusive(opts, ("planOnly", "--plan-only"), ("fullAccess", "--full-access"), "")
        for field, flag in (
            ("enabledTools", "--enabled-tools"),
            ("disabledTools", "--disabled-tools"),
        ):
            if any(not tool.strip() for tool in opts[field]):
                raise Usage(f"{flag} must not be empty")
        self.watchdog_ms(opts)

    def check_brief(self, opts: dict, brief: str) -> None:
        check_argv_brief(
            brief,
            "--prompt",
            "brief is {kb}KB; keep large context in workspace files instead of argv",
        )

    def read_only(self, opts: dict) -> bool:
        return bool(opts["planOnly"])

    def limits(self, opts: dict) -> dict:
        return {
            field: _limit_value(opts[field], kind) if opts[field] else None
            for _f, field, kind in LIMITS
        }

    def build_argv(self, opts: dict, run) -> list[str]:
        argv = ["--output", "streaming", "--agent", agent_of(opts), "--trust"]
        limits = self.limits(opts)
        for flag, field, _kind in LIMITS:
            if limits[field] is not None:
                argv += [flag, js_number(limits[field])]
        if opts["session"]:
            argv += ["--resume", opts["session"]]
        elif opts["resumeLast"]:
            argv.append("--continue")
        for tool in opts["enabledTools"]:
            argv += ["--enabled-tools", tool]
        for tool in opts["disabledTools"]:
            argv += ["--disabled-tools", tool]
        argv.append(f"--prompt={run.brief}")
        return argv

    def new_state(self, opts: dict) -> State:
        return VibeState(opts)

    def on_event(self, state: VibeState, event: dict) -> None:
        # Every entry of vibe 2.26 and 3.0 carries the session id; the Node bundle never reads it.
        session = event.get("sessionId")
        if isinstance(session, str) and session:
            state.session_id = session
        if event.get("role") != "assistant":
            return
        text = "".join(text_blocks(event.get("content")))
        if text:
            state.last_text = text

    def final_message(self, state: VibeState, run) -> str:
        return state.last_text.strip()

    def config_fields(self, opts: dict, state: State) -> dict:
        return {
            "agent": agent_of(opts),
            **self.limits(opts),
            "resumed": resumed(opts),
            "sessionId": state.session_id,
        }

    def id_fields(self, state: State) -> dict:
        return {}

    def summary_lines(self, opts: dict, state: State, result: dict) -> list[str]:
        lines = [f"agent: {result['agent']}"]
        resumed = result["resumed"]
        if resumed and opts["planOnly"]:
            lines.append(
                "warning: a resumed vibe session keeps the agent it started with; "
                "--plan-only may not apply to it."
            )
        if result["exitCode"] == LIMIT_EXIT and any(self.limits(opts).values()):
            lines.append(
                "hint: vibe exits 3 when a --max-turns/--max-price/--max-tokens limit stops it."
            )
        return [*lines, *resume_lines(resumed, state.session_id)]


ADAPTER = Vibe()
