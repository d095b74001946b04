"""`delegate mcp`: the CLI's read and dispatch commands as MCP tools, over stdio.

Every tool runs exactly one `delegate` command and returns what it printed;
the server holds no logic of its own. Nothing here writes or approves a
config, edits a lane or removes anything: those stay with the user, at the
command line. So do shell commands and turning confinement off: dispatch
refuses in `args` the relay flags whose value the relay runs as a shell
command (--setup, --check; the relay runs it with the user's rights, outside
whatever confines the implementer) and the one that lets the implementer
write outside its work tree (--no-confine). Either would let one call approve
a config or change a lane.

Needs the optional `mcp` package (the `mcp` extra of delegate-skills).
"""

import datetime
import os
import subprocess
import sys
import time
from typing import Annotated

INSTRUCTIONS = (
    "delegate-skills: find installed coding-agent CLIs, read the fleet lanes, dispatch a "
    "brief to an implementer and wait for its result.json. Typical use: lane_resolve or "
    "doctor, then dispatch (returns the run's id and out dir), then runs_wait with that id "
    "(runs_cancel ends a run), then review the diff yourself and commit. Every runs_* tool "
    "and review names the run by `run`: its run id (or a unique prefix) or its directory. "
    "dispatch with worktree=true, and "
    "fanout (one brief to several lanes or implementers at once, blocking until all end), "
    "run in new git worktrees "
    "outside the user's tree and write nothing to it; the user lands the run they keep with "
    "`delegate runs apply` at the command line. No tool writes or approves a config, edits "
    "a lane or deletes anything; ask the user to run `delegate lane set`, `delegate config "
    "write` or `delegate config approve` themselves. Shell commands and turning confinement "
    "off are the user's too: dispatch refuses --setup and --check (their value runs as a "
    "shell command) and --no-confine in args; ask the user to give them at the command line."
)
#: Relay flags the dispatch tool sets itself.
RESERVED_FLAGS = ("--brief", "--out-dir", "--cd", "-h", "--help")
#: Relay flags only the user may give: (what it does, how it is written). --setup
#: and --check take a shell command that the relay itself runs, with the user's
#: rights and outside whatever confines the implementer; --no-confine lets the
#: implementer write the fleet config and the approval store. Any relay flag that
#: approved a config or changed a lane would be listed here too; none does.
USER_ONLY_FLAGS = {
    "--setup": ("runs its value as a shell command", "--setup CMD"),
    "--check": ("runs its value as a shell command", "--check CMD"),
    "--no-confine": (
        "lets the implementer write outside its work tree, the fleet config and its "
        "approval included",
        "--no-confine",
    ),
}


class CommandFailed(Exception):
    pass


def delegate_argv(*args: str) -> list[str]:
    return [sys.executable, "-m", "delegate_skills", *args]


def run_cli(*args: str, ok_codes: tuple[int, ...] | None = (0,)) -> str:
    """Run one `delegate` command; its stdout, or CommandFailed with its error line.

    `ok_codes` None accepts any exit code that came with output (`runs wait`
    exits with the run's own code).
    """
    done = subprocess.run(
        delegate_argv(*args), capture_output=True, text=True, stdin=subprocess.DEVNULL, check=False
    )
    accepted = bool(done.stdout.strip()) if ok_codes is None else done.returncode in ok_codes
    if not accepted:
        message = done.stderr.strip() or f"delegate {' '.join(args)} exited {done.returncode}"
        raise CommandFailed(message)
    return done.stdout


def _cwd_args(cwd: str | None) -> list[str]:
    return [f"--cwd={cwd}"] if cwd else []


def operand(value: str) -> list[str]:
    """A positional argument that can never be read as an option (`--help` included)."""
    return ["--", value]


def relay_args(args: list[str] | None, worktree: bool) -> list[str]:
    """The dispatch tool's extra relay flags, with `--worktree` once when asked for."""
    extra = list(args or [])
    if worktree and "--worktree" not in extra:
        extra.append("--worktree")
    return extra


def fanout_argv(
    brief_file: str,
    cd: str,
    lanes: list[str] | None,
    implementers: list[str] | None,
    jobs: int | None,
    timeout: str | None,
) -> list[str]:
    """`delegate fanout … --json` arguments, each value joined to its flag (`--lane=-x`)."""
    argv = ["fanout", f"--brief={brief_file}", f"--cd={cd}"]
    argv += [f"--lane={name}" for name in lanes or []]
    argv += [f"--implementer={key}" for key in implementers or []]
    if jobs is not None:
        argv.append(f"--jobs={jobs}")
    if timeout:
        argv.append(f"--timeout={timeout}")
    return [*argv, "--json"]


