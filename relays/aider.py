"""Aider (`aider --message-file`): brief by file, plain-text stdout as the report.

Every run pins the switches in PINS, which nothing the relay accepts, flag or
lane, can take away: aider's own commits are off (`--no-auto-commits`,
`--no-dirty-commits`), `--yes-always` answers its questions and
`--no-suggest-shell-commands` keeps it from proposing commands.

`--read-only` is aider's `--dry-run`, which still writes its histories and
repo-map cache into the repository: a read-only run keeps the histories in the
run dir (a resume first copies the repository's chat history there) and passes
`--map-tokens 0`, the only switch that keeps `.aider.tags.cache.v4/` away
(aider 0.86.2 cannot move it). Outside a git work tree `--no-git` stops a `git
init`; a repository with no git identity gets one through GIT_CONFIG_*
variables instead of aider writing a placeholder into its .git/config.

Aider exits 0 even when it never reached a model, so its output is scanned line
by line for the failures it prints (litellm errors, missing keys, unreachable
endpoints); a report that merely mentions an API key does not count. stdout is
copied whole to stdout.txt; memory keeps only its tail.
"""

from __future__ import annotations

import os
import re

from delegate_skills import gitmeta
from delegate_skills.errors import UserError
from delegate_skills.reading import read_limited
from delegate_skills.relay.adapter import State
from delegate_skills.relay.artifacts import STDERR_NAME
from delegate_skills.relay.options import Flag, Usage, check_exclusive, switch_flag, value_flag
from delegate_skills.relay.parts import (
    StdoutReportAdapter,
    StdoutState,
    read_only_flag,
    resume_last_flag,
)
from delegate_skills.relay.scan import JS_LINE_BREAKS, PatternWatch, feed_file

#: Switches every run gets, in this order. None of them can be turned off.
PINS = (
    "--yes-always",
    "--no-suggest-shell-commands",
    "--no-auto-commits",
    "--no-dirty-commits",
    "--no-gitignore",
    "--no-analytics",
    "--no-check-update",
    "--no-detect-urls",
    "--no-pretty",
    "--no-stream",
)
#: Relay flags whose value becomes its own aider argument.
OPTION_VALUES = (("--model", "model"), ("--api-base", "apiBase"), ("--edit-format", "editFormat"))
#: Where a read-only run keeps aider's history files (in the run dir).
CHAT_HISTORY = "aider.chat.history.md"
INPUT_HISTORY = "aider.input.history"
LLM_HISTORY = "aider.llm.history"
#: aider's own default chat history, at the top of the work tree.
REPO_CHAT_HISTORY = ".aider.chat.history.md"
#: What git is told on a read-only run that has no identity configured.
READ_ONLY_IDENTITY = (
    ("user.name", "aider read-only run"),
    ("user.email", "aider-read-only@localhost.invalid"),
)
#: The most of a repository's chat history a read-only resume copies.
HISTORY_LIMIT = 16 * 1024 * 1024
#: The most of one line examined for a failure.
MAX_LINE_CHARS = 65_536

#: The failures aider prints but does not exit on, most specific first. Each
#: is tried against one line at a time; the first pattern that matched any
#: line names the failure.
_FAILURES = tuple(
    re.compile(pattern, re.IGNORECASE | re.ASCII)
    for pattern in (
        r".{0,60}?litellm\.(?:APIConnectionError|AuthenticationError|BadRequestError"
        r"|RateLimitError|NotFoundError|InternalServerError|Timeout)\b",
        r"\s*(?:Error|Warning) connecting to ",
        r"\s*(?:Error|Warning):?\s*(?:\w+_API_KEY|API key)\b.*"
        r"\b(?:not set|not found|missing|invalid)\b",
        r"\s*The API provider is not able to authenticate you\b",
        r"\s*Unable to (?:connect|reach)\s+(?:the\s+)?"
        r"(?:model|endpoint|server|host|API|provider|https?:)",
    )
)


class AiderState(StdoutState):
    def __init__(self, opts: dict) -> None:
        super().__init__(opts)
        self.watch = PatternWatch(_FAILURES, MAX_LINE_CHARS, JS_LINE_BREAKS)
        self.verdict: str | None = None
        self.judged = False


def _under(cd: str, path: str) -> str:
    """`path` made absolute against --cd (an absolute path stays as it is)."""
    return os.path.abspath(os.path.join(cd, path))


def _read_or_empty(path: str, root: str) -> bytes:
    """A chat history of the repository at `root`: a bounded regular file inside it, else empty."""
    try:
        return read_limited(path, HISTORY_LIMIT, within=root) or b""
    except UserError:
        return b""


