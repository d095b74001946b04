"""What an implementer adapter may say, and what it inherits when it says nothing.

An adapter in `relays/<key>.py` subclasses `Adapter` and overrides only what
its implementer does differently: its flags and checks, its argv, where the
brief goes, how to read its output, its environment and its result fields.
Everything else (parsing, lanes, the brief, the run directory, the version
preflight, supervision, signals, the watchdog, touched files, the read-only
tripwire, result.json and the summary) is the engine's.
"""

from __future__ import annotations

import os
import sys

from .. import registry
from .options import (
    COMMON_FLAGS,
    MODEL_FLAG,
    TAIL_FLAGS,
    Flag,
    Usage,
    check_model,
    flag_defaults,
    timeout_ms,
)
from .rundir import RESULT, artifact_stands, holds_relay_result
from .tokens import usage_summary


def _same_file_name(one: str, other: str) -> bool:
    """Whether two paths name one file, as Windows compares names (case-insensitively)."""
    return os.path.realpath(one).lower() == os.path.realpath(other).lower()


def _with_help(flag: Flag, help: str) -> Flag:
    """`flag` as it is, with other help text."""
    return Flag(flag.name, flag.dest, metavar=flag.metavar, sets=flag.sets, append=flag.append,
                flags=flag.flags, help=help, token=flag.token)  # fmt: skip


#: The most assistant text a relay holds for its final message, in characters.
FINAL_LIMIT = 1_048_576


class TextParts:
    """Assistant text parts by id, in the order they came (a repeated id replaces its text in
    place); the oldest are dropped while the whole is over `limit` characters."""

    __slots__ = ("_parts", "_size", "limit")

    def __init__(self, limit: int = FINAL_LIMIT) -> None:
        self.limit = limit
        self._parts: dict[str, str] = {}
        self._size = 0

    def __len__(self) -> int:
        return len(self._parts)

    def put(self, part_id: str, text: str) -> None:
        self._size += len(text) - len(self._parts.get(part_id, ""))
        self._parts[part_id] = text
        while self._size > self.limit and len(self._parts) > 1:
            self._size -= len(self._parts.pop(next(iter(self._parts))))

    def text(self) -> str:
        return "".join(self._parts.values())


class TextTail:
    """Assistant text as it streams in, joined by `sep`, of which only the last
    FINAL_LIMIT characters are kept (`dropped` counts what was let go).

    Memory stays bounded however much an implementer prints: a run that
    streams 300 MB of text keeps about two megabytes of it at any moment.
    """

    __slots__ = ("_parts", "_size", "dropped", "limit", "sep")

    def __init__(self, sep: str = "", limit: int = FINAL_LIMIT) -> None:
        self.sep = sep
        self.limit = limit
        self.dropped = 0
        self._parts: list[str] = []
        self._size = 0

    def append(self, text: str) -> None:
        self._size += len(text) + (len(self.sep) if self._parts else 0)
        self._parts.append(text)
        if self._size > 2 * self.limit:
            self._compact()

    def extend(self, texts) -> None:
        for text in texts:
            self.append(text)

    def _compact(self) -> None:
        joined = self.sep.join(self._parts)
        cut = max(0, len(joined) - self.limit)
        self.dropped += cut
        self._parts = [joined[cut:]]
        self._size = len(self._parts[0])

    def text(self) -> str:
        """The kept text (at most `limit` characters, the latest)."""
        self._compact()
        return self._parts[0] if self._parts else ""

    def __bool__(self) -> bool:
        return bool(self._parts)


class State:
    """What an adapter learns from the implementer's output during a run.

    The engine fills in `run` (the run directory) once it exists, and, when
    the implementer has exited on its own, `exited`, `exit_code` and `signal`
    before it asks `failure()` and `final_message()`.
    """

    def __init__(self, opts: dict) -> None:
        self.opts = opts
        self.session_id: str | None = None
        self.final = ""
        self.run = None
        self.exited = False
        self.exit_code: int | None = None
        self.signal: str | None = None
        #: The run's change record (changes.py), once the work tree is snapshotted.
        self.changes = None
        #: A private folder of the run (beside its record) for the adapter's own use.
        self.scratch: str | None = None
        #: The usage object the CLI reported (in its own shape), for `Adapter.token_usage`.
        self.usage: dict | None = None


def session_lines(session_id: str | None, flag: str = "--session", label: str = "session id"):
    """The summary line that says how to resume: `session id (resume with: --session X): X`."""
    if not session_id:
        return []
    return [f"{label} (resume with: {flag} {session_id}): {session_id}"]


def resume_mode_lines(opts: dict, latest: str, session: str, last: str = "resumeLast") -> list[str]:
    """The summary line saying which session a run resumed: `latest` for the newest
    (the `last` switch), else `session` formatted with the --session `id`."""
    if opts.get(last):
        return [latest]
    if opts.get("session"):
        return [session.format(id=opts["session"])]
    return []


