"""Claude Code (`claude -p`): brief on stdin, stream-json events, a per-run settings profile.

Every run gets an explicit tool surface and a settings file (`profile.json`)
that turns off MCP and Claude.ai connectors and denies the common direct forms
of `git commit`, `git push` and nested `claude`. Write runs use acceptEdits
with Claude's shell sandbox required; read-only runs use plan mode with Read,
Glob and Grep only.
"""

from __future__ import annotations

import json
import math
import os
import re
import sys

from delegate_skills import registry
from delegate_skills.relay.adapter import Adapter, State
from delegate_skills.relay.options import (
    SESSION,
    Usage,
    check_choice,
    check_count,
    check_exclusive,
    check_model,
    check_token,
    timeout_ms,
    value_flag,
)
from delegate_skills.relay.parts import (
    ResultState,
    check_read_only_or_skip,
    event_session,
    finite_number,
    first_set,
    is_init,
    read_only_flag,
    resume_args,
    resume_lines,
    resumed,
    session_flags,
    skip_permissions_flag,
    text_or_none,
)

MAX_BRIEF_BYTES = 10_000_000
SHELL = "Bash"
READ_TOOLS = ("Read", "Glob", "Grep")
WRITE_TOOLS = (*READ_TOOLS, "Edit", "Write", SHELL)
DENY_RULES = tuple(
    f"{SHELL}({rule})"
    for rule in (
        "git commit *",
        "git * commit *",
        "git * commit",
        "git push *",
        "git * push *",
        "git * push",
        "claude *",
        "*claude-delegate*",
    )
)
SANDBOX = {
    "enabled": True,
    "failIfUnavailable": True,
    "autoAllowBashIfSandboxed": True,
    "allowUnsandboxedCommands": False,
    "excludedCommands": [],
    "filesystem": {"disabled": False},
}
PROFILE = "profile.json"
_POSITIVE_DECIMAL = re.compile(r"(?:0|[1-9][0-9]*)(?:\.[0-9]+)?")
_ERROR_SUBTYPE = re.compile(r"error(?:_|$)", re.IGNORECASE)


class ClaudeState(ResultState):
    def __init__(self, opts: dict) -> None:
        super().__init__(opts)
        self.session_id = opts.get("session") or None
        self.permission_mode = permission_mode(opts)
        self.cost = None


def permission_mode(opts: dict) -> str:
    if opts["readOnly"]:
        return "plan"
    return "bypassPermissions" if opts["dangerouslySkipPermissions"] else "acceptEdits"


