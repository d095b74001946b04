"""Building blocks several adapters share: flags, checks and readers.

Anything two adapters need lives here (or elsewhere in the engine), never in
two adapters: a brief carried on the command line, the `--read-only` and
`--dangerously-skip-permissions` switches, shell-safe values, `--add-dir`, the
resume pair, the resume lines of the summary, the fields of stream-json
events and text blocks of their messages, the `--clean-env` / `--keep-env`
pair, and a report read from plain-text stdout.
"""

from __future__ import annotations

import os

from .. import registry
from ..jstext import js_trim
from .adapter import Adapter, State, TextTail, session_lines
from .options import (
    ENV_NAME,
    NOT_A_DURATION,
    SESSION,
    Flag,
    Usage,
    check_exclusive,
    check_token,
    switch_flag,
)

#: The largest brief passed as one command-line argument (Linux caps one near 128 KiB).
MAX_ARGV_BRIEF_BYTES = 120 * 1024

#: What a --clean-env child still gets: runtime basics, never credentials.
CLEAN_ENV_BASICS = (
    "PATH", "HOME", "USER", "LOGNAME", "SHELL", "LANG", "LC_ALL", "LC_CTYPE", "TERM",
    "TMPDIR", "SystemRoot", "SystemDrive", "USERPROFILE", "APPDATA", "LOCALAPPDATA",
    "TEMP", "TMP", "PATHEXT", "COMSPEC",
)  # fmt: skip


# ---------------------------------------------------------------- the brief on argv


def check_argv_brief(brief: str, where: str, too_big: str) -> None:
    """Refuse a brief one argument cannot carry. `too_big` is formatted with `kb`."""
    if "\0" in brief:
        raise Usage(f"brief contains a NUL byte, which cannot be passed in {where}")
    size = len(brief.encode("utf-8", errors="replace"))
    if size > MAX_ARGV_BRIEF_BYTES:
        raise Usage(too_big.format(kb=int(size / 1024 + 0.5)))


class ArgvBriefAdapter(Adapter):
    """An implementer that takes the brief as one command-line argument."""

    default_timeout = "30m"
    brief_via = "argv"
    stderr_file = True
    path_fields = ("brief", "final", "events", "stderr")
    too_big = "brief is {kb}KB; too large for a command-line argument"
    argv_brief_where = "argv"

    def check_brief(self, opts: dict, brief: str) -> None:
        check_argv_brief(brief, self.argv_brief_where, self.too_big)


# ---------------------------------------------------------------- permissions


def read_only_flag(help: str) -> Flag:
    """`--read-only`, a switch a read-only lane holds to (it marks readOnly as chosen)."""
    return switch_flag("--read-only", "readOnly", help, flagged=True)


def skip_permissions_flag(help: str) -> Flag:
    """`--dangerously-skip-permissions`, the opt-in past the CLI's permission checks."""
    return switch_flag(
        "--dangerously-skip-permissions", "dangerouslySkipPermissions", help, flagged=True
    )


def check_read_only_or_skip(opts: dict, tail: str = "; pass only one") -> None:
    """--read-only and --dangerously-skip-permissions exclude each other."""
    check_exclusive(
        opts,
        ("readOnly", "--read-only"),
        ("dangerouslySkipPermissions", "--dangerously-skip-permissions"),
        tail,
    )


# ---------------------------------------------------------------- values


def check_shell_tokens(opts: dict, fields: tuple) -> None:
    """Refuse the first set value that is not a shell-safe token.

    Each entry is a field name (its flag is `--<field>`) or a (field, flag)
    pair. The message names the flag: `--x value contains unsupported …`.
    """
    token = registry.SHELL_SAFE
    for entry in fields:
        field, flag = (entry, f"--{entry}") if isinstance(entry, str) else entry
        value = opts.get(field)
        if value is not None and not token.accepts(value):
            raise Usage(f"{flag} value contains unsupported characters (allowed: {token.allowed})")


def check_effort_token(opts: dict) -> None:
    """Refuse an --effort that is not a bare token (the CLI names its own levels)."""
    effort = opts["effort"]
    if effort is not None and not registry.BARE_TOKEN.accepts(effort):
        raise Usage(f'invalid --effort "{effort}" (expected a non-empty bare token)')


