"""Qwen Code (`qwen`): brief on stdin, stream-json messages, `--approval-mode`.

Qwen Code grew out of Gemini CLI and keeps its `--approval-mode`; its stream
speaks in `system` / `assistant` / `user` / `result` messages instead. Write
runs use `--approval-mode auto-edit` (file edits; headless qwen denies the
shell and anything else that would need a prompt, and lists those denials in
its result). Read-only runs use `--approval-mode plan`, which offers the
model read and search tools only.
"""

from __future__ import annotations

from delegate_skills import registry, rules
from delegate_skills.relay.adapter import State
from delegate_skills.relay.approvalmodes import ApprovalModeAdapter
from delegate_skills.relay.options import value_flag
from delegate_skills.relay.parts import ResultState, read_result_event, result_failure, text_blocks

#: An endpoint URL, without the characters Windows' cmd.exe (which runs npm's qwen.cmd) reads.
URL = rules.Token(r"A-Za-z0-9._:/?=+~@-", "letters, digits, . _ : / ? = + ~ @ -")


class QwenState(ResultState):
    def __init__(self, opts: dict) -> None:
        super().__init__(opts)
        self.last_text = ""
        self.model: str | None = None
        self.denied: list[str] = []


class Qwen(ApprovalModeAdapter):
    key = "qwen"
    #: Qwen Code counts as Gemini CLI does: its cache reads are part of input_tokens.
    cache_inside_input = True
    resume_keeps_id = True  # checked against the real CLI
    display = "Qwen Code"
    tool = "qwen"
    install_hint = "Install Qwen Code (npm i -g @qwen-code/qwen-code; Node 22+), then run `qwen`."
    write_access = "`--approval-mode auto-edit` (file edits; no shell)"
    read_only_route = (
        "`--read-only`: `--approval-mode plan`, read and search tools only (qwen's own memory "
        "helper may still write under ~/.qwen, outside the work tree)"
    )
    about = (
        "Hands a brief to Qwen Code on stdin (`qwen --output-format stream-json`) and\n"
        "records its messages. Write runs use --approval-mode auto-edit (file edits;\n"
        "headless qwen denies the shell and lists each denial); --read-only uses\n"
        "--approval-mode plan, read and search tools only. yolo runs everything\n"
        "unasked and is used only when named."
    )
    modes = registry.QWEN_APPROVAL
    write_mode = "auto-edit"
    latest_args = ("--continue",)
    own_flags = (
        value_flag(
            "--openai-base-url",
            "openaiBaseUrl",
            "<url>",
            "OpenAI-compatible endpoint for this run (qwen --openai-base-url).",
            flagged=False,
            token=URL,
        ),
    )

    def build_argv(self, opts: dict, run) -> list[str]:
        argv = self.head_argv(opts)
        if opts["openaiBaseUrl"]:
            argv += ["--openai-base-url", opts["openaiBaseUrl"]]
        return argv

    def new_state(self, opts: dict) -> State:
        return QwenState(opts)

    def on_event(self, state: QwenState, event: dict) -> None:
        if isinstance(event.get("session_id"), str) and event["session_id"]:
            state.session_id = event["session_id"]
        kind = event.get("type")
        if kind == "system" and event.get("subtype") == "init":
            if isinstance(event.get("model"), str):
                state.model = event["model"]
        elif kind == "assistant" and isinstance(event.get("message"), dict):
            text = "".join(text_blocks(event["message"].get("content")))
            if text.strip():
                state.last_text = text
        elif kind == "result":
            self._result(state, event)

    @staticmethod
    def _result(state: QwenState, event: dict) -> None:
        read_result_event(state, event)
        denials = event.get("permission_denials")
        if isinstance(denials, list):
            state.denied = [
                d["tool_name"]
                for d in denials
                if isinstance(d, dict) and isinstance(d.get("tool_name"), str)
            ]

    def final_message(self, state: QwenState, run) -> str:
        return (state.final or state.last_text).strip()

    def failure(self, state: QwenState) -> str | None:
        return result_failure(state, self.label)

    def id_fields(self, state: QwenState) -> dict:
        return {"sessionId": state.session_id, "actualModel": state.model}

    def metric_fields(self, state: QwenState) -> dict:
        fields = {"usage": state.usage, "permissionDenials": state.denied}
        return {**fields, **super().metric_fields(state)}

    def summary_lines(self, opts: dict, state: QwenState, result: dict) -> list[str]:
        lines = super().summary_lines(opts, state, result)
        if state.denied:
            lines.append("denied tools (qwen would have asked): " + ", ".join(state.denied))
        return lines


ADAPTER = Qwen()
