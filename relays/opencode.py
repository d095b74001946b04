"""OpenCode (`opencode run`): brief on stdin, JSON events, autonomy by agent.

`build` (the default) edits headlessly with `--auto`, so no permission prompt
can stall the run. `plan` (--read-only) never gets `--auto`, and that alone is
not read-only: OpenCode's plan agent still allows `bash` (so `echo x > f`
lands), may write `.opencode/plans/*.md`, may start subagents that can, and a
user config can widen it further. So a plan child also gets permission
overrides through its environment (verified against opencode 1.18.33 with a
scripted model and hostile user configs):

* OpenCode decides a permission by the *last* matching rule, and merges config
  sources keeping each key where the user first wrote it. Rules under the
  legacy `mode.plan` section are merged into the plan agent last, so keys
  there that no user writes (`?*` matches every permission name, `rea?` matches
  `read`) end up as the final rules: deny everything, then allow the read
  tools again.
* `agent.plan` pins the agent on (`disable: false`, `mode: primary`): a user
  config that disables it would otherwise fall back to build silently.
* OPENCODE_PERMISSION narrows every agent's base rules as a second line.
* OPENCODE_DISABLE_PROJECT_CONFIG stops OpenCode writing into the repository
  while it loads project config (it adds `$schema` to opencode.json and
  creates `.opencode/.gitignore`); the repository's AGENTS.md files, which
  that also hides, are handed back through `instructions`.

The read-only tripwire reports anything that still lands.
"""

from __future__ import annotations

import json
import os

from delegate_skills import registry
from delegate_skills.relay.adapter import FINAL_LIMIT, Adapter, State, TextParts, session_lines
from delegate_skills.relay.options import (
    Flag,
    Usage,
    check_model,
    check_token,
    switch_flag,
    timeout_ms,
    value_flag,
)
from delegate_skills.relay.parts import deep_merge, is_number
from delegate_skills.relay.tokens import add_counts

PLAN = "plan"
#: OpenCode's own rules for reading: .env files stay behind a prompt (rejected headless).
READ_RULES = {"*": "allow", "*.env": "ask", "*.env.*": "ask", "*.env.example": "allow"}
#: Plain names: take over the user's value for the usual keys.
PLAN_DENY = {
    "*": "deny",
    "bash": "deny",
    "edit": "deny",
    "task": "deny",
    "external_directory": "deny",
}
#: Spellings no user writes, so they are appended, and evaluated, last.
PLAN_LAST_WORD = {
    "?*": "deny",
    "rea?": READ_RULES,
    "gre?": "allow",
    "glo?": "allow",
    "lis?": "allow",
    "todowrit?": "allow",
    "invali?": "allow",
}
TOP_PERMISSION = {
    **{k: v for k, v in PLAN_DENY.items() if k != "external_directory"},
    "read": READ_RULES,
    "grep": "allow",
    "glob": "allow",
    "list": "allow",
    "todowrite": "allow",
    **PLAN_LAST_WORD,
}
INSTRUCTION_FILES = ("AGENTS.md", "CLAUDE.md")


def instruction_files(cwd: str) -> list[str]:
    """AGENTS.md files from `cwd` up to the git root (CLAUDE.md when there are none)."""
    chain, directory = [], os.path.abspath(cwd)
    while True:
        chain.append(directory)
        parent = os.path.dirname(directory)
        if os.path.exists(os.path.join(directory, ".git")) or parent == directory:
            break
        directory = parent
    for name in INSTRUCTION_FILES:
        found = [os.path.join(d, name) for d in chain if os.path.isfile(os.path.join(d, name))]
        if found:
            return found
    return []


def plan_environment(env: dict[str, str], cwd: str) -> dict[str, str]:
    """`env` with the overrides that make a plan run read-only (see the module docstring)."""
    override: dict = {
        "agent": {"plan": {"disable": False, "mode": "primary", "permission": dict(PLAN_DENY)}},
        "mode": {"plan": {"permission": dict(PLAN_LAST_WORD)}},
        "lsp": False,
    }
    files = instruction_files(cwd)
    inherited = env.get("OPENCODE_CONFIG_CONTENT")
    content = override
    if inherited:
        try:
            parsed = json.loads(inherited)
        except ValueError:
            parsed = None  # not plain JSON: dropped rather than run unmerged
        if isinstance(parsed, dict):
            if isinstance(parsed.get("instructions"), list):
                files = [*parsed["instructions"], *files]
            content = deep_merge(parsed, override)
    if files:
        content["instructions"] = files
    return {
        **env,
        "OPENCODE_CONFIG_CONTENT": json.dumps(content),
        "OPENCODE_PERMISSION": json.dumps(TOP_PERMISSION),
        "OPENCODE_DISABLE_PROJECT_CONFIG": "1",
    }


