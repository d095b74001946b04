"""Hermes Agent (`hermes chat -Q`): brief as `--query=<brief>`, plain-text report.

`hermes chat -Q` answers one query and exits: the reply on stdout, then a
`session_id: <id>` line (on stderr in hermes 0.19; older versions put it on
stdout, so both are read, the last line winning). It prints no events and
no token counts. Sessions resume with `--resume <id>` or `--continue`
(checked against hermes 0.19.0: the id stays the same).

Write runs pass `--yolo`: hermes would otherwise stop at an approval prompt
for commands it deems dangerous, which a headless run cannot answer.
Hermes has no read-only mode; `--read-only` builds one from its own levers:
the `file` toolset alone (`-t file`: read_file, search_files, write_file,
patch; no terminal, code execution or subagents) and HERMES_WRITE_SAFE_ROOT
set to the null device, which makes hermes refuse every write_file and
patch outside it, that is, all of them. The tripwire reports anything that
still lands.
"""

from __future__ import annotations

import os
import re

from delegate_skills import registry
from delegate_skills.jstext import js_trim
from delegate_skills.reading import part_of_file
from delegate_skills.relay.adapter import State
from delegate_skills.relay.artifacts import STDERR_NAME
from delegate_skills.relay.options import (
    POSITIVE_INT,
    Usage,
    check_model,
    check_token,
    timeout_ms,
    value_flag,
)
from delegate_skills.relay.parts import (
    STDOUT_NAME,
    StdoutReportAdapter,
    StdoutState,
    check_argv_brief,
    check_session,
    read_only_flag,
    resume_args,
    resume_lines,
    resumed,
    session_flags,
)

#: The toolset a read-only run gets, and where hermes may then write (nowhere).
READ_ONLY_TOOLSETS = "file"
SAFE_ROOT_ENV = "HERMES_WRITE_SAFE_ROOT"
_SESSION_LINE = re.compile(r"^session_id:[ \t]*([A-Za-z0-9._:-]+)[ \t]*\r?$", re.MULTILINE)
#: How much of the end of each stream is searched for the session id.
_TAIL_BYTES = 64 * 1024
TOO_BIG = (
    "brief is {kb}KB; hermes takes the query as a command-line argument, which the OS caps "
    "(~128KB on Linux). Trim it, or have hermes read large context from the repository."
)


def _tail(path: str) -> str:
    return part_of_file(path, _TAIL_BYTES, tail=True).decode("utf-8", errors="replace")


def session_from(*texts: str) -> str | None:
    """The id of the last `session_id:` line in `texts`, searched in order."""
    found = None
    for text in texts:
        matches = _SESSION_LINE.findall(text)
        if matches:
            found = matches[-1]
    return found


def reply(stdout: str) -> str:
    """hermes's answer: stdout without its leading warnings (`⚠ …`) and the session line."""
    lines = stdout.splitlines()
    while lines and (not lines[0].strip() or lines[0].lstrip().startswith("⚠")):
        lines.pop(0)
    return js_trim("\n".join(line for line in lines if not _SESSION_LINE.match(line)))


