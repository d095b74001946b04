"""Configuring a run: flags, --continue, the worktree, the lane, every check, the brief.

Everything here happens before any artifact exists: a problem is a Usage
error (`relay: …`, exit 2), and a worktree made for the run is removed again.
"""

from __future__ import annotations

import os
import sys

from .. import registry
from ..errors import UserError
from ..jstext import js_trim
from ..reading import read_limited, read_stream_limited
from .options import Usage, check_directory, check_flag_tokens, parse, refuse_option_like

#: Option fields that decide what an implementer may write: on a read-only lane,
#: an explicit flag that changes one of them and makes the run a write run is refused.
PERMISSION_FIELDS = frozenset(
    {
        "readOnly", "sandbox", "sandboxConfigured", "dangerouslySkipPermissions", "planMode",
        "autoApprove", "agent", "auto", "toolsAll", "autonomy", "fullAccess", "planOnly",
        "enabledTools", "disabledTools", "approve", "allowAllTools", "force", "permissionMode",
        "mode", "disallowedTools", "permissions", "architect", "skipTrust",
    }
)  # fmt: skip
#: The largest brief a relay reads; relays whose CLI takes less say so themselves.
BRIEF_LIMIT = 64 * 1024 * 1024
#: Flags a --continue run may not be given: it goes on where that run ran.
_PLACED_BY_CONTINUE = (
    "--cd", "--worktree", "--session", "--resume-last", "--conversation", "--resume",
    "--continue-last",
)  # fmt: skip


def configure(relay, argv: list[str]) -> str:
    """Fill `relay.opts` from `argv` (and the lane); the brief. Raises Usage."""
    adapter = relay.adapter
    opts = {
        "lane": None,
        "laneSource": None,
        "brief": None,
        "cd": os.getcwd(),
        "outDir": None,
        "timeout": adapter.default_timeout,
        "worktree": False,
        "host": None,
        "includeUncommitted": False,
        "continueRun": None,
        "dryRun": False,
        "skipPreflight": False,
        "confine": None,
        "setup": None,
        "check": None,
    }
    if adapter.has_model_flag:
        opts["model"] = None
    opts.update(adapter.defaults())
    relay.defaults = {k: list(v) if isinstance(v, list) else v for k, v in opts.items()}
    table = {flag.name: flag for flag in adapter.flag_table()}
    given: list[tuple[str, str]] = []
    relay.typed = []
    flagged = parse(argv, table, opts, given, relay.typed)
    if opts["continueRun"]:
        continue_from(relay, opts)
    # Lanes come from where the user dispatches: with --worktree, the source,
    # whose config and approval count whether or not the config is committed;
    # a run in one of our worktrees (--continue, a review) takes its source's.
    relay.lane_cwd = lane_home(opts["cd"])
    if opts["outDir"] and not opts["dryRun"] and os.path.isdir(opts["outDir"]):
        from ..runstore.lookup import held_reason

        held = held_reason(opts["outDir"])
        if held is not None:
            raise Usage(held)
    if opts["worktree"] and not opts["dryRun"] and not opts["host"]:
        enter_worktree(relay, opts)
    try:
        brief = check(relay, opts, table, flagged, given)
    except Usage:
        drop_worktree(relay)
        raise
    relay.opts = opts
    return brief


def check(relay, opts: dict, table: dict, flagged: set[str], given: list) -> str:
    """Apply the lane, check every option, read the brief. Raises Usage."""
    adapter = relay.adapter
    if opts["lane"]:
        apply_lane(relay, opts, flagged)
    adapter.validate(opts)
    if opts["lane"]:
        hold_read_only_lane(relay, opts, table)
    if relay.continues_read_only:
        keep_read_only(relay, opts, table)
    from .confine import wanted

    try:
        relay.confined = wanted(relay, opts)
    except UserError as problem:
        raise Usage(str(problem)) from None
    if opts["setup"] is not None and not opts["worktree"] and not opts["host"]:
        raise Usage("--setup runs in the run's new worktree; add --worktree")
    if opts["includeUncommitted"] and not opts["host"]:
        raise Usage("--include-uncommitted goes with --host (a local --worktree run "
                    "starts from HEAD)")  # fmt: skip
    if opts["host"] and opts["continueRun"]:
        raise Usage("--continue resumes where that run ran; leave out --host")
    if opts["check"] is not None and adapter.read_only(opts):
        raise Usage("--check runs a command that may write; a read-only run takes none")
    for flag in ("setup", "check"):
        if opts[flag] is not None and not opts[flag].strip():
            raise Usage(f"--{flag} needs a command")
    check_flag_tokens(table, opts)
    check_directory(opts["cd"])
    if opts["outDir"] and os.path.exists(opts["outDir"]) and not os.path.isdir(opts["outDir"]):
        raise Usage(f"--out-dir is not a directory: {opts['outDir']}")
    if opts["outDir"]:
        adapter.check_out_dir(opts["outDir"])
        if not opts["dryRun"] and not opts["host"]:
            check_out_dir_place(relay, opts)
    brief = read_brief(opts.get("brief"))
    adapter.check_brief(opts, brief)
    refuse_option_like(given)
    return brief