class Aider(StdoutReportAdapter):
    key = "aider"
    session_id_after_signal = False
    resume_field = None
    display = "Aider"
    tool = "aider"
    install_hint = "Get Aider (https://aider.chat/docs/install.html) and give it a model and key."
    session_field = ""
    write_access = "edits applied; aider's own commits always off"
    read_only_route = "`--read-only`: `aider --dry-run`, history kept in the run dir"
    about = (
        "Hands a brief to Aider (`aider --message-file <run dir>/brief.txt`); aider's\n"
        "plain-text stdout is the report. Aider's own commits are always off\n"
        "(--no-auto-commits, --no-dirty-commits), whatever the flags or the lane say.\n"
        "--read-only is aider's --dry-run with its history files kept in the run dir\n"
        "and the repo map off (--map-tokens 0), so the repository is left as it was.\n"
        "A run that printed a model or endpoint failure is reported failed even\n"
        "though aider exits 0. All of aider's stdout is kept in stdout.txt."
    )
    default_timeout = "30m"
    brief_via = "file"
    path_fields = ("brief", "final", "stderr")
    note_dropped = True
    unavailable_error = "`aider` was not found on PATH; nothing was dispatched"
    flags = (
        value_flag(
            "--api-base",
            "apiBase",
            "<url>",
            "OpenAI-compatible endpoint (aider --openai-api-base).",
            flagged=False,
        ),
        value_flag("--edit-format", "editFormat", "<fmt>", "Aider edit format (diff, whole, …)."),
        Flag(
            "--architect",
            sets={"architect": True},
            flags=("editFormat",),
            help="Architect mode; not with --edit-format.",
        ),
        Flag(
            "--file",
            "files",
            metavar="<path>",
            append=True,
            help="Add a file to the chat for editing (repeatable).",
        ),
        Flag(
            "--read",
            "reads",
            metavar="<path>",
            append=True,
            help="Add a file to the chat as read-only context (repeatable).",
        ),
        switch_flag("--subtree-only", "subtreeOnly", "Only consider files under --cd."),
        read_only_flag("aider --dry-run; history kept in the run dir, repo map off."),
        resume_last_flag("Restore aider's chat history (--restore-chat-history)."),
        value_flag(
            "--history-file",
            "historyFile",
            "<path>",
            "Aider's chat history (--chat-history-file), read on resume; read-only "
            "runs without it keep theirs in the run dir.",
            flagged=False,
        ),
    )

    def validate(self, opts: dict) -> None:
        check_exclusive(opts, ("architect", "--architect"), ("editFormat", "--edit-format"))
        for field in ("files", "reads"):
            opts[field] = [_under(opts["cd"], path) for path in opts[field]]
        if opts["historyFile"]:
            opts["historyFile"] = _under(opts["cd"], opts["historyFile"])
        for flag, field in OPTION_VALUES:
            value = opts[field]
            if value and value.startswith("-"):
                raise Usage(
                    f'{flag} value "{value}" starts with "-"; aider would read it as an option'
                )
        self.watchdog_ms(opts)

    def child_env(self, opts: dict) -> dict[str, str]:
        env = dict(os.environ)
        if opts["readOnly"]:
            gitmeta.lend_config(env, opts["cd"], READ_ONLY_IDENTITY)
        return env

    def extra_artifacts(self, opts: dict, run) -> dict[str, bytes]:
        if not opts["readOnly"]:
            return {}
        chat = b""
        if opts["resumeLast"] and not opts["historyFile"]:
            root = gitmeta.repo_paths(opts["cd"]).toplevel or opts["cd"]
            chat = _read_or_empty(os.path.join(root, REPO_CHAT_HISTORY), root)
        artifacts = {INPUT_HISTORY: b"", LLM_HISTORY: b""}
        if not opts["historyFile"]:
            artifacts[CHAT_HISTORY] = chat
        return artifacts

    def build_argv(self, opts: dict, run) -> list[str]:
        argv = list(PINS)
        if opts["model"]:
            argv += ["--model", opts["model"]]
        if opts["apiBase"]:
            argv += ["--openai-api-base", opts["apiBase"]]
        if opts["architect"]:
            argv.append("--architect")
        elif opts["editFormat"]:
            argv += ["--edit-format", opts["editFormat"]]
        if opts["subtreeOnly"]:
            argv.append("--subtree-only")
        if opts["readOnly"]:
            argv.append("--dry-run")
        if opts["resumeLast"]:
            argv.append("--restore-chat-history")
        chat = opts["historyFile"] or (run.file(CHAT_HISTORY) if opts["readOnly"] else None)
        if chat:
            argv += ["--chat-history-file", chat]
        if opts["readOnly"]:
            argv += [
                "--input-history-file", run.file(INPUT_HISTORY),
                "--llm-history-file", run.file(LLM_HISTORY),
                "--map-tokens", "0",
            ]  # fmt: skip
            if gitmeta.repo_paths(opts["cd"]).toplevel is None:
                argv.append("--no-git")
        for path in opts["reads"]:
            argv += ["--read", path]
        for path in opts["files"]:
            argv += ["--file", path]
        return [*argv, "--message-file", run.file(self.brief_name)]

    def new_state(self, opts: dict) -> State:
        return AiderState(opts)

    def on_text(self, state: AiderState, text: str) -> None:
        state.watch.feed(text)
        super().on_text(state, text)

    def failure(self, state: AiderState) -> str | None:
        if not state.judged:
            state.judged = True
            watch = state.watch
            watch.end_line()
            if state.run:
                # stderr.txt can be any size: it is read in pieces.
                feed_file(state.run.file(STDERR_NAME), watch.feed)
            watch.end_line()
            state.verdict = watch.first
        code, killed_by = state.exit_code, state.signal
        if state.verdict is not None:
            exited = "null" if code is None else code
            return (
                f"aider reported a model or endpoint failure and exited {exited}: {state.verdict}"
            )
        if killed_by:
            return (
                f"aider was killed by {killed_by} — inspect the working tree before re-dispatching"
            )
        if code:
            return (
                f"aider exited {code} without reporting a model or endpoint failure; "
                "see stderrTail and final.txt"
            )
        return None

    def config_fields(self, opts: dict, state: State) -> dict:
        return {
            "model": opts["model"],
            "editFormat": "architect" if opts["architect"] else opts["editFormat"],
            "readOnly": opts["readOnly"],
            "resumed": opts["resumeLast"],
        }

    def summary_lines(self, opts: dict, state: State, result: dict) -> list[str]:
        lines = []
        if opts["readOnly"]:
            lines.append("mode: dry run (aider --dry-run) - no files should be modified")
        if opts["resumeLast"]:
            lines.append("mode: restored aider's chat history")
        return lines


ADAPTER = Aider()
