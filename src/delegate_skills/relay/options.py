"""Relay command lines: the flag table, parsing, and the shared value checks.

Parsing follows the Node relays: one left-to-right pass over exact tokens (no
`--flag=value`, no bundling); a value flag takes the next token, whatever it
is; the last of a repeated flag wins, list flags append; `-h`/`--help` prints
help and exits 0 the moment it is reached. Once the relay's own checks have
run, any value that starts with `-` is refused (`refuse_option_like`): values
reach the implementer's command line, where `--session --version` would
become the implementer's own `--version`. Every usage error is one `relay: …`
line on stderr and exit 2, before any artifact exists.
"""

from __future__ import annotations

import os

from .. import durations, registry, rules


class Usage(Exception):
    """A usage error: `relay: <message>` on stderr, exit 2, nothing written."""


class HelpRequested(Exception):
    pass


class Flag:
    """One relay option.

    `dest` receives the value of a value flag (or a list of them with
    `append`); `sets` holds constants a flag assigns (a switch's effect);
    `flags` names the fields this flag marks as explicitly chosen, which
    lane dials then leave alone. A value flag with a `token` has its value
    (each value, for `append`) checked against it once lanes are applied.
    """

    __slots__ = ("append", "dest", "flags", "help", "metavar", "name", "sets", "token", "value")

    def __init__(
        self,
        name: str,
        dest: str | None = None,
        *,
        metavar: str = "",
        sets: dict | None = None,
        append: bool = False,
        flags: tuple[str, ...] = (),
        help: str = "",
        token: rules.Token | None = None,
    ) -> None:
        self.name = name
        self.token = token
        self.dest = dest
        self.value = dest is not None
        self.metavar = metavar
        self.sets = sets or {}
        self.append = append
        self.flags = flags
        self.help = help


def value_flag(
    name: str,
    dest: str,
    metavar: str,
    help: str,
    *,
    flagged: bool = True,
    token: rules.Token | None = None,
    append: bool = False,
) -> Flag:
    """A flag that takes a value, marks its field as chosen when `flagged`."""
    return Flag(
        name,
        dest,
        metavar=metavar,
        flags=(dest,) if flagged else (),
        help=help,
        token=token,
        append=append,
    )


def switch_flag(name: str, dest: str, help: str, *, flagged: bool = False) -> Flag:
    """A flag that sets `dest` to True, and marks it as chosen when `flagged`."""
    return Flag(name, sets={dest: True}, flags=(dest,) if flagged else (), help=help)


def flag_defaults(flags: tuple[Flag, ...]) -> dict:
    """Each flag's field before any flag is given: a value flag None, a list flag
    [], a switch False. A field the first flag to name it leaves undefined (a
    switch that sets something other than True) is the adapter's to give."""
    found: dict = {}
    for flag in flags:
        if flag.dest is not None:
            found.setdefault(flag.dest, [] if flag.append else None)
        for field, value in flag.sets.items():
            if value is True:
                found.setdefault(field, False)
    return found