class Hermes(StdoutReportAdapter):
    key = "hermes"
    resume_keeps_id = True  # checked against the real CLI
    display = "Hermes Agent"
    tool = "hermes"
    install_hint = (
        "Install Hermes Agent (`pip install hermes-agent`, or pipx), then choose a provider: "
        "`hermes model` (or a provider API key in ~/.hermes/.env)."
    )
    write_access = "every tool, approval prompts off (`hermes chat --yolo`)"
    read_only_route = (
        "`--read-only`: the file toolset only, every write refused (HERMES_WRITE_SAFE_ROOT)"
    )
    about = (
        "Hands a brief to Hermes Agent as `hermes chat -Q --query=<brief>` and keeps\n"
        "its plain-text reply (stdout, copied to stdout.txt); the session id comes\n"
        "from its `session_id:` line. Write runs pass --yolo (no approval prompts,\n"
        "which a headless run cannot answer). --read-only offers only the file tools\n"
        "(-t file) and sets HERMES_WRITE_SAFE_ROOT so that hermes refuses every\n"
        "write: no shell, no code execution, no subagents. hermes reports no token\n"
        "counts here. The brief rides argv (visible in ps), so it is capped at 120 KiB."
    )
    brief_via = "argv"
    default_timeout = "30m"
    path_fields = ("brief", "final", "stderr")
    flags = (
        value_flag(
            "--provider",
            "provider",
            "<name>",
            "Inference provider for this run (hermes --provider).",
            token=registry.SHELL_SAFE,
        ),
        value_flag(
            "--max-turns",
            "maxTurns",
            "<n>",
            "Most tool-calling iterations in the turn (hermes --max-turns).",
            flagged=False,
        ),
        read_only_flag(
            "File tools only, every write refused by hermes; the relay reports readOnlyViolation."
        ),
        *session_flags(
            "Continue the most recent Hermes session (hermes --continue).",
            "Continue this Hermes session id (hermes --resume <id>).",
        ),
    )

    def validate(self, opts: dict) -> None:
        check_session(opts)
        check_model(opts, registry.SHELL_SAFE)
        check_token(opts, "provider", "--provider", registry.SHELL_SAFE)
        turns = opts["maxTurns"]
        if turns is not None and POSITIVE_INT.fullmatch(turns) is None:
            raise Usage("--max-turns must be a positive integer")
        timeout_ms(opts)

    def check_brief(self, opts: dict, brief: str) -> None:
        check_argv_brief(brief, "--query", TOO_BIG)

    def read_only(self, opts: dict) -> bool:
        return opts["readOnly"]

    def child_env(self, opts: dict) -> dict[str, str]:
        env = dict(os.environ)
        if opts["readOnly"]:
            env[SAFE_ROOT_ENV] = os.devnull
        return env

    def parse_version(self, stdout: str) -> str:
        lines = [line.strip() for line in stdout.splitlines() if line.strip()]
        return lines[0] if lines else "unknown"

    def build_argv(self, opts: dict, run) -> list[str]:
        argv = ["chat", "-Q"]
        argv += ["-t", READ_ONLY_TOOLSETS] if opts["readOnly"] else ["--yolo"]
        for flag, field in (("-m", "model"), ("--provider", "provider")):
            if opts[field]:
                argv += [flag, opts[field]]
        if opts["maxTurns"]:
            argv += ["--max-turns", opts["maxTurns"]]
        argv += resume_args(opts)
        # `--query=` keeps a brief that starts with `-` from reading as an option.
        argv.append(f"--query={run.brief}")
        return argv

    def _session(self, state: State) -> str | None:
        if state.run is None:
            return None
        return session_from(_tail(state.run.file(STDOUT_NAME)), _tail(state.run.file(STDERR_NAME)))

    def final_message(self, state: StdoutState, run) -> str:
        return reply(state.stdout.text())

    def failure(self, state: StdoutState) -> str | None:
        if state.exit_code == 0 and not reply(state.stdout.text()):
            return "hermes exited without a reply; inspect stderr.txt"
        return None

    def id_fields(self, state: State) -> dict:
        state.session_id = self._session(state)
        return {"sessionId": state.session_id}

    def metric_fields(self, state: State) -> dict:
        # `hermes chat` prints no token counts: null, in the field other relays fill.
        return {"usage": None, **super().metric_fields(state)}

    def config_fields(self, opts: dict, state: State) -> dict:
        return {
            "model": opts["model"],
            "provider": opts["provider"],
            "maxTurns": opts["maxTurns"],
            "readOnly": opts["readOnly"],
            "toolsets": READ_ONLY_TOOLSETS if opts["readOnly"] else None,
            "yolo": not opts["readOnly"],
            "resumed": resumed(opts),
        }

    def summary_lines(self, opts: dict, state: State, result: dict) -> list[str]:
        mode = "read-only: file tools only, writes refused" if opts["readOnly"] else "--yolo"
        return [f"mode: {mode}", *resume_lines(result["resumed"], result["sessionId"])]


ADAPTER = Hermes()