#: The name of the brief file the fanout tool writes, in the private run root.
FANOUT_BRIEF_PREFIX = ".fanout-brief-"


def run_fanout(
    brief: str | None,
    cd: str,
    lanes: list[str] | None,
    implementers: list[str] | None,
    jobs: int | None,
    timeout: str | None,
    brief_file: str | None = None,
) -> str:
    """Run `delegate fanout --json` on `brief_file`, or on `brief` kept in a private
    file for the call's length.

    Any exit that printed the report is a result (1 when a run did not
    complete); a usage error prints nothing and raises CommandFailed.
    """
    if brief_file is not None:
        argv = fanout_argv(brief_file, cd, lanes, implementers, jobs, timeout)
        return run_cli(*argv, ok_codes=None)
    import tempfile

    from ..relay.rundir import default_root, ensure_private_root

    root = default_root()
    try:
        ensure_private_root(root)
        handle, path = tempfile.mkstemp(prefix=FANOUT_BRIEF_PREFIX, suffix=".txt", dir=root)
    except OSError as problem:
        raise CommandFailed(f"cannot write the brief under {root}: {problem}") from None
    try:
        with os.fdopen(handle, "wb") as stream:
            stream.write(brief.encode("utf-8"))
        return run_cli(*fanout_argv(path, cd, lanes, implementers, jobs, timeout), ok_codes=None)
    finally:
        try:
            os.unlink(path)
        except OSError:
            pass


def _dispatch_dir(cwd: str) -> str:
    from ..relay.rundir import default_root

    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H-%M-%S-%fZ")
    base = os.path.basename(os.path.normpath(cwd)) or "repo"
    return os.path.join(default_root(), f"{base}-{stamp}-mcp{os.urandom(3).hex()}")


#: The relay's own stderr, kept in the run directory a dispatch creates.
RELAY_LOG = "relay-stderr.txt"
#: How long dispatch waits for a relay to show it started (run.json) or failed.
START_WAIT_S = 60.0
_START_POLL_S = 0.02
#: The most of a failed relay's stderr that dispatch reports.
_LOG_LIMIT = 64 * 1024


def brief_source(
    brief: str | None, brief_file: str | None, cd: str
) -> tuple[str | None, str | None]:
    """(brief text, brief file) for a dispatch or fanout: exactly one of them. Raises CommandFailed.

    `brief_file` is made absolute against `cd`. A `brief` that is nothing but
    the path of an existing file is refused: it would run as those few words.
    """
    if (brief is None) == (brief_file is None):
        raise CommandFailed("give the brief as brief (its text) or briefFile (a path), one of them")
    if brief_file is not None:
        path = os.path.join(cd, os.path.expanduser(brief_file))
        if not os.path.isfile(path):
            raise CommandFailed(f"briefFile not found: {path}")
        return None, os.path.abspath(path)
    words = brief.strip()
    if words and "\n" not in words and len(words) < 4096:
        named = os.path.join(cd, os.path.expanduser(words))
        if os.path.isfile(named):
            raise CommandFailed(
                f"brief is the brief's text, and {words!r} is only the path of a file; "
                "pass the path as briefFile instead"
            )
    return brief, None


def refuse_user_only(args: list[str]) -> None:
    """Refuse any token of `args` that is a user-only relay flag. Raises CommandFailed.

    Every token counts, a value too (the relay would refuse a value that looks
    like an option anyway), and `--check=…` as well as `--check`.
    """
    for arg in args:
        name = arg.split("=", 1)[0]
        if name in USER_ONLY_FLAGS:
            does, written = USER_ONLY_FLAGS[name]
            raise CommandFailed(
                f"{name} {does}: only the user gives it, at the command line (delegate relay "
                f"KEY {written}); no MCP tool takes it, so leave it out of args"
            )