def _overlap(one: str, other: str | None) -> bool:
    """Whether two folders are the same, or one lies inside the other."""
    if not other:
        return False
    one, other = os.path.realpath(one), os.path.realpath(other)
    return one == other or one.startswith(other + os.sep) or other.startswith(one + os.sep)


def check_out_dir_place(relay, opts: dict) -> None:
    """Refuse an --out-dir the run's sandbox would have to make writable where it must not be.

    The run directory is always writable to the implementer: never in a git
    dir (hooks, config, the approval store; those stay read-only inside a
    writable run directory around them), and for a read-only run never in or
    around its work tree. Raises Usage.
    """
    from ..gitmeta import repo_paths

    out = opts["outDir"]
    paths = repo_paths(opts["cd"])
    relay.paths = paths
    real = os.path.realpath(out)
    for git_dir in dict.fromkeys((paths.git_dir, paths.common_dir)):
        inside = git_dir and (real + os.sep).startswith(os.path.realpath(git_dir) + os.sep)
        if inside:
            raise Usage(
                f"--out-dir {out} is in the git dir {git_dir}: the implementer may write its "
                "run directory; choose a folder outside the repository's git dir"
            )
    if relay.adapter.read_only(opts) and _overlap(out, paths.toplevel or opts["cd"]):
        raise Usage(
            f"--out-dir {out} is in or around the work tree of a read-only run "
            f"({paths.toplevel or opts['cd']}); choose a folder outside it"
        )


def continue_from(relay, opts: dict) -> None:
    """Resume the session of an earlier run, where its record says it ran. Raises Usage.

    Everything comes from the run store: the implementer, the session id, the
    folder, the lane, and the read-only policy, which the continuation keeps.
    """
    from ..runstore import liveness, lookup

    adapter = relay.adapter
    ref = opts["continueRun"]
    for flag in _PLACED_BY_CONTINUE:
        if flag in relay.typed:
            raise Usage(f"--continue {ref} resumes where that run ran; leave out {flag}")
    try:
        record = lookup.resolve(ref)
    except UserError as problem:
        raise Usage(f"--continue {ref}: {problem}") from None
    status = liveness.status(record)
    if status in liveness.IN_FLIGHT:
        raise Usage(f"--continue {ref}: that run is still {status}; wait for it first")
    implementer = record.text("implementer")
    if implementer != adapter.key:
        skill = registry.BY_KEY[implementer].skill if implementer in registry.BY_KEY else "?"
        raise Usage(
            f"--continue {ref}: that run was {implementer} (use {skill}); "
            f"this relay is {adapter.key}"
        )
    session = (record.section("session") or {}).get("id")
    session = session if isinstance(session, str) and session else None
    if not adapter.resumable or (not session and not adapter.latest_field):
        raise Usage(f"--continue {ref}: that run left no session id to resume")
    adapter.resume_options(opts, session)
    workdir = record.text("workdir")
    if workdir is None or not os.path.isdir(workdir):
        raise Usage(f"--continue {ref}: the folder that run worked in is gone ({workdir})")
    opts["cd"] = workdir
    if not opts["lane"] and record.text("lane"):
        opts["lane"] = record.text("lane")
    relay.previous_run = record.id
    relay.continues_read_only = record.get("readOnly") is True
    tree = lookup.worktree(record)
    if tree is not None and not tree.get("removed") and os.path.isdir(tree["path"]):
        from .worktree import Worktree

        relay.worktree = Worktree(
            tree["path"], tree["branch"], tree["base"], tree["source"], workdir,
            tree.get("sourceUncommitted") or 0,
        )  # fmt: skip
        relay.worktree.git_dir, relay.worktree.gitfile = tree.get("gitDir"), tree.get("gitfile")
        relay.worktree.common_dir = tree.get("commonDir")
        included = tree.get("worktreeIncluded")
        if isinstance(included, list):
            relay.worktree.included = [path for path in included if isinstance(path, str)]
        relay.worktree_owned = False


def keep_read_only(relay, opts: dict, table: dict) -> None:
    """A read-only run's continuation is read-only too, whatever its lane now says. Raises Usage."""
    adapter = relay.adapter
    if adapter.read_only(opts):
        return
    for flag in table.values():
        if flag.dest is not None or not flag.sets:
            continue
        trial = {**opts, **flag.sets}
        if not adapter.read_only(trial):
            continue
        try:
            adapter.validate(trial)
        except Usage:
            continue
        opts.update(flag.sets)
        return
    offenders = " ".join(dict.fromkeys(relay.typed)) or "its lane"
    raise Usage(
        f"--continue {opts['continueRun']}: that run was read-only, and so is its "
        f"continuation; {offenders} would let {adapter.display} write"
    )


