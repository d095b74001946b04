"""Pieces shared by adapters: written for kimi, qoder and cursor, used by others too.

`--add-dir` (a repeatable flag whose directories resolve against `--cd`), the
`--resume-last`/`--session` pair, a base for adapters whose brief rides on the
implementer's command line, and the summary lines about resuming. Candidates
for the engine: nothing here is specific to one CLI.
"""

from __future__ import annotations

import os

from delegate_skills.relay.adapter import Adapter, State
from delegate_skills.relay.options import SESSION, Flag, Usage, check_exclusive, check_token

#: Briefs passed in argv stay below the OS's per-argument cap (~128 KiB on Linux).
MAX_ARGV_BRIEF_BYTES = 120 * 1024


def add_dir_flag(help: str) -> Flag:
    return Flag("--add-dir", "addDirs", metavar="<dir>", append=True, help=help)


def add_dir_args(opts: dict, flag: str = "--add-dir") -> list[str]:
    """`flag <dir>` per --add-dir, in order, each resolved against --cd."""
    argv: list[str] = []
    for directory in opts["addDirs"]:
        argv += [flag, os.path.normpath(os.path.join(opts["cd"], directory))]
    return argv


def check_argv_brief(brief: str, too_big: str, where: str) -> None:
    """Refuse a brief argv cannot carry; `too_big` is formatted with `kb`."""
    size = len(brief.encode("utf-8", errors="replace"))
    if size > MAX_ARGV_BRIEF_BYTES:
        raise Usage(too_big.format(kb=int(size / 1024 + 0.5)))
    if "\0" in brief:
        raise Usage(f"brief contains a NUL byte, which cannot be passed in {where}")


def session_flags(last_help: str, session_help: str) -> tuple[Flag, Flag]:
    """`--resume-last` and `--session <id>`, the usual pair of resume flags."""
    return (
        Flag("--resume-last", sets={"resumeLast": True}, help=last_help),
        Flag("--session", "session", metavar="<id>", help=session_help),
    )


def check_session(opts: dict) -> None:
    """One resume form at most, and a session id that cannot pass for an option."""
    check_exclusive(opts, ("resumeLast", "--resume-last"), ("session", "--session"))
    check_token(opts, "session", "--session", SESSION)


def resume_lines(resumed: bool, state: State, flag: str = "--session") -> list[str]:
    """The summary's resume lines: how this run started, and how to continue it."""
    lines = ["mode: resumed an existing session"] if resumed else []
    if state.session_id:
        lines.append(f"session id (resume with: {flag} {state.session_id}): {state.session_id}")
    return lines


class ArgvBriefAdapter(Adapter):
    """An implementer that takes the brief as a command-line argument.

    `too_big` is the size message (formatted with `kb`), `nul_where` names
    where a NUL byte could not go.
    """

    default_timeout = "30m"
    brief_via = "argv"
    stderr_file = True
    path_fields = ("brief", "final", "events", "stderr")
    too_big = "brief is {kb}KB; too large for a command-line argument"
    nul_where = "argv"

    def check_brief(self, opts: dict, brief: str) -> None:
        check_argv_brief(brief, self.too_big, self.nul_where)