def start_relay(
    implementer: str,
    brief: str | None,
    cd: str,
    lane: str | None,
    args: list[str],
    brief_file: str | None = None,
) -> dict:
    """Start `delegate relay` detached, the brief on its stdin (or `--brief brief_file`).

    Returns once the relay has written run.json (it passed its checks and
    the run is on its way); a relay that exits first, on a usage error for
    example, raises CommandFailed with what it printed.
    """
    from .. import registry
    from ..relay.rundir import default_root, ensure_private_root

    if registry.get(implementer) is None:
        raise CommandFailed(
            f"unknown implementer {implementer!r} (one of: {', '.join(registry.KEYS)})"
        )
    refuse_user_only(args)
    for arg in args:
        if arg in RESERVED_FLAGS:
            raise CommandFailed(f"{arg} is set by the dispatch tool; leave it out of args")
    if lane is not None and (not lane or lane.startswith("-")):
        raise CommandFailed(f"lane {lane!r} is not a lane name")
    if not os.path.isdir(cd):
        raise CommandFailed(f"cd is not a directory: {cd}")
    out_dir = _dispatch_dir(cd)
    try:
        ensure_private_root(default_root())
        os.mkdir(out_dir, 0o700)
        log = os.open(
            os.path.join(out_dir, RELAY_LOG),
            os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW,
            0o600,
        )
    except OSError as problem:
        raise CommandFailed(f"cannot create the run directory {out_dir}: {problem}") from None
    argv = delegate_argv("relay", implementer, "--cd", cd, "--out-dir", out_dir)
    if brief_file is not None:
        argv += ["--brief", brief_file]
    if lane:
        argv += ["--lane", lane]
    argv += list(args)
    try:
        from .fanout import launcher_env

        proc = subprocess.Popen(
            argv, stdin=subprocess.DEVNULL if brief is None else subprocess.PIPE,
            stdout=subprocess.DEVNULL, stderr=log, start_new_session=True,
            env=launcher_env(RELAY_LOG),
        )  # fmt: skip
    finally:
        os.close(log)
    if brief is not None:
        try:
            proc.stdin.write(brief.encode("utf-8"))
            proc.stdin.close()
        except BrokenPipeError:
            pass  # it exited before reading the brief: its stderr says why
    if not _started(proc, out_dir):
        raise CommandFailed(_start_failure(proc, out_dir))
    from ..runstore.outdirs import by_out_dir

    found = by_out_dir(out_dir)
    return {"runId": found.id if found is not None else None, "outDir": out_dir,
            "pid": proc.pid, "implementer": implementer, "lane": lane}  # fmt: skip


def _started(proc: subprocess.Popen, out_dir: str) -> bool:
    """Wait until the relay wrote run.json (True) or exited without it (False)."""
    from ..relay.marker import RUN_FILE

    marker = os.path.join(out_dir, RUN_FILE)
    ends = time.monotonic() + START_WAIT_S
    while time.monotonic() < ends:
        if os.path.exists(marker):
            return True
        if proc.poll() is not None:
            return os.path.exists(marker)
        time.sleep(_START_POLL_S)
    return True  # still going after a minute: it is running, and `runs` will tell


def _start_failure(proc: subprocess.Popen, out_dir: str) -> str:
    """What a relay that exited before starting printed; its directory is removed."""
    log = os.path.join(out_dir, RELAY_LOG)
    try:
        with open(log, "rb") as handle:
            text = handle.read(_LOG_LIMIT).decode("utf-8", errors="replace").strip()
        os.unlink(log)
        os.rmdir(out_dir)
    except OSError:
        text = ""
    return text or f"the relay exited {proc.returncode} before the run started"