class Adapter:
    #: registry key, e.g. "codex"
    key: str = ""
    #: The product's name in messages ("Codex", "OpenCode").
    display: str = ""
    #: Whether a binary that vanishes between the version preflight and the
    #: launch is reported as unavailable (127) or, as some Node relays do, as a
    #: failed launch (exit 1).
    missing_at_launch_is_unavailable: bool = True
    #: Whether a write run's result says `readOnlyViolation: null` (the question
    #: does not apply) rather than leaving the field out, as Node's agy, zcode
    #: and commandcode relays do.
    null_verdict_on_write_runs: bool = False
    #: The result's `tool` field, or None to leave it out.
    tool: str | None = None
    #: Second half of the "not found on PATH" line.
    install_hint: str = ""
    #: What to do about each of the CLI's documented exit codes: a `hint:` line
    #: in the summary of a failed run that ended with that code.
    exit_hints: dict[int, str] = {}  # noqa: RUF012 (read only)
    #: The result's `error` when the CLI is not found ("": none, as most Node relays).
    unavailable_error: str = ""
    #: One paragraph for --help: what the relay drives and what it can enforce.
    about: str = ""
    #: Report heading in the summary; the label when empty.
    report_name: str = ""
    #: What a write run may do, in a few words (the skills table and SKILL.md).
    write_access: str = ""
    #: How a read-only run is made, in a few words; empty when there is none.
    read_only_route: str = ""
    #: The result field holding the id a later run resumes ("" for none).
    session_field: str = "sessionId"
    #: Whether the result's `sessionId` stands right after `signal` (the default
    #: `id_fields`); False where the relay puts its ids elsewhere, or has none.
    session_id_after_signal: bool = True
    #: False when the relay refuses every way of resuming a session.
    resumable: bool = True
    #: The option that takes a session id to resume, and the switch that resumes
    #: the latest session (None where the relay has none).
    resume_field: str | None = "session"
    latest_field: str | None = "resumeLast"
    #: Whether the CLI keeps the session id when a session is resumed: True,
    #: False (it reports a new id), or None (not known). For the skill texts.
    resume_keeps_id: bool | None = None
    #: How the brief reaches the implementer, for the skill texts, when the
    #: generic wording for `brief_via` would not be true.
    brief_route: str = ""

    flags: tuple[Flag, ...] = ()
    has_model_flag: bool = True
    default_timeout: str | None = None
    timeout_message: str | None = None
    #: --timeout's help when the watchdog's default is the adapter's own ("": the usual).
    timeout_help: str = ""

    #: "stdin" (piped), or anything else: the adapter puts it in argv itself.
    brief_via: str = "stdin"
    #: Name of the brief artifact.
    brief_name: str = "brief.txt"
    #: How stdout is read: "objects" (any JSON objects), "lines" (JSON per
    #: line), "text" (decoded text to `on_text`) or None.
    parser: str | None = "objects"
    #: Where stdout is copied, raw.
    events_name: str = "events.jsonl"
    #: Keep a full copy of stderr as stderr.txt.
    stderr_file: bool = False
    #: The implementer writes final.txt itself (the relay only reads it).
    child_writes_final: bool = False
    #: How the --help footer describes the watchdog default (else default_timeout or "off").
    watchdog_default: str = ""
    #: Result path fields, in order: "brief", "events", "final", "stderr", or a
    #: (field, file name) pair for an artifact of the adapter's own.
    path_fields: tuple = ("brief", "events", "final")
    #: (lane dial, extra explicit flags that keep the lane from setting it) pairs.
    lane_blockers: tuple[tuple[str, tuple[str, ...]], ...] = ()

    # -- identity -------------------------------------------------------------

    @property
    def label(self) -> str:
        """The name in the summary header and the watchdog/abort messages (default: the key)."""
        return self.key

    @property
    def version_field(self) -> str:
        """The result field holding the version the preflight read (default: `<key>Version`)."""
        return f"{self.key}Version"

    @property
    def impl(self) -> registry.Implementer:
        return registry.BY_KEY[self.key]

    #: An environment variable that may name the CLI's binary ("" for none): a
    #: bare name is looked up on PATH, a path is made absolute.
    bin_env: str = ""

    @property
    def binary(self) -> str:
        configured = os.environ.get(self.bin_env) or "" if self.bin_env else ""
        if not configured:
            return self.impl.binary
        if "/" in configured or "\\" in configured:
            return os.path.abspath(configured)
        return configured

    def check_bin_env(self) -> None:
        """On Windows `bin_env` must hold the absolute path of the CLI, and not the shell's."""
        if sys.platform != "win32" or not self.bin_env:
            return
        configured = os.environ.get(self.bin_env) or ""
        if not configured or not os.path.isabs(configured):
            raise Usage(
                f"on Windows {self.bin_env} must be the absolute path of the {self.display} "
                "executable"
            )
        shell = os.environ.get("ComSpec") or os.environ.get("COMSPEC")  # noqa: SIM112
        if shell and _same_file_name(self.binary, shell):
            raise Usage(
                f"{self.bin_env} points to the Windows command interpreter; set it to the "
                f"{self.display} executable"
            )

    @property
    def unavailable_status(self) -> str:
        return f"{self.key}_unavailable"

    # -- options --------------------------------------------------------------

    def defaults(self) -> dict:
        """Option defaults beyond the common ones: by default what the flags imply
        (see options.flag_defaults); an adapter adds the fields that start otherwise."""
        return flag_defaults(self.flags)

    def flag_table(self) -> tuple[Flag, ...]:
        model = (MODEL_FLAG,) if self.has_model_flag else ()
        tail = TAIL_FLAGS
        if self.timeout_help:
            tail = tuple(_with_help(f, self.timeout_help) if f.name == "--timeout" else f
                         for f in tail)  # fmt: skip
        return (*COMMON_FLAGS, *model, *self.flags, *tail)

    def apply_dial(self, opts: dict, field: str, value) -> None:
        """Set one lane dial that no explicit flag claimed."""
        opts[field] = value

    def refuse_dials(self, lane: str, dials: dict) -> None:
        """Raise Usage for a lane dial this relay cannot honour."""

    def validate(self, opts: dict) -> None:
        """Check the merged options. Raise Usage; the first problem wins."""
        check_model(opts, registry.model_token(self.key))
        self.watchdog_ms(opts)

    def watchdog_ms(self, opts: dict) -> int | None:
        if self.timeout_message:
            return timeout_ms(opts, self.timeout_message)
        return timeout_ms(opts)

    def check_brief(self, opts: dict, brief: str) -> None:
        """Checks that need the brief (size limits, resume-dependent rules)."""

    #: Artifacts an explicit --out-dir may already hold only when a relay's
    #: result.json there proves a relay run put them there (empty: no such rule).
    guarded_artifacts: tuple[str, ...] = ()

    def check_out_dir(self, path: str) -> None:
        """Refuse an explicit --out-dir before anything is written (raise Usage)."""
        if not self.guarded_artifacts:
            return
        try:
            entries = set(os.listdir(path))
        except OSError:
            entries = set()
        if RESULT not in entries and os.path.lexists(os.path.join(path, RESULT)):
            raise Usage("--out-dir contains a case-aliased result.json artifact")
        held = any(artifact_stands(path, name, entries) for name in self.guarded_artifacts)
        if held and not holds_relay_result(path):
            raise Usage(
                "--out-dir contains relay artifacts without a prior "
                f"{registry.RESULT_VERSION} result"
            )

    def read_only(self, opts: dict) -> bool:
        """Whether this run is meant to change nothing (arms the sandbox and the tripwire)."""
        return bool(opts.get("readOnly"))

    def sandbox_writable(self, opts: dict) -> list[str]:
        """Paths the CLI must write even in a read-only run, when they sit in the repository.

        The run directory and the temp dir are always writable; the CLI's state
        under $HOME is outside what the sandbox binds read-only.
        """
        return []

    def cli_state(self, opts: dict, env: dict[str, str]) -> list[str]:
        """Where the CLI keeps its own state: writable in a confined run."""
        from ..clistate import state_paths

        return state_paths(self.key, env)

    def cli_config(self, opts: dict, env: dict[str, str]) -> list[str]:
        """The CLI's own configuration in that state: read-only in a confined run."""
        from ..clistate import config_paths

        return config_paths(self.key, env)

    def required_tools(self, opts: dict) -> tuple[tuple[str, str], ...]:
        """Programs this run needs on PATH besides the CLI, each with its Debian package."""
        return ()

    #: Files the CLI keeps its own state in, under the repository's common git dir
    #: (opencode's project id): writable in the read-only sandbox, and not a change.
    git_dir_state: tuple[str, ...] = ()

    def own_sandbox(self, opts: dict) -> bool:
        """Whether this run of the CLI starts a bubblewrap sandbox of its own."""
        return False

    def sandbox_refusal(self, opts: dict, env: dict[str, str]) -> str | None:
        """Why this CLI cannot run inside our sandbox now (None: it can).

        A CLI that starts a bubblewrap sandbox of its own nests inside ours: as
        root ours runs it as a non-root uid in a user namespace, where the
        inner one can make its namespaces (isolation/sandbox.py).
        """
        return None

    # -- launching ------------------------------------------------------------

    def launcher(self, opts: dict, env: dict[str, str]) -> list[str] | None:
        """The argv prefix that starts the implementer; None when it cannot be found."""
        return [self.binary]

    def version_args(self, opts: dict) -> tuple[tuple[str, ...], ...]:
        """Argument lists to try, in order, for the version preflight."""
        impl = self.impl
        tries = [impl.version_args]
        if impl.version_fallback_args:
            tries.append(impl.version_fallback_args)
        return tuple(tries)

    def parse_version(self, stdout: str) -> str:
        return stdout.strip() or "unknown"

    def probe_name(self, opts: dict) -> str:
        return " ".join((self.binary, *self.impl.version_args))

    #: Variables the implementer gets unless its environment already sets them.
    env_defaults: dict[str, str] = {}  # noqa: RUF012 (read only)

    def child_env(self, opts: dict) -> dict[str, str]:
        return dict(os.environ)

    def launch_env(self, opts: dict) -> dict[str, str]:
        """The implementer's environment: `child_env`, then `env_defaults` where unset."""
        return {**self.env_defaults, **self.child_env(opts)}

    def extra_artifacts(self, opts: dict, run) -> dict[str, bytes]:
        """Files to create in the run directory before launch, name → bytes."""
        return {}

    def build_argv(self, opts: dict, run) -> list[str]:
        """The implementer's arguments; `run.brief` is the brief, `run.file(name)` a path."""
        raise NotImplementedError

    def before_launch(self, state: State) -> None:
        """Last look at the world before the implementer starts (after the preflight)."""

    # -- reading the run ------------------------------------------------------

    def session_requested(self, opts: dict) -> str | None:
        """The session this run asked to resume: its id, "last", or None for a fresh one."""
        if self.resume_field and opts.get(self.resume_field):
            return opts[self.resume_field]
        if self.latest_field and opts.get(self.latest_field):
            return "last"
        return None

    def resume_options(self, opts: dict, session: str | None) -> None:
        """Set the options that resume `session` (None: the latest). Raises Usage."""
        if session and self.resume_field:
            opts[self.resume_field] = session
        elif self.latest_field:
            opts[self.latest_field] = True
        else:
            from .options import Usage

            raise Usage(f"{self.display}'s relay cannot resume a session; --continue needs one")

    def new_state(self, opts: dict) -> State:
        state = State(opts)
        state.session_id = opts.get("session") or None
        return state

    def on_event(self, state: State, event: dict) -> None:
        """One JSON object from stdout."""

    def on_text(self, state: State, text: str) -> None:
        """A piece of decoded stdout, for `parser = "text"`."""

    def final_message(self, state: State, run) -> str:
        """The implementer's report, once the run is over (or being aborted)."""
        return state.final.strip()

    def failure(self, state: State) -> str | None:
        """What went wrong by the implementer's own account (also on a non-zero exit), or None.

        Any message makes an exit 0 a failure. `state.exit_code` and
        `state.signal` say how the implementer ended.
        """
        return None

    # -- the result -----------------------------------------------------------

    def config_fields(self, opts: dict, state: State) -> dict:
        """Result fields between `workdir` and the version field."""
        return {"model": opts.get("model")}

    def after_version_fields(self, state: State) -> dict:
        """Result fields between the version field and `startedAt`."""
        return {}

    def id_fields(self, state: State) -> dict:
        """Outcome fields right after `signal` (session ids)."""
        return {"sessionId": state.session_id} if self.session_id_after_signal else {}

    #: Whether the CLI's cache-read count is part of its input count (as Gemini counts)
    #: rather than apart from it (as Anthropic's API counts); see `usage_summary`.
    cache_inside_input: bool = False

    def reported_usage(self, state: State) -> dict | None:
        """The usage object the CLI reported, in its own shape (default: `state.usage`)."""
        return state.usage if isinstance(state.usage, dict) else None

    def reported_cost(self, state: State) -> float | None:
        """The cost in USD the CLI reported outside its usage object, or None."""
        return None

    def token_usage(self, state: State) -> dict | None:
        """The result's `tokenUsage`: what the CLI reported, in the shape every relay shares."""
        return usage_summary(
            self.reported_usage(state), self.reported_cost(state), self.cache_inside_input
        )

    def metric_fields(self, state: State) -> dict:
        """Outcome fields between `finalMessage` and `touchedFiles`: `tokenUsage`, when the
        CLI reported any. An adapter that adds its own puts them first
        (`{..., **super().metric_fields(state)}`)."""
        usage = self.token_usage(state)
        return {"tokenUsage": usage} if usage is not None else {}

    def trailing_fields(self, state: State) -> dict:
        """Outcome fields after `touchedFiles`."""
        return {}

    def summary_lines(self, opts: dict, state: State, result: dict) -> list[str]:
        """Relay-specific summary lines (modes, ids, costs)."""
        lines = resume_mode_lines(
            opts, "mode: resumed most recent session", "mode: resumed session {id}"
        )
        return lines + session_lines(state.session_id)