# ---------------------------------------------------------------- --add-dir


def add_dir_flag(help: str, dest: str = "addDirs") -> Flag:
    return Flag("--add-dir", dest, metavar="<dir>", append=True, help=help)


def add_dir_args(opts: dict, flag: str = "--add-dir", field: str = "addDirs") -> list[str]:
    """`flag <dir>` per --add-dir (kept in `field`), in order, each resolved against --cd."""
    argv: list[str] = []
    for directory in opts[field]:
        argv += [flag, os.path.normpath(os.path.join(opts["cd"], directory))]
    return argv


# ---------------------------------------------------------------- resuming


def resume_last_flag(help: str) -> Flag:
    """`--resume-last`: continue the most recent session."""
    return Flag("--resume-last", sets={"resumeLast": True}, help=help)


def session_flags(
    last_help: str, session_help: str, last: tuple[str, str] | None = None
) -> tuple[Flag, Flag]:
    """`--resume-last` and `--session <id>`, the usual pair of resume flags.

    With `last` (flag, field), the switch is named so and comes after --session.
    """
    session = Flag("--session", "session", metavar="<id>", help=session_help)
    if last is None:
        return (resume_last_flag(last_help), session)
    return (session, Flag(last[0], sets={last[1]: True}, help=last_help))


def check_session(opts: dict) -> None:
    """One resume form at most, and a session id that cannot pass for an option."""
    check_exclusive(opts, ("resumeLast", "--resume-last"), ("session", "--session"))
    check_token(opts, "session", "--session", SESSION)


def resume_args(
    opts: dict,
    latest: tuple[str, ...] = ("--continue",),
    session: str = "session",
    last: str = "resumeLast",
) -> list[str]:
    """`--resume <id>` for --session, else `latest` for --resume-last, else nothing.

    `session` and `last` name the option fields where a relay calls them otherwise.
    """
    if opts[session]:
        return ["--resume", opts[session]]
    return list(latest) if opts[last] else []


def resumed(opts: dict, session: str = "session") -> bool:
    """Whether the run continues a session (its `session` field, or --resume-last)."""
    return bool(opts["resumeLast"] or opts[session])


def resume_lines(
    resumed: bool, session_id: str | None, flag: str = "--session", what: str = "session"
) -> list[str]:
    """The summary's resume lines: how this run started, and how to continue it."""
    lines = [f"mode: resumed an existing {what}"] if resumed else []
    return lines + session_lines(session_id, flag)


# ---------------------------------------------------------------- stream-json messages


def deep_merge(under: dict, over: dict) -> dict:
    """`under` with `over` laid on it: objects both hold are merged, key by key, the rest of
    `over` wins (a CLI's configuration documents, as they layer)."""
    merged = dict(under)
    for key, value in over.items():
        both = isinstance(value, dict) and isinstance(merged.get(key), dict)
        merged[key] = deep_merge(merged[key], value) if both else value
    return merged


def first_set(mapping: dict, *keys: str):
    """The value of the first of `keys` that `mapping` holds as something other than None."""
    for key in keys:
        if mapping.get(key) is not None:
            return mapping[key]
    return None


def event_session(event: dict, inner: tuple[str, ...] = ("id",)):
    """The session an event names: its `session_id` or `sessionId`, else the first of
    `inner` in its `session` object (None when it names none)."""
    session = first_set(event, "session_id", "sessionId")
    if session is None and isinstance(event.get("session"), dict):
        session = first_set(event["session"], *inner)
    return session


def is_number(value) -> bool:
    """Whether a JSON value is a number (an int or float, never a bool)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def finite_number(value):
    """`value` when it is a finite JSON number, else None (1e999 reads as infinity)."""
    return value if is_number(value) and value - value == 0 else None


def text_or_none(value) -> str | None:
    """`value` when it is a string, else None."""
    return value if isinstance(value, str) else None


def text_blocks(content) -> list[str]:
    """The text of a message's `content`: a string, or its `{"type": "text"}` blocks."""
    if isinstance(content, str):
        return [content]
    if not isinstance(content, list):
        return []
    return [
        block["text"]
        for block in content
        if isinstance(block, dict)
        and block.get("type") == "text"
        and isinstance(block.get("text"), str)
    ]


