"""OpenCode (`opencode run`): brief on stdin, JSON events, autonomy by agent.

`build` (the default) edits headlessly with `--auto`, so no permission prompt
can stall the run; `plan` (--read-only) never gets `--auto`, and its child is
started with permission overrides that deny edits and the shell outright, so
neither OpenCode's own plan defaults nor a user config that allows edits lets
it write. The read-only tripwire reports anything that still lands.
"""

from __future__ import annotations

import json
import os

from delegate_skills import registry
from delegate_skills.relay.adapter import Adapter, State
from delegate_skills.relay.options import (
    Flag,
    Usage,
    check_model,
    check_token,
    timeout_ms,
    value_flag,
)

PLAN = "plan"
#: Permissions for a plan run: read what you like, change nothing.
PLAN_PERMISSION = {"edit": "deny", "bash": "deny", "webfetch": "deny"}


class OpenCodeState(State):
    def __init__(self, opts: dict) -> None:
        super().__init__(opts)
        self.session_id = opts.get("session") or None
        self.text_parts: dict[str, str] = {}
        self.cost = 0.0
        self.saw_cost = False


class OpenCode(Adapter):
    key = "opencode"
    display = "OpenCode"
    label = "opencode"
    tool = "opencode"
    version_field = "opencodeVersion"
    install_hint = "Install it (npm i -g opencode-ai) and run `opencode auth login`."
    about = (
        "Hands a brief to the OpenCode CLI (`opencode run`) on stdin and records its\n"
        "JSON events. Autonomy follows the agent: build (default) edits headlessly\n"
        "with --auto; plan (--read-only) gets no --auto and runs with edits and the\n"
        "shell denied. A fresh run needs --model provider/model."
    )
    flags = (
        value_flag(
            "--agent", "agent", "<name>", "OpenCode agent (default: build); plan for read-only."
        ),
        Flag(
            "--read-only",
            sets={"agent": PLAN},
            flags=("agent", "readOnly"),
            help="Same as --agent plan.",
        ),
        value_flag(
            "--variant", "variant", "<name>", "Provider reasoning effort (high, max, minimal, …)."
        ),
        Flag("--auto", sets={"auto": True}, help="Pass --auto to build runs (the default)."),
        Flag(
            "--no-auto",
            sets={"auto": False},
            help="Do not pass --auto; the agent's own permission config rules.",
        ),
        Flag(
            "--resume-last",
            sets={"resumeLast": True},
            help="Continue the most recent session (--continue).",
        ),
        Flag("--session", "session", metavar="<id>", help="Continue this session id (ses_…)."),
        Flag("--pure", sets={"pure": True}, help="Run without external plugins."),
    )

    def defaults(self) -> dict:
        return {
            "agent": "build",
            "variant": None,
            "auto": True,
            "resumeLast": False,
            "session": None,
            "pure": False,
        }

    def validate(self, opts: dict) -> None:
        check_model(opts, registry.SHELL_SAFE)
        check_token(opts, "variant", "--variant", registry.SHELL_SAFE)
        timeout_ms(opts)

    def check_brief(self, opts: dict, brief: str) -> None:
        if opts["session"] and opts["resumeLast"]:
            raise Usage("--session and --resume-last are mutually exclusive; pass only one")
        if not opts["model"] and not opts["resumeLast"] and not opts["session"]:
            raise Usage(
                "no model given: pass --model provider/model — opencode has no safe default "
                "(e.g. a plan you're subscribed to, like opencode-go/kimi-k2.7-code)"
            )

    def read_only(self, opts: dict) -> bool:
        return opts["agent"] == PLAN

    def child_env(self, opts: dict) -> dict[str, str]:
        env = {**os.environ, "PWD": opts["cd"]}
        if self.read_only(opts):
            env["OPENCODE_PERMISSION"] = json.dumps(PLAN_PERMISSION)
        return env

    def build_argv(self, opts: dict, run) -> list[str]:
        argv = ["run", "--format", "json"]
        if opts["pure"]:
            argv.append("--pure")
        if opts["session"]:
            argv += ["--session", opts["session"]]
        elif opts["resumeLast"]:
            argv.append("--continue")
        argv += ["--agent", opts["agent"]]
        if opts["model"]:
            argv += ["--model", opts["model"]]
        if opts["variant"]:
            argv += ["--variant", opts["variant"]]
        if opts["auto"] and opts["agent"] != PLAN:
            argv.append("--auto")
        return argv

    def new_state(self, opts: dict) -> State:
        return OpenCodeState(opts)

    def on_event(self, state: OpenCodeState, event: dict) -> None:
        session = event.get("sessionID") or event.get("session_id")
        if session:
            state.session_id = session
        part = event.get("part") if isinstance(event.get("part"), dict) else None
        if part is None:
            return
        if event.get("type") == "text" and part.get("type") == "text":
            part_id = part.get("id") or f"anon-{len(state.text_parts)}"
            text = part.get("text")
            state.text_parts[part_id] = text if isinstance(text, str) else ""
        elif event.get("type") == "step_finish":
            cost = part.get("cost")
            if isinstance(cost, (int, float)) and not isinstance(cost, bool):
                state.cost += cost
                state.saw_cost = True

    def final_message(self, state: OpenCodeState, run) -> str:
        return "".join(state.text_parts.values()).strip()

    def config_fields(self, opts: dict, state: State) -> dict:
        return {
            "agent": opts["agent"],
            "model": opts["model"],
            "variant": opts["variant"],
            "auto": opts["auto"],
            "resumed": bool(opts["session"] or opts["resumeLast"]),
            "resumeLast": opts["resumeLast"],
        }

    def trailing_fields(self, state: OpenCodeState) -> dict:
        return {"cost": round(state.cost, 6) if state.saw_cost else None}

    def summary_lines(self, opts: dict, state: OpenCodeState, result: dict) -> list[str]:
        lines = []
        if result["resumed"]:
            lines.append("mode: resumed existing session")
        if state.session_id:
            lines.append(
                f"session id (resume with: --session {state.session_id}): {state.session_id}"
            )
        if state.saw_cost:
            lines.append(f"cost: ${result['cost']}")
        return lines


ADAPTER = OpenCode()
