"""Gemini CLI (`gemini`): brief on stdin, stream-json events, `--approval-mode`.

Write runs use `--approval-mode auto_edit`: gemini's file tools run, its shell
tool stays denied (headless gemini denies whatever would need a prompt).
Read-only runs use `--approval-mode plan`, which keeps the writing and shell
tools away from the model; plan mode may still write its plan as Markdown
under gemini's own home (~/.gemini), never in the work tree. Gemini refuses
to run headless in a folder it does not trust (exit 55): the relay leaves
that rule alone unless `--skip-trust` asks it to pass gemini's own flag.
"""

from __future__ import annotations

from delegate_skills import registry
from delegate_skills.relay.adapter import State, TextTail
from delegate_skills.relay.approvalmodes import ApprovalModeAdapter
from delegate_skills.relay.options import switch_flag

UNTRUSTED = 55
AUTH = 41
EXIT_HINTS = {
    UNTRUSTED: (
        "gemini does not trust {cd} (exit 55); trust it once in interactive gemini, set "
        "GEMINI_CLI_TRUST_WORKSPACE=true, or pass --skip-trust"
    ),
    AUTH: "gemini is not signed in (exit 41); run `gemini` once to sign in, or set GEMINI_API_KEY",
}


class GeminiState(State):
    def __init__(self, opts: dict) -> None:
        super().__init__(opts)
        self.texts = TextTail()
        self.turn_ended = False
        self.model: str | None = None
        self.status: str | None = None
        self.error: str | None = None
        self.usage: dict | None = None


class Gemini(ApprovalModeAdapter):
    key = "gemini"
    resume_keeps_id = True  # checked against the real CLI
    display = "Gemini CLI"
    tool = "gemini"
    install_hint = (
        "Install Gemini CLI (npm i -g @google/gemini-cli), then run `gemini` once in the "
        "repository to sign in and trust it (or pass --skip-trust)."
    )
    write_access = "`--approval-mode auto_edit` (file edits; no shell)"
    read_only_route = (
        "`--read-only`: `--approval-mode plan`, read and search tools only "
        "(a plan may go to ~/.gemini, outside the work tree)"
    )
    about = (
        "Hands a brief to Gemini CLI on stdin (`gemini --output-format stream-json`)\n"
        "and records its events. Write runs use --approval-mode auto_edit (file edits,\n"
        "no shell: headless gemini denies what would need a prompt); --read-only uses\n"
        "--approval-mode plan, read and search tools only. yolo runs everything\n"
        "unasked and is used only when named. Gemini's folder trust stays in force\n"
        "unless --skip-trust is passed."
    )
    modes = registry.GEMINI_APPROVAL
    write_mode = "auto_edit"
    dir_flag = "--include-directories"
    latest_args = ("--resume", "latest")
    own_flags = (
        switch_flag(
            "--skip-trust",
            "skipTrust",
            "Pass gemini's --skip-trust: trust --cd for this run (its .gemini settings and "
            ".env load).",
        ),
        switch_flag(
            "--sandbox", "sandbox", "Run gemini's tools in its container sandbox (--sandbox)."
        ),
    )

    def build_argv(self, opts: dict, run) -> list[str]:
        argv = self.head_argv(opts)
        if opts["skipTrust"]:
            argv.append("--skip-trust")
        if opts["sandbox"]:
            argv.append("--sandbox")
        return argv

    def new_state(self, opts: dict) -> State:
        return GeminiState(opts)

    def on_event(self, state: GeminiState, event: dict) -> None:
        kind = event.get("type")
        if kind == "init":
            if isinstance(event.get("session_id"), str):
                state.session_id = event["session_id"]
            if isinstance(event.get("model"), str):
                state.model = event["model"]
        elif kind == "message" and event.get("role") == "assistant":
            content = event.get("content")
            if isinstance(content, str) and content:
                if state.turn_ended and state.texts:
                    state.texts.append("\n\n")
                state.turn_ended = False
                state.texts.append(content)
        elif kind in ("tool_use", "tool_result"):
            state.turn_ended = True
        elif kind == "result":
            state.status = event.get("status") if isinstance(event.get("status"), str) else None
            error = event.get("error")
            if isinstance(error, dict) and isinstance(error.get("message"), str):
                state.error = error["message"]
            if isinstance(event.get("stats"), dict):
                state.usage = event["stats"]

    def final_message(self, state: GeminiState, run) -> str:
        return state.texts.text().strip()

    def failure(self, state: GeminiState) -> str | None:
        hint = EXIT_HINTS.get(state.exit_code)
        if hint:
            return hint.format(cd=state.opts["cd"])
        if state.status == "error":
            return f"gemini reported an error: {state.error or 'no message'}"
        if state.status is None and state.exit_code == 0:
            return "gemini exited without a result event; inspect events.jsonl and stderr.txt"
        return None

    def id_fields(self, state: GeminiState) -> dict:
        return {"sessionId": state.session_id, "actualModel": state.model}

    def metric_fields(self, state: GeminiState) -> dict:
        return {"usage": state.usage, **super().metric_fields(state)}

    def config_fields(self, opts: dict, state: State) -> dict:
        fields = super().config_fields(opts, state)
        return {**fields, "skipTrust": opts["skipTrust"], "sandbox": opts["sandbox"]}


ADAPTER = Gemini()
