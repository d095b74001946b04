"""Command Code (`cmd -p`): brief on stdin, NDJSON events, a guarded output directory.

See `CommandCode.about` for its two states (--yolo, or plan without it). cmd
can exit before its long last events reach the pipe, so the session id and the
report come from the early events, and `resultLine` says whether the closing
result line arrived whole.
"""

from __future__ import annotations

from delegate_skills import registry
from delegate_skills.jstext import js_trim
from delegate_skills.relay.adapter import Adapter, State, TextTail, resume_mode_lines
from delegate_skills.relay.options import (
    SESSION,
    Usage,
    check_count,
    check_exclusive,
    check_model,
    switch_flag,
    value_flag,
)
from delegate_skills.relay.parts import (
    check_effort_token,
    check_keep_env,
    clean_env_fields,
    clean_env_flags,
    clean_environment,
    finite_number,
    read_only_flag,
    resume_args,
    session_flags,
    text_blocks,
    text_or_none,
)
from delegate_skills.relay.scan import LineSplitter, parse_json

HEADLESS = ("-p", "--output-format", "json", "--skip-onboarding", "--no-auto-update", "-t")
#: Command Code's documented headless exit codes, and what to do about each.
EXIT_HINTS = {
    3: "not authenticated — run `cmd login`, then re-dispatch",
    4: "permission denied — an implementation run needs write access; this relay passes "
    "--yolo unless --read-only was set",
    5: "rate limit exceeded — wait and re-dispatch, or lower the model tier",
    6: "network failure — check connectivity and re-dispatch",
    7: "Command Code API server error (5xx) — transient; re-dispatch",
    8: "hit the turn cap — raise --max-turns or split the brief into smaller tasks",
    9: "the model produced no response — re-dispatch, and check the brief is not empty of "
    "instruction",
    10: "insufficient credits — top up the account, then re-dispatch",
}
READ_ONLY_CHECK = {
    None: "read-only check: not verifiable (git could not report) — inspect the working "
    "tree directly",
    True: "read-only check: FAILED — the tree changed beyond this relay's artifacts; treat "
    "the run as write-capable and review the diff",
    False: "read-only check: no Git-visible change detected (ignored or outside-repository "
    "paths are not covered)",
}


class CommandCodeState(State):
    def __init__(self, opts: dict) -> None:
        super().__init__(opts)
        self.session_id = None
        #: Lines cut short (past MAX_BUFFERED_CHARS, or unended at close) are read too.
        self.lines = LineSplitter(self.line, self.line)
        self.deltas = TextTail()
        self.last_text = ""
        self.result: dict | None = None
        #: The child ran to its end (set at close; aborts and non-starts leave it off).
        self.closed = False
        #: Why final.txt could not be created (None: it was, or there is none yet).
        self.final_error: str | None = None

    def close(self) -> None:
        """The run is over: bytes left without a newline are a cut write."""
        if not self.closed:
            self.closed = True
            self.lines.close()

    def line(self, line: str) -> None:
        event = parse_json(line)
        if not isinstance(event, dict):
            return
        inner = event.get("event") if isinstance(event.get("event"), dict) else {}
        nested = inner.get("result")
        next_state = nested.get("nextState") if isinstance(nested, dict) else None
        for found in (
            event.get("sessionId"),
            inner.get("sessionId"),
            next_state.get("sessionId") if isinstance(next_state, dict) else None,
        ):
            if isinstance(found, str) and found:
                self.session_id = found
        kind = inner.get("type")
        if kind == "message_start":
            self.deltas = TextTail()
        elif kind == "text_delta" and isinstance(inner.get("delta"), str):
            self.deltas.append(inner["delta"])
        elif kind == "text_end" and isinstance(inner.get("text"), str) and inner["text"].strip():
            self.last_text = js_trim(inner["text"])
        elif kind == "message_end" and isinstance(inner.get("content"), list):
            text = js_trim("\n".join(text_blocks(inner["content"])))
            if text:
                self.last_text = text
        if event.get("type") == "result":
            self.result = _result_line(event)
            self.usage = self.result["usage"]

    @property
    def result_line(self) -> str | None:
        if not self.closed:
            return None
        if self.result is not None:
            return "complete"
        return "truncated" if self.lines.cut else "absent"


def _result_line(event: dict) -> dict:
    final = event.get("finalText")
    return {
        "subtype": text_or_none(event.get("subtype")),
        "stopReason": text_or_none(event.get("stopReason")),
        "usage": event.get("usage"),
        "durationMs": finite_number(event.get("durationMs")),
        "finalText": final if isinstance(final, str) else "",
        "error": text_or_none(event.get("error")),
    }