def is_init(event: dict) -> bool:
    return event.get("type") == "system" and event.get("subtype") == "init"


# ---------------------------------------------------------------- --clean-env


def clean_env_flags(product: str) -> tuple[Flag, Flag]:
    return (
        Flag(
            "--clean-env",
            sets={"cleanEnv": True},
            help=f"Start {product} (and its version check) with only basic runtime variables. "
            "It narrows the environment and nothing else: files and secrets your user can "
            "read stay readable.",
        ),
        Flag(
            "--keep-env",
            "keepEnv",
            metavar="<name>",
            append=True,
            help="Let this variable through --clean-env too (repeatable); sign-ins kept in "
            "the environment need it.",
        ),
    )


def clean_env_defaults() -> dict:
    """The --clean-env / --keep-env option defaults."""
    return {"cleanEnv": False, "keepEnv": []}


def clean_env_fields(opts: dict) -> dict:
    """The result fields that record --clean-env and --keep-env."""
    return {"cleanEnv": opts["cleanEnv"], "keepEnv": list(opts["keepEnv"])}


def check_keep_env(opts: dict) -> None:
    """The --keep-env rules. Raises Usage."""
    names = opts["keepEnv"]
    if names and not opts["cleanEnv"]:
        raise Usage("--keep-env requires --clean-env")
    for name in names:
        if not ENV_NAME.accepts(name):
            raise Usage(f'invalid --keep-env "{name}" (expected an environment variable name)')
    for name in names:
        if name not in os.environ:
            raise Usage(f'--keep-env "{name}" is not set')


def clean_environment(opts: dict, own: tuple[str, ...] = ()) -> dict[str, str]:
    """The child's environment: all of it, or the basics plus `own` and the kept names."""
    if not opts["cleanEnv"]:
        return dict(os.environ)
    names = (*CLEAN_ENV_BASICS, *own, *opts["keepEnv"])
    return {name: os.environ[name] for name in names if name in os.environ}


# ---------------------------------------------------------------- a plain-text report

#: Where a relay that reads plain-text stdout copies all of it, raw.
STDOUT_NAME = "stdout.txt"


class StdoutState(State):
    """The tail of plain-text stdout, kept for the report (`stdout.dropped` counts
    what was cut before it)."""

    def __init__(self, opts: dict) -> None:
        super().__init__(opts)
        self.stdout = TextTail()


class StdoutReportAdapter(Adapter):
    """An implementer whose report is its plain-text stdout (agy, aider).

    All of stdout is copied to stdout.txt and its tail kept in memory; stderr is
    kept as stderr.txt.
    """

    parser = "text"
    events_name = STDOUT_NAME
    stderr_file = True

    def new_state(self, opts: dict) -> State:
        return StdoutState(opts)

    #: Whether a report whose start was let go says so first (and where all of it is).
    note_dropped = False

    def on_text(self, state: StdoutState, text: str) -> None:
        state.stdout.append(text)

    def final_message(self, state: StdoutState, run) -> str:
        """stdout, trimmed as JavaScript trims it."""
        report = js_trim(state.stdout.text())
        dropped = state.stdout.dropped
        if self.note_dropped and dropped and report:
            return (
                f"[the first {dropped} characters of {self.tool}'s output are left out here; "
                f"{run.file(STDOUT_NAME)} has all of it]\n{report}"
            )
        return report


# ---------------------------------------------------------------- pi's event protocol


class AgentState(State):
    """What pi-style `--mode json` events tell (pi, and omp which grew from it)."""

    def __init__(self, opts: dict) -> None:
        super().__init__(opts)
        self.session_id = None
        self.texts = TextTail("\n\n")
        self.provider: str | None = None
        self.model: str | None = None
        self.usage: dict | None = None
        self.stop_reason: str | None = None
        #: The last assistant error, kept when a later message carries none.
        self.error: str | None = None


