"""Auggie (`auggie --print`): brief as an instruction file, one JSON result.

Auggie's print mode allows every tool it has unless permission rules say
otherwise, so write runs may edit files and run commands. Its `--ask` switch
only adds an instruction to the prompt; the read-only route adds, on top of
it, `--permission <tool>:deny` for each of auggie's file-writing and process
tools, which auggie's own permission checks enforce (deny outranks any other
rule). Tools from MCP servers the user configured are not covered: the
tripwire reports what git saw. Auggie prints one JSON object at the end and
no token counts.
"""

from __future__ import annotations

import re

from delegate_skills import registry
from delegate_skills.relay.adapter import Adapter, State
from delegate_skills.relay.options import (
    Flag,
    Usage,
    check_model,
    switch_flag,
    timeout_ms,
    value_flag,
)
from delegate_skills.relay.parts import (
    ResultState,
    check_session,
    read_result_event,
    result_failure,
    resume_args,
    resume_lines,
    resumed,
    session_flags,
)

#: Auggie's tools that write files or run processes, denied on a read-only run.
WRITE_TOOLS = (
    "save-file", "str-replace-editor", "apply_patch", "remove-files",
    "launch-process", "write-process", "kill-process",
)  # fmt: skip
_RULE = re.compile(r"[A-Za-z0-9_.-]+:(?:allow|deny|ask-user)")
_POSITIVE_INT = re.compile(r"[1-9][0-9]{0,5}")


class Auggie(Adapter):
    key = "auggie"
    display = "Auggie"
    tool = "auggie"
    install_hint = "Install Auggie (npm i -g @augmentcode/auggie), then `auggie login`."
    write_access = "every auggie tool, shell included (print mode asks nothing)"
    read_only_route = (
        "`--read-only`: auggie's ask mode plus `--permission <tool>:deny` for its file-writing "
        "and process tools (auggie enforces the rules; MCP tools are not covered)"
    )
    about = (
        "Hands a brief to Auggie as an instruction file (`auggie --print\n"
        "--output-format json --instruction-file <brief>`) and records its JSON\n"
        "result. Print mode allows every tool auggie has, shell included; --read-only\n"
        "adds --ask and --permission <tool>:deny for each file-writing and process\n"
        "tool, which auggie enforces (MCP tools are not covered)."
    )
    default_timeout = "30m"
    brief_via = "file"
    stderr_file = True
    path_fields = ("brief", "events", "final", "stderr")
    flags: tuple[Flag, ...] = (
        switch_flag(
            "--read-only",
            "readOnly",
            "--ask, and deny auggie's file-writing and process tools.",
            flagged=True,
        ),
        *session_flags(
            "Continue the most recent Auggie session (auggie --continue).",
            "Continue this Auggie session id or prefix (--resume <id>).",
        ),
        value_flag("--max-turns", "maxTurns", "<n>", "Stop after this many agent turns."),
        value_flag(
            "--permission",
            "permissions",
            "<tool:policy>",
            "An auggie permission rule, policy allow, deny or ask-user (repeatable).",
            append=True,
        ),
    )

    def validate(self, opts: dict) -> None:
        check_session(opts)
        check_model(opts, registry.SHELL_SAFE)
        turns = opts["maxTurns"]
        if turns is not None and _POSITIVE_INT.fullmatch(turns) is None:
            raise Usage("--max-turns must be a positive integer")
        for rule in opts["permissions"]:
            if _RULE.fullmatch(rule) is None:
                raise Usage(
                    f'invalid --permission "{rule}" (expected <tool>:allow, <tool>:deny '
                    "or <tool>:ask-user)"
                )
        timeout_ms(opts)

    def build_argv(self, opts: dict, run) -> list[str]:
        argv = ["--print", "--output-format", "json"]
        argv += ["--instruction-file", run.file(self.brief_name)]
        if opts["model"]:
            argv += ["--model", opts["model"]]
        argv += resume_args(opts)
        if opts["maxTurns"]:
            argv += ["--max-turns", opts["maxTurns"]]
        for rule in opts["permissions"]:
            argv += ["--permission", rule]
        if opts["readOnly"]:
            argv.append("--ask")
            for tool in WRITE_TOOLS:
                argv += ["--permission", f"{tool}:deny"]
        return argv

    def new_state(self, opts: dict) -> State:
        return ResultState(opts)

    def on_event(self, state: ResultState, event: dict) -> None:
        if event.get("type") == "result":
            read_result_event(state, event)

    def failure(self, state: ResultState) -> str | None:
        return result_failure(state, self.label)

    def config_fields(self, opts: dict, state: State) -> dict:
        return {
            "model": opts["model"],
            "readOnly": opts["readOnly"],
            "resumed": resumed(opts),
            "maxTurns": int(opts["maxTurns"]) if opts["maxTurns"] else None,
            "permissions": list(opts["permissions"]),
        }

    def metric_fields(self, state: ResultState) -> dict:
        fields = {"resultSubtype": state.subtype, "numTurns": state.num_turns}
        return {**fields, **super().metric_fields(state)}

    def summary_lines(self, opts: dict, state: State, result: dict) -> list[str]:
        access = (
            "read-only (--ask, write and process tools denied)"
            if opts["readOnly"]
            else ("every tool, shell included")
        )
        return [f"tools: {access}", *resume_lines(result["resumed"], state.session_id)]


ADAPTER = Auggie()
