"""Oh My Pi (`omp --mode json`): brief on stdin, JSON events, approval mode yolo.

A write run passes `--yolo` (omp's approval mode yolo), so no tool call waits
for a person. A read-only run drops it and limits omp to the `read,grep,glob`
tools. Project-level `.omp` extras (extensions, skills, rules) stay off unless
`--approve` says the project is trusted. The lane's effort dial reaches this
relay as `thinking` (lane resolution renames it) and goes out as `--thinking`.
"""

from __future__ import annotations

from delegate_skills import registry
from delegate_skills.relay.adapter import Adapter, State
from delegate_skills.relay.options import Flag, check_choice, check_exclusive, value_flag

from ._shell_tokens import check_tokens

READ_ONLY_TOOLS = "read,grep,glob"
#: What keeps a project's own `.omp` resources out of an unapproved run.
UNTRUSTED = ("--no-extensions", "--no-skills", "--no-rules")
#: stopReason values that mean the assistant did not finish its turn.
FAILED_STOPS = ("error", "aborted")


class OmpState(State):
    def __init__(self, opts: dict) -> None:
        super().__init__(opts)
        self.texts: list[str] = []
        self.provider: str | None = None
        self.model: str | None = None
        self.usage: dict | None = None
        self.stop_reason: str | None = None
        #: An assistant error is kept even when a later message carries none.
        self.error: str | None = None


class Omp(Adapter):
    key = "omp"
    display = "omp"
    label = "omp"
    tool = "omp"
    version_field = "ompVersion"
    install_hint = (
        "Install with `bun install -g @oh-my-pi/pi-coding-agent`, then authenticate "
        "(`/login`, or an API-key environment variable)."
    )
    about = (
        "Hands a brief to Oh My Pi (`omp --mode json`) on stdin and records its JSON\n"
        "event stream. Write runs use approval mode yolo (--yolo); --read-only gives\n"
        "omp only the read, grep and glob tools. The project's own .omp extensions,\n"
        "skills and rules are switched off unless --approve trusts them. To see which\n"
        "models --provider/--model can name, run `omp models` (there is no\n"
        "--list-models flag)."
    )
    default_timeout = "30m"
    timeout_message = (
        '--timeout "{value}" is not a duration; use h/m/s strings like 30m, 90s, or 1h30m'
    )
    stderr_file = True
    path_fields = ("brief", "final", "events", "stderr")
    flags = (
        value_flag("--provider", "provider", "<name>", "Provider for this run (see `omp models`)."),
        value_flag(
            "--thinking",
            "thinking",
            "<level>",
            f"Thinking level: {', '.join(registry.OMP_THINKING)} (a lane's effort).",
        ),
        value_flag("--session", "session", "<id>", "Resume this omp session by id.", flagged=False),
        Flag(
            "--resume-last",
            sets={"resumeLast": True},
            help="Resume the most recent session in --cd (omp --continue).",
        ),
        Flag(
            "--read-only",
            sets={"readOnly": True},
            flags=("readOnly",),
            help=f"No --yolo; omp may use only the {READ_ONLY_TOOLS} tools.",
        ),
        Flag(
            "--approve",
            sets={"approve": True},
            help="Trust the project's .omp extensions, skills and rules for this run.",
        ),
    )

    def defaults(self) -> dict:
        return {
            "provider": None,
            "thinking": None,
            "session": None,
            "resumeLast": False,
            "readOnly": False,
            "approve": False,
        }

    def validate(self, opts: dict) -> None:
        check_exclusive(opts, ("resumeLast", "--resume-last"), ("session", "--session"))
        check_tokens(opts, ("model", "provider", "session"))
        check_choice(opts, "thinking", "--thinking", registry.OMP_THINKING)
        self.watchdog_ms(opts)

    def build_argv(self, opts: dict, run) -> list[str]:
        argv = ["--mode", "json"]
        for flag in ("provider", "model", "thinking"):
            if opts[flag]:
                argv += [f"--{flag}", opts[flag]]
        if opts["session"]:
            argv += ["--session", opts["session"]]
        elif opts["resumeLast"]:
            argv.append("--continue")
        argv += ["--tools", READ_ONLY_TOOLS] if opts["readOnly"] else ["--yolo"]
        if not opts["approve"]:
            argv += UNTRUSTED
        return argv

    def new_state(self, opts: dict) -> State:
        return OmpState(opts)

    def on_event(self, state: OmpState, event: dict) -> None:
        kind = event.get("type")
        if kind == "session":
            if isinstance(event.get("id"), str):
                state.session_id = event["id"]
            return
        message = event.get("message")
        if kind != "message_end" or not isinstance(message, dict):
            return
        if message.get("role") != "assistant":
            return
        content = message.get("content")
        if isinstance(content, str):
            state.texts.append(content)
        elif isinstance(content, list):
            state.texts.extend(
                part["text"]
                for part in content
                if isinstance(part, dict)
                and part.get("type") == "text"
                and isinstance(part.get("text"), str)
            )
        for attr, field in (("provider", "provider"), ("model", "model")):
            if isinstance(message.get(field), str):
                setattr(state, attr, message[field])
        if isinstance(message.get("usage"), dict):
            state.usage = message["usage"]
        if isinstance(message.get("stopReason"), str):
            state.stop_reason = message["stopReason"]
        if isinstance(message.get("errorMessage"), str):
            state.error = message["errorMessage"]

    def final_message(self, state: OmpState, run) -> str:
        return "\n\n".join(state.texts)

    def failure(self, state: OmpState) -> str | None:
        if state.stop_reason not in FAILED_STOPS:
            return None
        return state.error or f'omp ended with stopReason "{state.stop_reason}"'

    def config_fields(self, opts: dict, state: State) -> dict:
        return {
            "provider": opts["provider"],
            "model": opts["model"],
            "thinking": opts["thinking"],
            "readOnly": opts["readOnly"],
            "yolo": not opts["readOnly"],
            "projectTrusted": opts["approve"],
            "resumed": bool(opts["resumeLast"] or opts["session"]),
        }

    def id_fields(self, state: OmpState) -> dict:
        return {
            "sessionId": state.session_id,
            "actualProvider": state.provider,
            "actualModel": state.model,
            "usage": state.usage,
            "stopReason": state.stop_reason,
        }

    def summary_lines(self, opts: dict, state: OmpState, result: dict) -> list[str]:
        lines = []
        if result["readOnly"]:
            lines.append(f"mode: read-only (tools {READ_ONLY_TOOLS})")
        if result["yolo"]:
            lines.append("mode: --yolo (tools.approvalMode yolo)")
        if result["projectTrusted"]:
            lines.append("mode: project resources trusted (--approve)")
        if result["resumed"]:
            lines.append("mode: resumed an existing session")
        if result["thinking"]:
            lines.append(f"thinking: {result['thinking']}")
        if state.model:
            lines.append(f"model: {state.provider + '/' if state.provider else ''}{state.model}")
        if state.session_id:
            lines.append(
                f"session id (resume with: --session {state.session_id}): {state.session_id}"
            )
        return lines


ADAPTER = Omp()