COMMON_FLAGS = (
    value_flag(
        "--brief",
        "brief",
        "<file>",
        "Brief file. Without it the brief is read from stdin.",
        flagged=False,
    ),
    value_flag(
        "--cd",
        "cd",
        "<dir>",
        "Working directory for the implementer (default: here).",
        flagged=False,
    ),
    value_flag(
        "--lane",
        "lane",
        "<name>",
        "Fleet lane: its dials apply, explicit flags win.",
        flagged=False,
    ),
)
TAIL_FLAGS = (
    value_flag("--timeout", "timeout", "<dur>", "Relay watchdog as h/m/s (30m, 90s, 1h30m)."),
    value_flag(
        "--out-dir",
        "outDir",
        "<dir>",
        "Artifact directory (default: a new one under the system temp dir).",
        flagged=False,
    ),
    switch_flag(
        "--worktree",
        "worktree",
        "Run in a new git worktree of --cd's repository, on branch delegate/<run id> from "
        "HEAD; the source tree is left as it is (land with `runs apply`).",
    ),
    value_flag(
        "--host",
        "host",
        "<name>",
        "Run on another machine over your own ssh (an alias from your ssh config, "
        "user@host): HEAD goes there by git, the run works in a worktree there, and its "
        "change comes back as a local delegate/<id> branch and worktree (land with "
        "`runs apply`).",
        flagged=False,
    ),
    switch_flag(
        "--include-uncommitted",
        "includeUncommitted",
        "With --host: the run starts from the work tree as it is (uncommitted and untracked "
        "files too, as a commit on top of HEAD).",
    ),
    value_flag(
        "--continue",
        "continueRun",
        "<run>",
        "Resume that run's session where it ran (its worktree too): a run directory or "
        "run id. The two runs are linked (previousRun).",
        flagged=False,
    ),
    value_flag(
        "--setup",
        "setup",
        "<cmd>",
        "With --worktree: a shell command run in the new worktree before the implementer "
        "(copy .env, npm ci); its output in setup.log. A failing setup ends the run as "
        "failed and keeps the worktree.",
        flagged=False,
    ),
    value_flag(
        "--check",
        "check",
        "<cmd>",
        "A shell command run where the implementer worked once it has finished (pytest -q); "
        "the result gains check {command, exitCode, seconds, tail}, its output check.log.",
        flagged=False,
    ),
    Flag(
        "--confine",
        sets={"confine": True},
        help="Confine the implementer with bubblewrap (Linux): it may write its work tree, "
        "its run directory, its CLI's own state and a private /tmp, nothing else; the result "
        'says confined: "bwrap", or null and why.',
    ),
    Flag(
        "--no-confine",
        sets={"confine": False},
        help="Do not confine this write run, whatever DELEGATE_CONFINE or the settings file "
        "say (a read-only run is always confined where bubblewrap works).",
    ),
    switch_flag(
        "--skip-preflight",
        "skipPreflight",
        "Dispatch even when the checks before it say it would fail (a CLI the cache knows "
        "is signed out, sandbox tools missing).",
    ),
    switch_flag(
        "--dry-run",
        "dryRun",
        "Resolve the lane and flags and run the checks; print (JSON) the command line that "
        "would be launched, the read-only route and whether it would be enforced. Launches "
        "nothing.",
    ),
)
MODEL_FLAG = value_flag("--model", "model", "<name>", "Model for this run.")
PATH_DESTS = ("cd", "outDir")


def parse(
    argv: list[str],
    table: dict[str, Flag],
    opts: dict,
    given: list | None = None,
    typed: list | None = None,
) -> set[str]:
    """Apply `argv` to `opts`; return the set of fields set by explicit flags.

    `given`, when passed, receives each (flag, value) pair as typed; `typed`
    each flag name as typed.
    """
    flagged: set[str] = set()
    i = 0
    while i < len(argv):
        token = argv[i]
        if token in ("-h", "--help"):
            raise HelpRequested()
        flag = table.get(token)
        if flag is None:
            raise Usage(f"unknown option: {token}")
        if typed is not None:
            typed.append(token)
        if flag.value:
            if i + 1 >= len(argv):
                raise Usage(f"{token} requires a value")
            i += 1
            value = argv[i]
            if given is not None:
                given.append((token, value))
            if flag.dest in PATH_DESTS:
                value = os.path.abspath(value)
            if flag.append:
                opts[flag.dest] = [*opts.get(flag.dest, []), value]
            else:
                opts[flag.dest] = value
        opts.update(flag.sets)
        flagged.update(flag.flags)
        i += 1
    return flagged


# ---------------------------------------------------------------- shared checks

#: Session and thread ids that go on a command line.
SESSION = registry.SESSION_ID
ENV_NAME = rules.Shape("A-Za-z_", "A-Za-z0-9_")

