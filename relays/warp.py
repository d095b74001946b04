"""Warp (`oz agent run`): the brief as the `--prompt` value, ndjson events, no read-only run.

`oz agent run` will not take a prompt from stdin or from its config file, so
the brief travels as one argv element. The relay never starts a shell, so
nothing in the brief is ever interpreted. The CLI has no sandbox, permission
mode or read-only run: a lane that asks for one of those is refused rather
than silently ignored, and the diff is the record of what happened.
"""

from __future__ import annotations

from delegate_skills.relay.adapter import Adapter, State, TextTail
from delegate_skills.relay.options import NOT_A_DURATION, Flag, Usage, switch_flag, value_flag
from delegate_skills.relay.parts import check_argv_brief, check_shell_tokens, text_blocks

#: Lane dials that would promise a restriction oz cannot make.
UNHONOURED_DIALS = (
    "readOnly",
    "sandbox",
    "permissionMode",
    "force",
    "effort",
    "variant",
    "provider",
)
TOO_BIG = (
    "brief is {kb} KiB; oz takes it as one --prompt argument, which the OS caps near "
    "128 KiB. Put large context in the workspace and point a shorter brief at it."
)


class WarpState(State):
    def __init__(self, opts: dict) -> None:
        super().__init__(opts)
        self.run_id: str | None = None
        self.run_url: str | None = None
        self.chunks = TextTail("\n\n")
        self.stream_error: str | None = None


def _texts(event: dict) -> list[str]:
    """The narration an event carries; system events and private reasoning carry none."""
    if event.get("type") in ("system", "agent_reasoning"):
        return []
    for field in ("agent_output", "text", "content"):
        value = event.get(field)
        if isinstance(value, str):
            return [value]
        if field == "content" and isinstance(value, list):
            return text_blocks(value)
    message = event.get("message")
    if isinstance(message, dict):
        content = message.get("content")
        if isinstance(content, str):
            return [content]
        return text_blocks(content)
    return []