class AgentEventsAdapter(Adapter):
    """Reads pi's event stream: a `session` event, then `message_end` per message.

    The report is the assistant messages' text; a last assistant turn that
    ended in `error` or `aborted` fails the run even on exit 0.
    """

    failed_stops = ("error", "aborted")
    timeout_message = NOT_A_DURATION

    def new_state(self, opts: dict) -> State:
        return AgentState(opts)

    def check_agent_options(self, opts: dict) -> None:
        """The resume forms exclude each other; provider, model and session are shell-safe."""
        check_exclusive(opts, ("resumeLast", "--resume-last"), ("session", "--session"))
        check_shell_tokens(opts, ("model", "provider", "session"))

    @staticmethod
    def agent_argv(opts: dict, value_fields: tuple[str, ...] = ("provider", "model")) -> list[str]:
        """`--mode json`, `--<field> value` for each field set, then the resume form."""
        argv = ["--mode", "json"]
        for field in value_fields:
            if opts[field]:
                argv += [f"--{field}", opts[field]]
        if opts["session"]:
            argv += ["--session", opts["session"]]
        elif opts["resumeLast"]:
            argv.append("--continue")
        return argv

    @staticmethod
    def model_lines(state: AgentState) -> list[str]:
        """The summary's `model:` line, as provider/model, when the stream named a model."""
        if not state.model:
            return []
        return [f"model: {state.provider + '/' if state.provider else ''}{state.model}"]

    def on_event(self, state: AgentState, event: dict) -> None:
        kind = event.get("type")
        if kind == "session":
            if isinstance(event.get("id"), str):
                state.session_id = event["id"]
            return
        message = event.get("message")
        if (
            kind != "message_end"
            or not isinstance(message, dict)
            or message.get("role") != "assistant"
        ):
            return
        state.texts.extend(text for text in text_blocks(message.get("content")) if text)
        for attr, field in (
            ("provider", "provider"),
            ("model", "model"),
            ("stop_reason", "stopReason"),
        ):
            if isinstance(message.get(field), str):
                setattr(state, attr, message[field])
        if isinstance(message.get("usage"), dict):
            state.usage = message["usage"]
        if isinstance(message.get("errorMessage"), str):
            state.error = message["errorMessage"]

    def final_message(self, state: AgentState, run) -> str:
        return state.texts.text()

    def failure(self, state: AgentState) -> str | None:
        if state.stop_reason not in self.failed_stops:
            return None
        return state.error or f'{self.label} ended with stopReason "{state.stop_reason}"'

    def id_fields(self, state: AgentState) -> dict:
        return {
            "sessionId": state.session_id,
            "actualProvider": state.provider,
            "actualModel": state.model,
            "usage": state.usage,
            "stopReason": state.stop_reason,
        }


# ---------------------------------------------------------------- a terminal `result` event


class ResultState(State):
    """What a Claude-style terminal `{"type": "result", …}` event says (qwen, auggie)."""

    def __init__(self, opts: dict) -> None:
        super().__init__(opts)
        self.saw_result = False
        self.is_error = False
        self.subtype: str | None = None
        self.error: str | None = None
        self.usage: dict | None = None
        self.num_turns: int | None = None


def read_result_event(state: ResultState, event: dict) -> None:
    """Keep the outcome, final text, session, usage and turn count a result event carries."""
    state.saw_result = True
    state.is_error = event.get("is_error") is True
    state.subtype = event.get("subtype") if isinstance(event.get("subtype"), str) else None
    if isinstance(event.get("result"), str):
        state.final = event["result"]
    if isinstance(event.get("session_id"), str) and event["session_id"]:
        state.session_id = event["session_id"]
    if isinstance(event.get("usage"), dict):
        state.usage = event["usage"]
    turns = event.get("num_turns")
    if isinstance(turns, int) and not isinstance(turns, bool):
        state.num_turns = turns
    error = event.get("error")
    if isinstance(error, dict) and isinstance(error.get("message"), str):
        state.error = error["message"]


def result_failure(state: ResultState, label: str) -> str | None:
    """An error result, or a clean exit that never printed one, as the run's failure."""
    if state.is_error:
        why = f": {state.error}" if state.error else ""
        return f"{label} ended with an error result ({state.subtype or 'error'}){why}"
    if not state.saw_result and state.exit_code == 0:
        return f"{label} exited without a result event; inspect events.jsonl and stderr.txt"
    return None
