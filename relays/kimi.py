"""Kimi Code (`kimi --prompt=…`): brief in argv, stream-json messages, auto permissions.

Kimi's headless `--prompt` mode always runs in Kimi's auto permission mode and
rejects every autonomy switch next to `--prompt`, so the relay passes none.
Kimi has no read-only mode: the relay offers no --read-only, and a lane that
asks for one is refused rather than run with edits allowed. The brief rides
in one `--prompt=<brief>` token (the `=` form binds a brief that starts with
a dash), which caps its size.
"""

from __future__ import annotations

from delegate_skills import registry
from delegate_skills.relay.adapter import State, TextTail
from delegate_skills.relay.options import Usage, check_model, switch_flag, timeout_ms
from delegate_skills.relay.parts import (
    ArgvBriefAdapter,
    add_dir_args,
    add_dir_flag,
    check_session,
    resume_lines,
    resumed,
    session_flags,
)

TOO_BIG = (
    "brief is {kb}KB; kimi passes the prompt as a CLI argument, which the OS caps "
    "(~128KB on Linux). Trim it, or have kimi read large context from the workspace "
    "instead of inlining it."
)
NO_READ_ONLY_FLAG = (
    "--read-only is not available: kimi has no read-only mode (its headless --prompt mode "
    "always runs with auto permissions); use an implementer with a read-only mode for a "
    "review"
)
NO_READ_ONLY = (
    'lane "{lane}" asks for a read-only run, but kimi has no read-only mode (its headless '
    "--prompt mode always runs with auto permissions); remove readOnly from the lane or "
    "use an implementer with a read-only mode"
)


class KimiState(State):
    def __init__(self, opts: dict) -> None:
        super().__init__(opts)
        self.chunks = TextTail("\n\n")


class Kimi(ArgvBriefAdapter):
    key = "kimi"
    display = "Kimi"
    tool = "kimi"
    install_hint = "Get Kimi Code, then sign in: `kimi login`."
    write_access = "auto permission mode, always"
    about = (
        "Hands a brief to the Kimi Code CLI as `kimi --prompt=<brief>` and records its\n"
        "stream-json messages. Headless --prompt runs always use Kimi's auto\n"
        "permission mode: kimi has no read-only mode, so --read-only and a read-only\n"
        "lane are refused. The brief travels in argv (120KB at most)."
    )
    too_big = TOO_BIG
    argv_brief_where = "--prompt"
    flags = (
        *session_flags(
            "Continue the most recent Kimi session (kimi --continue).",
            "Continue this Kimi session id.",
        ),
        add_dir_flag("Extra directory Kimi may use (repeatable; relative to --cd)."),
        switch_flag(
            "--read-only", "readOnly", "Refused: kimi has no read-only mode.", flagged=True
        ),
    )

    def refuse_dials(self, lane: str, dials: dict) -> None:
        if dials.get("readOnly") is True:
            raise Usage(NO_READ_ONLY.format(lane=lane))

    def validate(self, opts: dict) -> None:
        if opts["readOnly"]:
            raise Usage(NO_READ_ONLY_FLAG)
        check_session(opts)
        check_model(opts, registry.SHELL_SAFE)
        timeout_ms(opts)

    def read_only(self, opts: dict) -> bool:
        return False

    def build_argv(self, opts: dict, run) -> list[str]:
        argv = ["--output-format", "stream-json"]
        if opts["model"]:
            argv += ["-m", opts["model"]]
        if opts["session"]:
            argv += ["--session", opts["session"]]
        elif opts["resumeLast"]:
            argv.append("--continue")
        argv += add_dir_args(opts)
        argv.append(f"--prompt={run.brief}")
        return argv

    def new_state(self, opts: dict) -> State:
        return KimiState(opts)

    def on_event(self, state: KimiState, event: dict) -> None:
        role = event.get("role")
        if role == "assistant" and isinstance(event.get("content"), str):
            state.chunks.append(event["content"])
        elif (
            role == "meta"
            and event.get("type") == "session.resume_hint"
            and isinstance(event.get("session_id"), str)
        ):
            state.session_id = event["session_id"]

    def final_message(self, state: KimiState, run) -> str:
        return state.chunks.text()

    def config_fields(self, opts: dict, state: State) -> dict:
        return {"model": opts["model"], "resumed": resumed(opts)}

    def summary_lines(self, opts: dict, state: State, result: dict) -> list[str]:
        mode = "permission mode: auto (kimi's headless mode; kimi has no read-only mode)"
        return [mode, *resume_lines(result["resumed"], state.session_id)]


ADAPTER = Kimi()