def build_server():
    from mcp.server.mcpserver import MCPServer
    from mcp.server.mcpserver.exceptions import ToolError
    from pydantic import AliasChoices, Field

    from .. import __version__, jsjson

    server = MCPServer(name="delegate-skills", version=__version__, instructions=INSTRUCTIONS)
    # Parameter descriptions (evaluated here: pydantic comes with the mcp extra).
    Cwd = Annotated[
        str | None, Field(description="The directory whose lanes count (default: the server's).")
    ]
    Lane = Annotated[str, Field(description="A fleet lane name.")]
    Implementer = Annotated[str, Field(description="An implementer key, e.g. codex or claude.")]
    # `run` takes a run id or a run directory; `outDir`, its former name, is still accepted.
    Run = Annotated[
        str,
        Field(
            validation_alias=AliasChoices("run", "outDir"),
            description="The run: its run id (runId from dispatch; a unique prefix will do) "
            "or its directory (outDir).",
        ),
    ]
    Brief = Annotated[
        str | None, Field(description="The brief's text (or give briefFile). Not a path.")
    ]
    BriefFile = Annotated[
        str | None, Field(description="Path of a file holding the brief (relative to cd).")
    ]

    def call(*args: str, ok_codes: tuple[int, ...] | None = (0,)) -> str:
        try:
            return run_cli(*args, ok_codes=ok_codes)
        except CommandFailed as problem:
            raise ToolError(str(problem)) from None

    @server.tool()
    def discover(
        usage: Annotated[bool, Field(description="Add session counts and last use.")] = False,
    ) -> str:
        """Installed implementer CLIs: version, login, models (`delegate discover --json`)."""
        return call("discover", "--json", *(["--usage"] if usage else []))

    @server.tool()
    def config_load(cwd: Cwd = None) -> str:
        """The effective fleet lanes for a directory (`delegate config load`)."""
        return call("config", "load", *_cwd_args(cwd))

    @server.tool()
    def config_validate(
        file: Annotated[str, Field(description="Path of a delegate-fleet.v1 JSON file.")],
    ) -> str:
        """Check a delegate-fleet.v1 file without writing anything (`delegate config validate`)."""
        return call("config", "validate", *operand(file))

    @server.tool()
    def lane_list(cwd: Cwd = None) -> str:
        """Effective lanes, their source and whether each may dispatch (`delegate lane list`)."""
        return call("lane", "list", "--json", *_cwd_args(cwd))

    @server.tool()
    def lane_resolve(lane: Lane, implementer: Implementer, cwd: Cwd = None) -> str:
        """The dials a lane gives an implementer's relay (`delegate lane resolve`)."""
        return call(
            "lane", "resolve", f"--lane={lane}", f"--implementer={implementer}", *_cwd_args(cwd)
        )

    @server.tool()
    def doctor(
        lane: Annotated[str | None, Field(description="Check only this lane.")] = None,
        cwd: Cwd = None,
    ) -> str:
        """Whether each lane would dispatch, with the fix where not (`delegate doctor`)."""
        return call(
            "doctor",
            "--json",
            *([f"--lane={lane}"] if lane else []),
            *_cwd_args(cwd),
            ok_codes=(0, 1),
        )

    @server.tool()
    def dispatch(
        implementer: Implementer,
        cd: Annotated[str, Field(description="The repository folder the implementer works in.")],
        brief: Brief = None,
        briefFile: BriefFile = None,
        lane: Annotated[str | None, Field(description="A fleet lane to take dials from.")] = None,
        args: Annotated[
            list[str] | None,
            Field(
                description='Further relay flags, e.g. ["--read-only"], ["--timeout", "45m"]. '
                "Not --setup, --check or --no-confine: those are the user's to give."
            ),
        ] = None,
        worktree: Annotated[
            bool, Field(description="Run in a new git worktree outside cd (--worktree).")
        ] = False,
    ) -> str:
        """Start `delegate relay IMPLEMENTER --cd CD` detached with this brief.

        Give the brief as `brief` (its text) or `briefFile` (a path). Returns the
        run's `runId` and `outDir` once the relay has started (a usage error is a
        tool error). Wait with runs_wait(run=runId); the relay never commits. With
        `worktree` the run happens in its own new git worktree on branch
        delegate/<runId>, outside CD, which stays untouched; its result gains
        `worktree` and `diffstat`. Landing it is the user's, at the command line:
        `delegate runs apply RUNID` (not a tool). `args` may not hold --setup or
        --check (the relay runs their value as a shell command) or --no-confine:
        those are the user's to give, at the command line; such a call is
        refused and starts nothing.
        """
        try:
            text, path = brief_source(brief, briefFile, cd)
            started = start_relay(implementer, text, cd, lane, relay_args(args, worktree), path)
            return jsjson.stringify(started, 2)
        except CommandFailed as problem:
            raise ToolError(str(problem)) from None

    @server.tool()
    def fanout(
        cd: Annotated[
            str, Field(description="The repository folder; each run is in a worktree of it.")
        ],
        brief: Brief = None,
        briefFile: BriefFile = None,
        lanes: Annotated[list[str] | None, Field(description="Fleet lanes, one run each.")] = None,
        implementers: Annotated[
            list[str] | None, Field(description="Implementer keys, one run each (no lane).")
        ] = None,
        jobs: Annotated[int | None, Field(description="Runs at once (default: all).")] = None,
        timeout: Annotated[
            str | None, Field(description="Each run's watchdog as h/m/s, e.g. 45m.")
        ] = None,
    ) -> str:
        """Run one brief on several lanes and/or implementers at once (`delegate fanout --json`).

        Give the brief as `brief` (its text) or `briefFile` (a path). Blocks until
        every run has ended, then returns `runs`: one row each with lane,
        implementer, outDir, status, exitCode, durationSeconds, worktree,
        diffstat, tokens and, for read-only runs, readOnlyViolation. Each run
        happens in its own new git worktree (branch delegate/<run id>) outside
        CD; nothing is committed or applied. Compare the runs with runs_show; the
        user lands one with `delegate runs apply RUN` at the command line.
        For fire-and-forget use dispatch with worktree=true.
        """
        try:
            text, path = brief_source(brief, briefFile, cd)
            return run_fanout(text, cd, lanes, implementers, jobs, timeout, path)
        except CommandFailed as problem:
            raise ToolError(str(problem)) from None

    @server.tool()
    def runs_list(
        roots: Annotated[
            list[str] | None, Field(description="Further folders to look for run directories in.")
        ] = None,
    ) -> str:
        """Relay runs, newest first, with their status (`delegate runs list --json`)."""
        extra = [f"--root={root}" for root in roots or []]
        return call("runs", "list", "--json", *extra)

    @server.tool()
    def runs_show(run: Run) -> str:
        """One run's state and result (`delegate runs show --json`)."""
        return call("runs", "show", "--json", *operand(run))

    @server.tool()
    def runs_diff(
        run: Run,
        stat: Annotated[bool, Field(description="A diffstat instead of the patch.")] = False,
        nameOnly: Annotated[bool, Field(description="Only the changed paths.")] = False,
    ) -> str:
        """What that run itself changed, as a patch, from its change record (`delegate runs diff`).

        New and binary files are in the patch. Read-only.
        """
        mode = ["--stat"] if stat else ["--name-only"] if nameOnly else []
        return call("runs", "diff", *mode, "--no-color", *operand(run))

    @server.tool()
    def runs_wait(
        run: Run,
        timeout: Annotated[
            str | None, Field(description="Give up after this h/m/s duration, e.g. 30m.")
        ] = None,
    ) -> str:
        """Wait until a run has a result (or is lost) (`delegate runs wait`)."""
        extra = [f"--timeout={timeout}"] if timeout else []
        return call("runs", "wait", "--json", *extra, *operand(run), ok_codes=None)

    @server.tool()
    def review(
        run: Run,
        implementer: Annotated[
            str | None, Field(description="The reviewer: this implementer (or give lane).")
        ] = None,
        lane: Annotated[str | None, Field(description="The reviewer: this fleet lane.")] = None,
        allowSelf: Annotated[
            bool, Field(description="Let an implementer review its own run.")
        ] = False,
    ) -> str:
        """Another implementer's read-only review of a run (`delegate review --json`).

        Blocks until the review run ends; returns its result, whose `review`
        holds the verdict (approve | request-changes | null) and findings.
        """
        args = [f"--implementer={implementer}"] if implementer else []
        args += [f"--lane={lane}"] if lane else []
        args += ["--allow-self"] if allowSelf else []
        return call("review", "--json", *args, *operand(run), ok_codes=None)

    @server.tool()
    def runs_cancel(run: Run) -> str:
        """End a running run as Ctrl-C would (`delegate runs cancel --json`).

        Its relay stops the implementer and everything it started and writes
        an `aborted` result.
        """
        return call("runs", "cancel", "--json", *operand(run))

    @server.tool()
    def runs_usage(
        since: Annotated[
            str | None,
            Field(
                description="Only runs started since this day (YYYY-MM-DD, UTC) or within this "
                "age (7d, 12h, 90m)."
            ),
        ] = None,
        by: Annotated[
            str | None, Field(description="Group by implementer (the default), lane, repo or day.")
        ] = None,
    ) -> str:
        """Tokens and cost of the recorded runs, summed per group (`delegate runs usage --json`).

        Read-only. From the run store's records alone; runs that reported no
        usage are counted in runsWithoutUsage, never as zero tokens.
        """
        extra = [f"--since={since}"] if since else []
        extra += [f"--by={by}"] if by else []
        return call("runs", "usage", "--json", *extra)

    return server


#: What each tool is called over MCP, mapped to the command it runs.
TOOL_COMMANDS = {
    "discover": "delegate discover --json",
    "config_load": "delegate config load",
    "config_validate": "delegate config validate",
    "lane_list": "delegate lane list --json",
    "lane_resolve": "delegate lane resolve",
    "doctor": "delegate doctor --json",
    "dispatch": "delegate relay KEY (detached)",
    "fanout": "delegate fanout --json",
    "runs_list": "delegate runs list --json",
    "runs_show": "delegate runs show --json",
    "runs_diff": "delegate runs diff",
    "runs_wait": "delegate runs wait --json",
    "runs_cancel": "delegate runs cancel --json",
    "runs_usage": "delegate runs usage --json",
    "review": "delegate review --json",
}


def serve() -> None:
    build_server().run("stdio")