def enter_worktree(relay, opts: dict) -> None:
    """Move the run into a new worktree of --cd's repository. Raises Usage.

    Lanes are resolved in the source (see configure); the worktree's own
    project config carries the source's approval when its bytes are the
    approved ones, for what runs inside it.
    """
    from .worktree import WorktreeError, create

    if relay.prepared_worktree is not None:  # made for a run from another machine
        relay.worktree = relay.prepared_worktree
        opts["cd"] = relay.worktree.cd
        return
    check_directory(opts["cd"])
    try:
        relay.worktree = create(opts["cd"])
    except WorktreeError as problem:
        raise Usage(str(problem)) from None
    opts["cd"] = relay.worktree.cd


def drop_worktree(relay) -> None:
    """Remove a worktree this relay made for a run that did not start."""
    if relay.worktree is not None and relay.worktree_owned:
        from .worktree import remove

        tree = relay.worktree
        remove(tree.source, tree.common_dir or tree.source, tree.path, tree.branch)
        relay.worktree = None


def hold_read_only_lane(relay, opts: dict, table: dict) -> None:
    """A read-only lane is a policy: no flag may turn its runs into write runs. Raises Usage.

    (The Node relays let an explicit flag win over every lane dial.)
    """
    from .. import lanes

    adapter = relay.adapter
    lane_only = {k: list(v) if isinstance(v, list) else v for k, v in relay.defaults.items()}
    lane_only.update(lane=opts["lane"], cd=opts["cd"])
    lanes.merge_dials(
        lane_only,
        relay.lane_dials,
        set(),
        extra_blockers=dict(adapter.lane_blockers),
        apply=adapter.apply_dial,
    )
    try:
        adapter.validate(lane_only)
    except Usage:
        return
    if not adapter.read_only(lane_only) or adapter.read_only(opts):
        return
    offenders = []
    for name in dict.fromkeys(relay.typed):
        flag = table[name]
        fields = {*([flag.dest] if flag.dest else []), *flag.sets} & PERMISSION_FIELDS
        if any(opts.get(field) != lane_only.get(field) for field in fields):
            offenders.append(name)
    named = " ".join(offenders) or "the flags given"
    raise Usage(
        f"lane {opts['lane']} is read-only, and {named} would let {adapter.display} "
        "write; a read-only lane is a policy: drop the flag, or dispatch through a lane "
        "that may write"
    )


def apply_lane(relay, opts: dict, flagged: set[str]) -> None:
    from .. import lanes

    try:
        resolved = relay.lane_override or lanes.resolve(
            relay.lane_cwd, opts["lane"], relay.adapter.key
        )
    except UserError as problem:
        raise Usage(str(problem)) from None
    opts["laneSource"] = resolved["source"]
    relay.lane_dials = resolved["dials"]
    relay.adapter.refuse_dials(opts["lane"], resolved["dials"])
    lanes.merge_dials(
        opts,
        resolved["dials"],
        flagged,
        extra_blockers=dict(relay.adapter.lane_blockers),
        apply=relay.adapter.apply_dial,
    )


def lane_home(cd: str) -> str:
    """Where a run's lanes are read: `cd`, or for a folder in one of our worktrees its source."""
    from ..runstore.paths import worktrees_root

    root = os.path.realpath(worktrees_root())
    real = os.path.realpath(cd)
    if not real.startswith(root + os.sep):
        return cd
    from ..gitmeta import git_outcome

    common = git_outcome(cd, "rev-parse", "--path-format=absolute", "--git-common-dir")
    source = os.path.dirname(os.fsdecode(common.out.strip())) if common.ok else ""
    return source if os.path.isdir(source) else cd


def read_brief(path: str | None) -> str:
    """The brief from `path`, else from a piped stdin. Raises Usage."""
    if path:
        if not os.path.exists(path):
            raise Usage(f"brief file not found: {path}")
        try:
            raw = read_limited(path, BRIEF_LIMIT, label=f"brief file {path}", what="brief")
        except UserError as problem:
            raise Usage(str(problem)) from None
        if raw is None:
            raise Usage(f"brief file not found: {path}")
    else:
        try:
            interactive = os.isatty(0)
        except OSError:
            interactive = False
        if interactive:
            raise Usage(
                "no --brief given and stdin is a TTY; "
                "pass --brief <file> or pipe the brief on stdin"
            )
        try:
            stdin = sys.stdin.buffer if sys.stdin is not None else None
            raw = read_stream_limited(stdin, BRIEF_LIMIT, "the brief on stdin") if stdin else b""
        except (OSError, ValueError):
            raw = b""
        except UserError as problem:
            raise Usage(str(problem)) from None
    brief = raw.decode("utf-8", errors="replace")
    if not js_trim(brief):
        raise Usage("empty brief (pass --brief <file> or pipe the brief on stdin)")
    return brief