TIMEOUT_MESSAGE = (
    '--timeout "{value}" is invalid or too long; '
    "use a positive h/m/s duration no longer than about 24 days"
)
#: The other wordings the relays use for a bad --timeout (each as its own
#: relay words it), so every adapter that shares one names it from here.
NOT_A_DURATION = '--timeout "{value}" is not a duration; use h/m/s strings like 30m, 90s, or 1h30m'
NOT_SCHEDULABLE = (
    '--timeout "{value}" is not a positive schedulable duration; use h/m/s strings '
    "like 30m, 90s, or 1h30m (maximum ~24.8 days)"
)


def timeout_ms(opts: dict, message: str = TIMEOUT_MESSAGE) -> int | None:
    """The watchdog in milliseconds (None when off). Raises Usage on a bad value."""
    value = opts.get("timeout")
    if value is None:
        return None
    ms = durations.parse_timeout_ms(value)
    if ms is None:
        raise Usage(message.format(value=value))
    return ms


def check_model(opts: dict, token: rules.Token | None) -> None:
    model = opts.get("model")
    if model is not None and token is not None and not token.accepts(model):
        raise Usage(f"--model contains unsupported characters (allowed: {token.allowed})")


def refuse_option_like(given: list[tuple[str, str]]) -> None:
    """Refuse a value that starts with `-`: on the implementer's command line it is an option.

    Checked after the relay's own checks, which word some of these refusals
    their own way.
    """
    for flag, value in given:
        if value.startswith("-"):
            raise Usage(
                f"{flag} requires a value; {value} looks like an option "
                f"(a path that starts with - can be written ./{value})"
            )


def check_flag_tokens(table: dict[str, Flag], opts: dict) -> None:
    """Check every value of a flag that declares a token. Raises Usage."""
    for flag in table.values():
        if flag.token is None or opts.get(flag.dest) is None:
            continue
        values = opts[flag.dest] if flag.append else [opts[flag.dest]]
        for value in values:
            if not flag.token.accepts(value):
                raise Usage(
                    f"{flag.name} contains unsupported characters (allowed: {flag.token.allowed})"
                )


def check_token(opts: dict, field: str, flag: str, token: rules.Token) -> None:
    value = opts.get(field)
    if value is not None and not token.accepts(value):
        raise Usage(f"{flag} contains unsupported characters (allowed: {token.allowed})")


def check_filled(opts: dict, field: str, flag: str) -> None:
    """Refuse a value given as nothing but (JavaScript) whitespace."""
    from ..jstext import js_trim

    value = opts.get(field)
    if value is not None and not js_trim(value):
        raise Usage(f"{flag} must not be empty")


#: A count given on the command line: a positive integer without leading zeros.
POSITIVE_INT = rules.Pattern(r"[1-9][0-9]*")


def check_count(opts: dict, field: str, message: str, most: int | None = None) -> None:
    """Refuse a set value that is not a positive integer (or is above `most`)."""
    value = opts.get(field)
    if value is not None and (
        POSITIVE_INT.fullmatch(value) is None or (most is not None and int(value) > most)
    ):
        raise Usage(message)


def check_choice(opts: dict, field: str, flag: str, choices: tuple[str, ...]) -> None:
    value = opts.get(field)
    if value is not None and value not in choices:
        raise Usage(f'invalid {flag} "{value}" (expected: {", ".join(choices)})')


def check_exclusive(
    opts: dict, first: tuple[str, str], second: tuple[str, str], tail: str = "; pass only one"
) -> None:
    """Refuse two options together; each pair is (field, flag as the message names it)."""
    if opts.get(first[0]) and opts.get(second[0]):
        raise Usage(f"{first[1]} and {second[1]} are mutually exclusive{tail}")


def check_directory(path: str, flag: str = "--cd") -> None:
    if not os.path.exists(path):
        raise Usage(f"{flag} directory not found: {path}")
    if not os.path.isdir(path):
        raise Usage(f"{flag} is not a directory: {path}")