class Claude(Adapter):
    key = "claude"
    session_id_after_signal = False
    resume_keeps_id = True  # checked against the real CLI
    display = "Claude Code"
    tool = "claude"
    install_hint = "Get Claude Code, then sign in: `claude auth login`."
    write_access = "acceptEdits; Read, Glob, Grep, Edit, Write and Bash in Claude's shell sandbox"
    read_only_route = "`--read-only`: plan mode; Read, Glob and Grep are its only tools"
    about = (
        "Hands a brief to a separate Claude Code process (`claude -p`) on stdin and\n"
        "records its stream-json output. Write runs use acceptEdits with Read, Glob,\n"
        "Grep, Edit, Write and Bash, inside Claude's required shell sandbox; a\n"
        "profile.json denies direct `git commit`, `git push` and nested `claude`\n"
        "(speed bumps, not a boundary). A --read-only run is in plan mode, and its\n"
        "only tools are Read, Glob and Grep. CLAUDECODE is removed from the child's\n"
        "environment."
    )
    stderr_file = True
    path_fields = ("brief", "events", "final", "stderr", ("settingsPath", PROFILE))
    flags = (
        value_flag(
            "--effort", "effort", "<level>", "low | medium | high | xhigh | max | ultracode"
        ),
        value_flag(
            "--max-turns", "maxTurns", "<n>", "Positive limit on agentic turns.", flagged=False
        ),
        value_flag(
            "--max-budget-usd",
            "maxBudgetUsd",
            "<amount>",
            "Positive spend limit in USD.",
            flagged=False,
        ),
        *session_flags(
            "Continue the most recent session (claude --continue).",
            "Continue this session (claude --resume <id>).",
        ),
        read_only_flag("Plan mode; Read, Glob and Grep only."),
        skip_permissions_flag("Use Claude's bypassPermissions mode; not with --read-only."),
    )

    def validate(self, opts: dict) -> None:
        check_exclusive(opts, ("resumeLast", "--resume-last"), ("session", "--session"))
        check_read_only_or_skip(opts, "")
        timeout_ms(opts)
        check_model(opts, registry.CLAUDE_MODEL)
        check_token(opts, "session", "--session", SESSION)
        check_choice(opts, "effort", "--effort", registry.CLAUDE_EFFORT)
        check_count(opts, "maxTurns", "--max-turns must be a positive safe integer", 2**53 - 1)
        budget = opts["maxBudgetUsd"]
        if budget is not None and (not _POSITIVE_DECIMAL.fullmatch(budget) or float(budget) <= 0):
            raise Usage("--max-budget-usd must be a positive decimal number")

    def check_brief(self, opts: dict, brief: str) -> None:
        size = len(brief.encode("utf-8", errors="replace"))
        if size > MAX_BRIEF_BYTES:
            raise Usage(
                f"brief is {math.ceil(size / 1e6)}MB; Claude Code caps piped stdin at 10MB. "
                "Put large context in the workspace and reference it from a smaller brief."
            )

    def child_env(self, opts: dict) -> dict[str, str]:
        env = dict(os.environ)
        env.pop("CLAUDECODE", None)
        return env

    def required_tools(self, opts: dict) -> tuple[tuple[str, str], ...]:
        # A write run requires Claude's shell sandbox (failIfUnavailable), on Linux.
        if opts["readOnly"] or not sys.platform.startswith("linux"):
            return ()
        return registry.SANDBOX_TOOLS["claude"]

    def tool_surface(self, opts: dict) -> tuple[str, ...]:
        return READ_TOOLS if opts["readOnly"] else WRITE_TOOLS

    def extra_artifacts(self, opts: dict, run) -> dict[str, bytes]:
        profile: dict = {"disableClaudeAiConnectors": True}
        profile["permissions"] = {"deny": [] if opts["readOnly"] else list(DENY_RULES)}
        if not opts["readOnly"]:
            profile["sandbox"] = SANDBOX
        return {PROFILE: (json.dumps(profile, indent=2) + "\n").encode()}

    def build_argv(self, opts: dict, run) -> list[str]:
        argv = [
            "-p", "--output-format", "stream-json", "--verbose",
            "--tools", ",".join(self.tool_surface(opts)),
            "--strict-mcp-config", "--disallowedTools", "mcp__*", "--disable-slash-commands",
            "--settings", run.file(PROFILE),
        ]  # fmt: skip
        if opts["readOnly"]:
            argv += ["--permission-mode", "plan"]
        elif opts["dangerouslySkipPermissions"]:
            argv.append("--dangerously-skip-permissions")
        else:
            argv += ["--permission-mode", "acceptEdits"]
        argv += resume_args(opts)
        for flag, field in (
            ("--model", "model"),
            ("--effort", "effort"),
            ("--max-turns", "maxTurns"),
            ("--max-budget-usd", "maxBudgetUsd"),
        ):
            if opts[field]:
                argv += [flag, opts[field]]
        return argv

    def new_state(self, opts: dict) -> State:
        return ClaudeState(opts)

    def on_event(self, state: ClaudeState, event: dict) -> None:
        session = event_session(event, ("id", "session_id"))
        if isinstance(session, str) and session:
            state.session_id = session
        if is_init(event):
            mode = first_set(event, "permissionMode", "permission_mode")
            if isinstance(mode, str) and mode:
                state.permission_mode = mode
        if event.get("type") != "result":
            return
        state.saw_result = True
        state.subtype = text_or_none(event.get("subtype"))
        state.is_error = event.get("is_error") is True or bool(
            state.subtype and _ERROR_SUBTYPE.match(state.subtype)
        )
        state.final = event["result"] if isinstance(event.get("result"), str) else ""
        state.usage = event["usage"] if isinstance(event.get("usage"), dict) else None
        state.cost = finite_number(first_set(event, "total_cost_usd", "cost_usd"))
        state.num_turns = finite_number(first_set(event, "num_turns", "numTurns"))

    def final_message(self, state: State, run) -> str:
        return state.final

    def failure(self, state: ClaudeState) -> str | None:
        if not state.saw_result:
            return (
                "claude exited without a terminal result event; inspect events.jsonl and stderr.txt"
            )
        if state.is_error:
            return "claude returned an error result" + (
                f" ({state.subtype})" if state.subtype else ""
            )
        return None

    def config_fields(self, opts: dict, state: ClaudeState) -> dict:
        return {
            "model": opts["model"],
            "effort": opts["effort"],
            "maxTurns": int(opts["maxTurns"]) if opts["maxTurns"] else None,
            "maxBudgetUsd": float(opts["maxBudgetUsd"]) if opts["maxBudgetUsd"] else None,
            "timeout": opts["timeout"],
            "readOnly": opts["readOnly"],
            "resumed": resumed(opts),
            "resumeLast": opts["resumeLast"],
            "permissionMode": state.permission_mode,
            "toolSurface": list(self.tool_surface(opts)),
            "shellSandbox": "not-applicable" if opts["readOnly"] else "strict",
            "dangerouslySkipPermissions": opts["dangerouslySkipPermissions"],
        }

    def after_version_fields(self, state: ClaudeState) -> dict:
        return {
            "sessionId": state.session_id,
            "resultSubtype": state.subtype,
            "numTurns": state.num_turns,
            "usage": state.usage,
            "totalCostUsd": state.cost,
        }

    def reported_cost(self, state: ClaudeState) -> float | None:
        return state.cost

    def summary_lines(self, opts: dict, state: ClaudeState, result: dict) -> list[str]:
        mode, sandbox = result["permissionMode"], result["shellSandbox"]
        lines = [f"permission mode: {mode}  ·  shell sandbox: {sandbox}"]
        if opts["dangerouslySkipPermissions"]:
            lines.append(
                "warning: bypassPermissions was explicitly enabled; direct file tools can "
                "reach beyond normal permission boundaries."
            )
        lines += resume_lines(result["resumed"], state.session_id, what="Claude session")
        if state.subtype:
            lines.append(f"result subtype: {state.subtype}")
        if state.num_turns is not None:
            lines.append(f"turns: {state.num_turns}")
        if state.cost is not None:
            lines.append(f"cost: ${state.cost}")
        if state.usage:
            usage = state.usage
            tokens_in = first_set(usage, "input_tokens", "inputTokens")
            tokens_out = first_set(usage, "output_tokens", "outputTokens")
            shown = ["?" if n is None else n for n in (tokens_in, tokens_out)]
            lines.append(f"tokens: in {shown[0]}, out {shown[1]}")
        return lines


ADAPTER = Claude()