class Warp(Adapter):
    key = "warp"
    resume_field = "conversation"
    latest_field = None
    display = "oz"
    label = "oz"
    tool = "oz"
    version_field = "ozVersion"
    install_hint = (
        "Get Warp's agent CLI (https://docs.warp.dev/cli/), then sign in with `oz login`; "
        "a headless host can export WARP_API_KEY instead."
    )
    session_field = "conversationId"
    write_access = "edits and runs commands as you"
    about = (
        "Runs `oz agent run --output-format ndjson` (Warp's agent CLI) on a brief and\n"
        "records the event stream. oz accepts a task only as --prompt, so the brief is\n"
        "one argv value: it shows in the process list while the run lasts and is bound\n"
        "by the OS argument limit; keep secrets out of it. No shell is ever involved.\n"
        "oz offers neither a sandbox nor permission modes nor a read-only run; it edits\n"
        "and runs commands as you, so there is no --read-only here and a lane that sets\n"
        "readOnly, sandbox, permissionMode, force, effort, variant or provider is\n"
        "refused. When the run\n"
        "ends, oz uploads a snapshot of the workspace; --no-snapshot stops that."
    )
    default_timeout = "30m"
    timeout_message = NOT_A_DURATION
    brief_via = "argv"
    stderr_file = True
    path_fields = ("brief", "final", "events", "stderr")
    flags = (
        value_flag("--profile", "profile", "<id>", "Warp agent profile id.", flagged=False),
        value_flag("--name", "name", "<name>", "Label for the run (oz --name).", flagged=False),
        value_flag(
            "--conversation",
            "conversation",
            "<id>",
            "Continue this Warp conversation; send only the new instructions.",
            flagged=False,
        ),
        value_flag(
            "--skill",
            "skill",
            "<spec>",
            "Base the prompt on a Warp skill (name, repo:name or org/repo:name).",
            flagged=False,
        ),
        Flag(
            "--mcp",
            "mcp",
            metavar="<spec>",
            append=True,
            help="MCP server config: a file path or inline JSON (repeatable).",
        ),
        switch_flag(
            "--no-snapshot",
            "noSnapshot",
            "Pass oz --no-snapshot: no workspace snapshot upload at the end.",
        ),
    )

    def refuse_dials(self, lane: str, dials: dict) -> None:
        for field in dials:
            if field in UNHONOURED_DIALS:
                raise Usage(
                    f'lane "{lane}" sets the {field} dial, which the Warp Agent CLI has no flag '
                    "for; remove it from the lane or use a different implementer"
                )

    def validate(self, opts: dict) -> None:
        check_shell_tokens(opts, ("model", "profile", "conversation"))
        named = [("--skill", opts["skill"])] + [("--mcp", spec) for spec in opts["mcp"]]
        named.append(("--name", opts["name"]))
        for flag, value in named:
            if value is not None and (value == "" or value.startswith("-")):
                raise Usage(f'{flag} value must be non-empty and must not start with "-"')
        self.watchdog_ms(opts)

    def check_brief(self, opts: dict, brief: str) -> None:
        check_argv_brief(brief, "the --prompt argument", TOO_BIG)

    def build_argv(self, opts: dict, run) -> list[str]:
        argv = ["agent", "run", "--output-format", "ndjson", "--cwd", opts["cd"]]
        for flag in ("model", "profile", "name", "conversation", "skill"):
            if opts[flag]:
                argv += [f"--{flag}", opts[flag]]
        for spec in opts["mcp"]:
            argv += ["--mcp", spec]
        if opts["noSnapshot"]:
            argv.append("--no-snapshot")
        return [*argv, "--prompt", run.brief]

    def new_state(self, opts: dict) -> State:
        return WarpState(opts)

    def on_event(self, state: WarpState, event: dict) -> None:
        for field, attr in (
            ("run_id", "run_id"),
            ("run_url", "run_url"),
            ("conversation_id", "session_id"),
        ):
            if isinstance(event.get(field), str):
                setattr(state, attr, event[field])
        if event.get("type") == "error" or event.get("event_type") == "run_failed":
            reason = event.get("message")
            if not isinstance(reason, str):
                reason = event.get("error")
            if not isinstance(reason, str):
                reason = f"oz reported {event.get('event_type') or event.get('type')}"
            state.stream_error = reason
        state.chunks.extend(text for text in _texts(event) if text.strip())

    def final_message(self, state: WarpState, run) -> str:
        return state.chunks.text()

    def failure(self, state: WarpState) -> str | None:
        return state.stream_error

    def config_fields(self, opts: dict, state: State) -> dict:
        return {
            "model": opts["model"],
            "profile": opts["profile"],
            "snapshotDisabled": opts["noSnapshot"],
            "resumed": bool(opts["conversation"]),
        }

    def id_fields(self, state: WarpState) -> dict:
        return {
            "runId": state.run_id,
            "runUrl": state.run_url,
            "conversationId": state.session_id,
        }

    def summary_lines(self, opts: dict, state: WarpState, result: dict) -> list[str]:
        lines = [
            "mode: full local tool access — the Warp Agent CLI has no sandbox, permission "
            "mode, or read-only run"
        ]
        if opts["noSnapshot"]:
            lines.append("mode: end-of-run workspace snapshot upload disabled (--no-snapshot)")
        if opts["conversation"]:
            lines.append("mode: continued an existing conversation")
        if opts["model"]:
            lines.append(f"model: {opts['model']}")
        if state.session_id:
            lines.append(
                f"conversation id (continue with: --conversation {state.session_id}): "
                f"{state.session_id}"
            )
        if state.run_id:
            lines.append(f"run id: {state.run_id}")
        if state.run_url:
            lines.append(f"run url: {state.run_url}")
        return lines


ADAPTER = Warp()