class CommandCode(Adapter):
    key = "commandcode"
    latest_field = "continueLast"
    display = "Command Code"
    label = "cmd"
    null_verdict_on_write_runs = True
    report_name = "Command Code"
    version_field = "commandCodeVersion"
    parser = "text"
    install_hint = (
        "Get Command Code and sign in with `cmd login`, or name the binary in COMMANDCODE_BIN."
    )
    write_access = "`cmd --yolo`: every tool, no sandbox"
    read_only_route = "`--read-only`: `cmd --permission-mode plan` without yolo"
    about = (
        "Runs the Command Code CLI headless (`cmd -p --output-format json`) with the\n"
        "brief on stdin. Headless cmd has two states: write runs get --yolo (every tool,\n"
        "no sandbox); --read-only drops --yolo, which keeps cmd's write, edit and shell\n"
        "tools out of reach, adds --permission-mode plan, and is checked by the tripwire.\n"
        "$COMMANDCODE_BIN names the binary (default: cmd on PATH). An explicit --out-dir\n"
        "holding relay artifacts is used only when its result.json is a relay result."
    )
    #: final.txt is the relay's to create, once, exclusively (see RunDir.create_final_once).
    child_writes_final = True
    exit_hints = EXIT_HINTS
    bin_env = "COMMANDCODE_BIN"
    #: cmd updates itself at every start (a detached `npm install -g`), which the
    #: end of the run would cut short.
    env_defaults = {"COMMANDCODE_SKIP_UPDATES": "1"}  # noqa: RUF012 (read only)
    guarded_artifacts = ("final.txt", "result.json", "brief.txt", "events.jsonl")
    flags = (
        value_flag(
            "--effort", "effort", "<level>", "Reasoning effort; the levels depend on the model."
        ),
        read_only_flag("No --yolo, plus --permission-mode plan: no write, edit or shell tools."),
        switch_flag(
            "--tools-all",
            "toolsAll",
            "Also pass --tools-all (write runs only; a read-only run stays read-only).",
        ),
        value_flag(
            "--max-turns",
            "maxTurns",
            "<n>",
            "Turn cap, 1-99999 (cmd's default: 100; cmd exits 8 when it hits the cap).",
            flagged=False,
        ),
        *session_flags(
            "Continue the most recent session (cmd --continue); prefer --session.",
            "Continue this session (cmd --resume <id>); not with --continue-last.",
            ("--continue-last", "continueLast"),
        ),
        *clean_env_flags("Command Code"),
    )

    def validate(self, opts: dict) -> None:
        check_effort_token(opts)
        check_model(opts, registry.SHELL_SAFE)
        expected = "expected a positive integer up to 99999"
        check_count(
            opts, "maxTurns", f'invalid --max-turns "{opts["maxTurns"]}" ({expected})', 99999
        )
        check_keep_env(opts)
        self.watchdog_ms(opts)
        check_exclusive(opts, ("session", "--session"), ("continueLast", "--continue-last"))
        if opts["session"] is not None and not SESSION.accepts(opts["session"]):
            raise Usage("--session must be a session id (letters, digits, . _ : -)")
        self.check_bin_env()

    def child_env(self, opts: dict) -> dict[str, str]:
        return clean_environment(opts, (self.bin_env,))

    def build_argv(self, opts: dict, run) -> list[str]:
        argv = list(HEADLESS)
        if opts["readOnly"]:
            argv += ["--permission-mode", "plan"]
        else:
            argv.append("--yolo")
            if opts["toolsAll"]:
                argv.append("--tools-all")
        argv += resume_args(opts, last="continueLast")
        if opts["model"]:
            argv += ["-m", opts["model"]]
        if opts["effort"] is not None:
            argv += ["--effort", opts["effort"]]
        if opts["maxTurns"] is not None:
            argv += ["--max-turns", opts["maxTurns"]]
        return argv

    def new_state(self, opts: dict) -> State:
        return CommandCodeState(opts)

    def on_text(self, state: CommandCodeState, text: str) -> None:
        state.lines.feed(text)

    def final_message(self, state: CommandCodeState, run) -> str:
        final = state.result["finalText"] if state.result else ""
        text = js_trim(final or state.last_text or js_trim(state.deltas.text()))
        if text and state.run is not None:
            state.final_error = state.run.create_final_once(text)
        return text

    def failure(self, state: CommandCodeState) -> str | None:
        state.close()
        self.final_message(state, state.run)
        if state.final_error:
            return state.final_error
        result = state.result
        if result is None or result["subtype"] == "success":
            return None
        if result["error"]:
            return f"Command Code reported {result['subtype'] or 'an error'}: {result['error']}"
        return (
            f'Command Code reported subtype "{result["subtype"] or "null"}" '
            f"(stopReason {result['stopReason'] or 'unknown'}), not success"
        )

    def config_fields(self, opts: dict, state: State) -> dict:
        read_only = opts["readOnly"]
        return {
            "readOnly": read_only,
            "autonomy": "plan (write/edit/shell withheld)"
            if read_only
            else "--yolo (all permissions bypassed)",
            "toolsAll": False if read_only else opts["toolsAll"],
            "model": opts["model"],
            "effort": opts["effort"],
            "maxTurns": int(opts["maxTurns"]) if opts["maxTurns"] is not None else None,
            "session": opts["session"],
            "continueLast": opts["continueLast"],
            **clean_env_fields(opts),
        }

    def id_fields(self, state: CommandCodeState) -> dict:
        result = state.result or {}
        return {
            "sessionId": state.session_id,
            "resultLine": state.result_line,
            "resultSubtype": result.get("subtype"),
            "stopReason": result.get("stopReason"),
            "usage": result.get("usage"),
            "durationMs": result.get("durationMs") if state.closed else None,
        }

    def summary_lines(self, opts: dict, state: CommandCodeState, result: dict) -> list[str]:
        lines = [f"autonomy: {result['autonomy']}"]
        lines += resume_mode_lines(
            opts,
            "mode: continued most recent session",
            "mode: resumed session {id}",
            "continueLast",
        )
        if state.session_id:
            lines.append(f"session id (resume with: --session {state.session_id})")
        if result["resultLine"] in ("truncated", "absent"):
            lines.append(
                f"note: cmd's result line was {result['resultLine']} (its oversized run_end "
                "tail is not flushed on exit), so subtype/usage are unavailable; the report "
                "and session id come from the earlier events."
            )
        subtype = result["resultSubtype"]
        if subtype and subtype != "success":
            stop = f" (stopReason {result['stopReason']})" if result["stopReason"] else ""
            lines.append(f"Command Code result: {subtype}{stop}")
        if result["readOnly"]:
            lines.append(READ_ONLY_CHECK[result["readOnlyViolation"]])
        return lines


ADAPTER = CommandCode()