class OpenCodeState(State):
    def __init__(self, opts: dict) -> None:
        super().__init__(opts)
        self.session_id = opts.get("session") or None
        self.text_parts = TextParts()
        self.cost = 0.0
        self.saw_cost = False
        #: Every step's `tokens`, summed: {input, output, reasoning, total, cache: {read, write}}.
        self.tokens: dict | None = None


#: What a step's `tokens` holds that is summed over the run.
STEP_TOKENS = {
    "input": 0,
    "output": 0,
    "reasoning": 0,
    "total": 0,
    "cache": {"read": 0, "write": 0},
}


class OpenCode(Adapter):
    key = "opencode"
    git_dir_state = ("opencode",)  # the project id opencode writes on its first run
    resume_keeps_id = True  # checked against the real CLI
    display = "OpenCode"
    tool = "opencode"
    install_hint = "Get it with `npm i -g opencode-ai`, then sign in: `opencode auth login`."
    write_access = "build agent with `--auto`"
    read_only_route = "`--read-only`: plan agent, edits and shell denied"
    about = (
        "Runs `opencode run` with the brief piped to its stdin, and records the JSON\n"
        "events. Autonomy follows the agent: build (default) edits headlessly\n"
        "with --auto; plan (--read-only) gets no --auto and runs with edits and the\n"
        "shell denied. A fresh run needs --model provider/model."
    )
    flags = (
        value_flag(
            "--agent",
            "agent",
            "<name>",
            "OpenCode agent (default: build); plan for read-only.",
            token=registry.SHELL_SAFE,
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
        switch_flag("--auto", "auto", "Pass --auto to build runs (the default)."),
        Flag(
            "--no-auto",
            sets={"auto": False},
            help="Do not pass --auto; the agent's own permission config rules.",
        ),
        switch_flag(
            "--resume-last", "resumeLast", "Continue the most recent session (--continue)."
        ),
        value_flag(
            "--session",
            "session",
            "<id>",
            "Continue this session id (ses_…).",
            flagged=False,
            token=registry.SESSION_ID,
        ),
        switch_flag("--pure", "pure", "Run without external plugins."),
    )

    #: What a --model may hold.
    model_token = registry.SHELL_SAFE
    #: Whether a new session must name its model (opencode has no safe default).
    needs_model = True

    def defaults(self) -> dict:
        return {**super().defaults(), "agent": "build", "auto": True}

    def validate(self, opts: dict) -> None:
        check_model(opts, self.model_token)
        check_token(opts, "variant", "--variant", registry.SHELL_SAFE)
        timeout_ms(opts)

    def check_brief(self, opts: dict, brief: str) -> None:
        if opts["session"] and opts["resumeLast"]:
            raise Usage("--session and --resume-last are mutually exclusive; pass only one")
        new_session = not opts["resumeLast"] and not opts["session"]
        if self.needs_model and new_session and not opts["model"]:
            raise Usage(
                "no model given: pass --model provider/model — opencode has no safe default "
                "(e.g. a plan you're subscribed to, like opencode-go/kimi-k2.7-code)"
            )

    def read_only(self, opts: dict) -> bool:
        return opts["agent"] == PLAN

    def child_env(self, opts: dict) -> dict[str, str]:
        env = {**os.environ, "PWD": opts["cd"]}
        return plan_environment(env, opts["cd"]) if self.read_only(opts) else env

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
            state.text_parts.put(part_id, text[-FINAL_LIMIT:] if isinstance(text, str) else "")
        elif event.get("type") == "step_finish":
            cost = part.get("cost")
            if is_number(cost):
                state.cost += cost
                state.saw_cost = True
            if isinstance(part.get("tokens"), dict):
                state.tokens = add_counts(state.tokens, part["tokens"], STEP_TOKENS)

    def final_message(self, state: OpenCodeState, run) -> str:
        return state.text_parts.text()[-FINAL_LIMIT:].strip()

    def config_fields(self, opts: dict, state: State) -> dict:
        return {
            "agent": opts["agent"],
            "model": opts["model"],
            "variant": opts["variant"],
            "auto": opts["auto"],
            "resumed": bool(opts["session"] or opts["resumeLast"]),
            "resumeLast": opts["resumeLast"],
        }

    def reported_usage(self, state: OpenCodeState) -> dict | None:
        return state.tokens

    def reported_cost(self, state: OpenCodeState) -> float | None:
        return round(state.cost, 6) if state.saw_cost else None

    def trailing_fields(self, state: OpenCodeState) -> dict:
        return {"cost": self.reported_cost(state)}

    def summary_lines(self, opts: dict, state: OpenCodeState, result: dict) -> list[str]:
        lines = []
        if result["resumed"]:
            lines.append("mode: resumed existing session")
        lines += session_lines(state.session_id)
        if state.saw_cost:
            lines.append(f"cost: ${result['cost']}")
        return lines


ADAPTER = OpenCode()
