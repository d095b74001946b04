"""Pi (`pi --mode json`): brief on stdin, JSON events, full local tools.

Pi has no sandbox and no permission modes: a write run gets every built-in
tool with the user's own rights. Read-only is a tool set (`read,grep,find,ls`),
not a boundary; the relay reports the git tripwire for it. Project-local pi
files (settings, extensions, skills) stay untrusted (`--no-approve`) unless
--approve opts in. An assistant turn that ends in error or aborted fails the
run even when pi exits 0.
"""

from __future__ import annotations

from delegate_skills.relay.adapter import Adapter, State
from delegate_skills.relay.options import Flag, Usage, check_exclusive, value_flag

from ._agy_grok_pi_vibe import check_safe_values, resume_line, text_blocks

READ_ONLY_TOOLS = "read,grep,find,ls"
FAILED_STOPS = ("error", "aborted")
TIMEOUT_MESSAGE = '--timeout "{value}" is not a duration; use h/m/s strings like 30m, 90s, or 1h30m'


class PiState(State):
    def __init__(self, opts: dict) -> None:
        super().__init__(opts)
        self.session_id = None
        self.texts: list[str] = []
        self.provider: str | None = None
        self.model: str | None = None
        self.usage: dict | None = None
        self.stop_reason: str | None = None
        self.error: str | None = None


def _text(value) -> str | None:
    return value if isinstance(value, str) else None


class Pi(Adapter):
    key = "pi"
    display = "pi"
    label = "pi"
    tool = "pi"
    version_field = "piVersion"
    install_hint = (
        "Install with `npm install -g @earendil-works/pi-coding-agent`, then authenticate "
        "(`/login`, or an API-key environment variable)."
    )
    about = (
        "Hands a brief to pi (`pi --mode json`) on stdin and records its JSON events.\n"
        "Pi has no sandbox and no permission modes: a run has pi's full local tools\n"
        "with your rights. --read-only narrows the tools to read,grep,find,ls (a tool\n"
        "set, not a boundary; readOnlyViolation reports what git saw). Project-local\n"
        "pi settings, extensions and skills stay untrusted unless --approve. pi 1.x\n"
        "needs --model whenever --provider is given."
    )
    default_timeout = "30m"
    timeout_message = TIMEOUT_MESSAGE
    stderr_file = True
    path_fields = ("brief", "final", "events", "stderr")
    flags = (
        value_flag("--provider", "provider", "<name>", "Provider to pick --model from."),
        Flag("--session", "session", metavar="<id>", help="Resume this session id."),
        Flag(
            "--resume-last",
            sets={"resumeLast": True},
            help="Continue the most recent session in --cd (pi --continue).",
        ),
        Flag(
            "--approve",
            sets={"approve": True},
            help="Trust project-local pi files for this run (pi --approve).",
        ),
        Flag(
            "--read-only",
            sets={"readOnly": True},
            flags=("readOnly",),
            help=f"Only the {READ_ONLY_TOOLS} tools.",
        ),
    )

    def defaults(self) -> dict:
        return {
            "provider": None,
            "session": None,
            "resumeLast": False,
            "readOnly": False,
            "approve": False,
        }

    def validate(self, opts: dict) -> None:
        check_exclusive(opts, ("resumeLast", "--resume-last"), ("session", "--session"))
        check_safe_values(
            opts, (("model", "--model"), ("provider", "--provider"), ("session", "--session"))
        )
        self.watchdog_ms(opts)
        if opts["provider"] is not None and opts["model"] is None:
            # pi 1.x exits 1 with "--provider requires --model"; say so before dispatching.
            raise Usage(
                "--provider requires --model (pi 1.x refuses a provider alone); "
                "pass both, e.g. --provider google --model <pattern>"
            )

    def build_argv(self, opts: dict, run) -> list[str]:
        argv = ["--mode", "json"]
        for flag, field in (("--provider", "provider"), ("--model", "model")):
            if opts[field]:
                argv += [flag, opts[field]]
        if opts["session"]:
            argv += ["--session", opts["session"]]
        elif opts["resumeLast"]:
            argv.append("--continue")
        argv.append("--approve" if opts["approve"] else "--no-approve")
        if opts["readOnly"]:
            argv += ["--tools", READ_ONLY_TOOLS]
        return argv

    def new_state(self, opts: dict) -> State:
        return PiState(opts)

    def on_event(self, state: PiState, event: dict) -> None:
        kind = event.get("type")
        if kind == "session" and _text(event.get("id")):
            state.session_id = event["id"]
            return
        message = event.get("message")
        if kind != "message_end" or not isinstance(message, dict):
            return
        if message.get("role") != "assistant":
            return
        state.texts += [text for text in text_blocks(message.get("content")) if text]
        state.provider = _text(message.get("provider"))
        state.model = _text(message.get("model"))
        state.usage = message["usage"] if isinstance(message.get("usage"), dict) else None
        state.stop_reason = _text(message.get("stopReason"))
        state.error = _text(message.get("errorMessage"))

    def final_message(self, state: PiState, run) -> str:
        return "\n\n".join(state.texts)

    def failure(self, state: PiState) -> str | None:
        if state.stop_reason not in FAILED_STOPS:
            return None
        return state.error or f'pi ended with stopReason "{state.stop_reason}"'

    def config_fields(self, opts: dict, state: State) -> dict:
        return {
            "provider": opts["provider"],
            "model": opts["model"],
            "readOnly": opts["readOnly"],
            "projectTrusted": opts["approve"],
            "resumed": bool(opts["resumeLast"] or opts["session"]),
        }

    def id_fields(self, state: PiState) -> dict:
        return {
            "sessionId": state.session_id,
            "actualProvider": state.provider,
            "actualModel": state.model,
            "usage": state.usage,
            "stopReason": state.stop_reason,
        }

    def summary_lines(self, opts: dict, state: PiState, result: dict) -> list[str]:
        lines = []
        if opts["readOnly"]:
            lines.append(f"mode: read-only (tools {READ_ONLY_TOOLS})")
        if opts["approve"]:
            lines.append("mode: project resources trusted (--approve)")
        lines += resume_line(result["resumed"], "session")
        if state.model:
            lines.append(f"model: {state.provider + '/' if state.provider else ''}{state.model}")
        if state.session_id:
            lines.append(
                f"session id (resume with: --session {state.session_id}): {state.session_id}"
            )
        return lines


ADAPTER = Pi()
