"""`python3 runs.py <command>`: start attempts side by side, follow, land, review and prune runs.

The same answers as `delegate runs …`, always as JSON, for an agent that has
the skill folder and nothing installed.
"""

from __future__ import annotations

import sys

from .. import durations, jsjson
from ..runs import view as runs
from . import fail, print_help, run_script, wants_help

SCRIPT = "runs.py"
HELP = """runs.py — list relay runs, show one, or wait for one to finish

Usage:
  python3 runs.py list [--root <dir>]...
  python3 runs.py show <out-dir>
  python3 runs.py wait <out-dir> [--timeout <duration>]
  python3 runs.py cancel <out-dir>
  python3 runs.py logs <out-dir> [-f]
  python3 runs.py diff <out-dir> [--stat | --name-only]
  python3 runs.py undo <out-dir>
  python3 runs.py apply <out-dir> [--only <path>]... [--exclude <path>]...
  python3 runs.py discard <out-dir> [--force]
  python3 runs.py prune [--dry-run] [--older-than <age>] [--force] [--all]
  python3 runs.py review <out-dir> (--implementer <key> | --lane <name>) [--allow-self]
  python3 runs.py fanout --brief <file> (--implementer <key> | --lane <name>)... [--cd <dir>]
                  [--attempts <n>] [--jobs <n>] [--timeout <duration>] [--host <name>]...
                  [--setup <cmd>] [--check <cmd>] [--no-confine]
  python3 runs.py compare <out-dir>...
  python3 runs.py usage [--since <day>|<age>] [--by implementer|lane|repo|day]
  python3 runs.py --help

<out-dir> is the run's directory, or its run id (the start line and
result.json name it; a unique prefix will do), or --last for the run
started last on this machine.

list   every run the relays on this machine recorded, newest first; a run
       directory under the run root (or a --root) that none recorded is
       listed as foreign, and no command acts on it
show   one run: its state, and its result.json once it has one
wait   block until the run has a result; exit with the run's exit code
       (124 when --timeout passes first, 1 when the relay died without a
       result, 2 when the directory holds no run and no relay is starting one,
       130 when you interrupt it with Ctrl-C: the run itself goes on)
cancel end a running run as Ctrl-C would: its relay stops the implementer
       and everything it started and writes an aborted result
logs   the implementer's events as readable lines; -f follows until the run ends
       (Ctrl-C stops following, exit 130)
diff   what that run itself changed, as a patch git applies (new and binary
       files included), from its change record; --stat or --name-only for less
undo   take back exactly that run's change, while every path it touched still
       holds what it left (else exit 2 naming the paths changed since); for an
       applied --worktree run, the apply is taken back in the source
apply  land a finished --worktree run's recorded change (what diff shows)
       in the source work tree, uncommitted: a three-way apply; when the
       source has conflicting changes nothing is written and exit 2 names
       the files. --only <path> lands only those files or folders,
       --exclude <path> leaves them out (it wins over --only); paths as
       diff --name-only prints them, and one the run did not change is
       exit 2 with nothing landed. The JSON lists applied, leftOut, and
       overlap: the paths landed over uncommitted changes of yours (named
       on stderr first; merged, never overwritten). undo takes back
       exactly what landed
discard  remove a finished --worktree run's worktree and delegate/... branch
       (refused, exit 2, when the branch has commits the source lacks,
       unless --force)
prune  remove this repository's runs that hold no unlanded work, with their
       worktrees and branches (ended in-place runs; worktree runs applied,
       discarded or with no change; worktrees no run names that hold nothing);
       a worktree run with unlanded work is listed and kept unless --force;
       runs that ended less than 15m ago are kept unless applied or discarded
       (--older-than 7d|12h|0 sets that age); --all for every repository's
       runs; only files the relay wrote are removed; --dry-run removes nothing
review another implementer reviews that run read-only (its brief and patch)
       and answers with a verdict: approve, request-changes, or null; needs the
       reviewer's <key>-delegate skill folder beside this one. A run is not
       reviewed by its own implementer unless --allow-self
fanout one brief on several implementers (or lanes) at once, as delegate
       fanout does: each run in its own worktree and branch, confined where
       bubblewrap works (--no-confine: not); --attempts <n> runs each n
       times. Each implementer runs through the relay in its own
       <key>-delegate skill folder beside this one; a missing folder is
       named with how to install it, and nothing starts. Waits for every
       run, then prints the runs (each with its run id) and the next
       commands (compare, apply <id>, discard <id>) as JSON, --json or
       not. fanout exits 0 when every attempt completed, 1 when one did
       not, 2 on a usage error or a missing folder (nothing started),
       128+n after signal n
compare runs side by side, to pick one: what each changed, its check, its
       latest review's verdict, tokens, time
usage  the tokens and cost the implementers reported, summed per group
       (--by implementer, the default, lane, repo or day) over the runs
       this machine recorded, from the run store alone; --since YYYY-MM-DD
       (UTC) or an age (7d, 12h); a run that reported none is counted in
       runsWithoutUsage, never as zero

Everything but diff and logs is printed as JSON on stdout.
"""


def _emit(document: dict) -> None:
    sys.stdout.write(jsjson.stringify(document, 2) + "\n")


def _state(run: runs.Run) -> dict:
    return {**run.summary(), "result": run.result}


def _take_value(args: list[str], flag: str | None) -> tuple[list[str], list[str]]:
    """(values of every `flag <value>`, the other arguments); any other option is refused."""
    values, rest, i = [], [], 0
    while i < len(args):
        if flag is not None and args[i] == flag:
            if i + 1 >= len(args) or not args[i + 1]:
                raise fail(SCRIPT, f"{flag} requires a value")
            values.append(args[i + 1])
            i += 2
            continue
        if args[i].startswith("-") and args[i] != runs.LAST:
            raise fail(SCRIPT, f"unknown option: {args[i]}")
        rest.append(args[i])
        i += 1
    return values, rest


def _one_dir(command: str, operands: list[str]) -> str:
    if len(operands) != 1:
        raise fail(SCRIPT, f"{command} needs exactly one run directory")
    return operands[0]


def _wait(args: list[str]) -> int:
    timeouts, operands = _take_value(args, "--timeout")
    out_dir = _one_dir("wait", operands)
    seconds = None
    if timeouts:
        ms = durations.parse_timeout_ms(timeouts[-1])
        if ms is None:
            raise fail(SCRIPT, "--timeout must be an h/m/s duration such as 30m or 90s")
        seconds = ms / 1000
    from ..runs.waiting import wait

    run, timed_out = wait(out_dir, seconds)
    _emit(_state(run))
    if timed_out:
        return 124
    return runs.exit_code_of(run)


def _diff(args: list[str]) -> int:
    from ..runs import diff

    mode = "patch"
    for flag, name in (("--stat", "stat"), ("--name-only", "name-only")):
        if flag in args:
            args = [a for a in args if a != flag]
            mode = name
    _, operands = _take_value(args, None)
    data = diff.diff(_one_dir("diff", operands), mode)
    sys.stdout.buffer.write(data)
    sys.stdout.buffer.flush()
    return 0


def _land(command: str, args: list[str]) -> int:
    from ..runs import apply, discard

    force = command == "discard" and "--force" in args
    args = [a for a in args if not (force and a == "--force")]
    if command == "apply":
        only, args = _take_value_keep(args, "--only")
        exclude, args = _take_value_keep(args, "--exclude")
        for flag in ("--only", "--exclude"):
            if flag in args:
                raise fail(SCRIPT, f"{flag} requires a value")
        _, operands = _take_value(args, None)
        _emit(apply.apply(_one_dir(command, operands), tuple(only), tuple(exclude)))
        return 0
    _, operands = _take_value(args, None)
    _emit(discard.discard(_one_dir(command, operands), force))
    return 0


def _relay_beside(key: str, need: str, otherwise: str) -> list[str]:
    """How to run implementer `key`'s relay: the relay.py of its own <key>-delegate skill
    folder, beside this one (both where this script was started from, so copies and
    links installed side by side find each other). Raises ScriptExit naming the folder
    when it is not there: `<need> needs ...; <otherwise>`."""
    import os

    here = os.path.dirname(os.path.dirname(os.path.abspath(sys.argv[0])))
    folder = os.path.join(os.path.dirname(here), f"{key}-delegate")
    script = os.path.join(folder, "scripts", "relay.py")
    if not os.path.isfile(script):
        raise fail(SCRIPT, f"{need} needs the {key}-delegate skill folder beside this one "
                           f"({folder}); {otherwise}")  # fmt: skip
    return [sys.executable, script]


def _review(args: list[str]) -> int:
    """Review with the reviewer's own skill folder, installed beside this one."""
    import os

    from ..relay.rundir import default_root, ensure_private_root
    from ..runs import review

    allow_self = "--allow-self" in args
    args = [a for a in args if a != "--allow-self"]
    lanes, args = _take_value_keep(args, "--lane")
    keys, operands = _take_value(args, "--implementer")

    def sibling(key: str) -> list[str]:
        return _relay_beside(key, f"review by {key}", "install it, or use delegate review")

    root = default_root()
    ensure_private_root(root)
    out_dir = os.path.join(root, f"review-{os.urandom(4).hex()}")
    code, result = review.review(
        _one_dir("review", operands), out_dir, lane=lanes[-1] if lanes else None,
        implementer=keys[-1] if keys else None, allow_self=allow_self, relay_for=sibling,
    )  # fmt: skip
    _emit(result)
    return code


def _take_value_keep(args: list[str], flag: str) -> tuple[list[str], list[str]]:
    """(values of every `flag <value>`, every other argument as it was)."""
    values, rest, i = [], [], 0
    while i < len(args):
        if args[i] == flag and i + 1 < len(args):
            values.append(args[i + 1])
            i += 2
            continue
        rest.append(args[i])
        i += 1
    return values, rest


def _prune(args: list[str]) -> int:
    from ..runs import prune

    flags = {"--dry-run", "--force", "--all"}
    ages, rest = _take_value([a for a in args if a not in flags], "--older-than")
    if rest:
        raise fail(SCRIPT, f"unexpected argument: {rest[0]}")
    seconds = None
    if ages:
        seconds = prune.parse_age(ages[-1])
        if seconds is None:
            raise fail(SCRIPT, "--older-than must be days or an h/m/s duration: 7d, 12h, 90m, 0")
    _emit(prune.prune("--dry-run" in args, seconds, "--force" in args, everywhere="--all" in args))
    return 0


#: fanout's flags that take a value, as `delegate fanout` names them.
_FANOUT_VALUES = ("--brief", "--cd", "--implementer", "--lane", "--jobs", "--timeout",
                  "--attempts", "--host", "--setup", "--check")  # fmt: skip
_INSTALL = (
    "install it there (delegate skills install {skill}, or the Skills CLI: "
    "npx skills add <source> -s {skill}), or use delegate fanout"
)


def _fanout_args(args: list[str]) -> tuple[dict[str, list[str]], bool]:
    """({flag: its values}, confine) from fanout's arguments; anything else is refused."""
    values: dict[str, list[str]] = {flag: [] for flag in _FANOUT_VALUES}
    confine, i = True, 0
    while i < len(args):
        arg = args[i]
        if arg in values:
            if i + 1 >= len(args):
                raise fail(SCRIPT, f"{arg} requires a value")
            values[arg].append(args[i + 1])
            i += 2
        elif arg in ("--confine", "--no-confine"):
            confine = arg == "--confine"
            i += 1
        elif arg == "--json":  # what it prints anyway
            i += 1
        elif arg.startswith("-"):
            raise fail(SCRIPT, f"unknown option: {arg}")
        else:
            raise fail(SCRIPT, f"unexpected argument: {arg}")
    return values, confine


def _count(values: dict[str, list[str]], flag: str) -> int | None:
    if not values[flag]:
        return None
    text = values[flag][-1]
    if not text.isdigit() or int(text) < 1:
        raise fail(SCRIPT, f"{flag} must be 1 or more")
    return int(text)


def _fanout(args: list[str]) -> int:
    """One brief on several implementers, each through its own skill folder beside this one."""
    import os

    from .. import invocation
    from ..runs import attempts

    values, confine = _fanout_args(args)
    if not values["--brief"]:
        raise fail(SCRIPT, "fanout needs --brief <file>")
    brief = os.path.abspath(values["--brief"][-1])
    if not os.path.isfile(brief):
        raise fail(SCRIPT, f"--brief {brief}: no such file")
    workdir = os.path.abspath(values["--cd"][-1]) if values["--cd"] else os.getcwd()
    if not os.path.isdir(workdir):
        raise fail(SCRIPT, f"--cd {workdir}: no such directory")
    jobs, repeat = _count(values, "--jobs"), _count(values, "--attempts") or 1
    timeout = values["--timeout"][-1] if values["--timeout"] else None
    if timeout is not None and durations.parse_timeout_ms(timeout) is None:
        raise fail(SCRIPT, "--timeout must be an h/m/s duration such as 30m or 90s")
    hooks = []
    for flag in ("--setup", "--check"):
        if values[flag]:
            if not values[flag][-1].strip():
                raise fail(SCRIPT, f"{flag} needs a command")
            hooks += [flag, values[flag][-1]]
    hooks.append("--confine" if confine else "--no-confine")
    lanes, keys, hosts = values["--lane"], values["--implementer"], values["--host"]
    refused = attempts.too_many(len(lanes) + len(keys), len(hosts), repeat)
    if refused is not None:
        raise fail(SCRIPT, refused)
    planned = attempts.plan(workdir, lanes, keys, has_relay=lambda _key: True)
    relays = {}
    for target in planned:  # every folder is there before anything starts
        key = target.implementer
        if key not in relays:
            skill = f"{key}-delegate"
            relays[key] = _relay_beside(key, f"fanout on {key}", _INSTALL.format(skill=skill))
    targets = attempts.expand(planned, hosts, repeat, hooks)

    def progress(line: str) -> None:
        sys.stderr.write(f"{SCRIPT}: {line}\n")
        sys.stderr.flush()

    runner = attempts.Fanout(targets, brief, workdir, jobs or len(targets), timeout, progress,
                             relay_for=relays.__getitem__)  # fmt: skip
    rows = attempts.with_ids(runner.run())
    here = invocation.runs_command()
    ids = [row["id"] for row in rows if row["id"]]
    steps = {
        "compare": f"{here} compare {' '.join(ids)}" if ids else None,
        "apply": f"{here} apply <id>",
        "discard": f"{here} discard <id>",
    }
    _emit({"runs": rows, "next": steps})
    if steps["compare"] is not None:
        progress(f"{len(rows)} attempts done; compare them: {steps['compare']}")
    return attempts.exit_code(rows, runner.interrupted)


def _run(argv: list[str]) -> int:
    if wants_help(argv):
        return print_help(HELP, argv)
    command, args = argv[0], argv[1:]
    if command == "list":
        roots, operands = _take_value(args, "--root")
        if operands:
            raise fail(SCRIPT, f"unexpected argument: {operands[0]}")
        _emit({"runs": runs.list_runs([*runs.default_roots(), *roots])})
        return 0
    if command == "show":
        _, operands = _take_value(args, None)
        _emit(_state(runs.find(_one_dir("show", operands))))
        return 0
    if command == "wait":
        return _wait(args)
    if command == "diff":
        return _diff(args)
    if command == "undo":
        from ..runs import undo

        _, operands = _take_value(args, None)
        _emit(undo.undo(_one_dir("undo", operands)))
        return 0
    if command == "logs":
        from ..runs import logs as runlogs

        follow = "-f" in args or "--follow" in args
        _, operands = _take_value([a for a in args if a not in ("-f", "--follow")], None)
        out_dir = _one_dir("logs", operands)
        show = lambda line: (sys.stdout.write(line + "\n"), sys.stdout.flush())  # noqa: E731
        if follow:
            runlogs.follow(out_dir, show)
        else:
            for line in runlogs.iter_all(out_dir):
                show(line)
        return 0
    if command == "prune":
        return _prune(args)
    if command == "review":
        return _review(args)
    if command == "fanout":
        return _fanout(args)
    if command == "compare":
        from ..runs.attempts import compare

        _, operands = _take_value(args, None)
        if not operands:
            raise fail(SCRIPT, "compare needs one or more run directories or ids")
        _emit({"runs": compare(operands)})
        return 0
    if command == "usage":
        return _usage(args)
    if command == "cancel":
        _, operands = _take_value(args, None)
        from ..runs.waiting import cancel

        _emit(cancel(_one_dir("cancel", operands)))
        return 0
    if command in ("apply", "discard"):
        return _land(command, args)
    raise fail(SCRIPT, f"unknown command {jsjson.stringify(command)}. Use --help.")


def _usage(args: list[str]) -> int:
    from ..runs import usage
    from ..runs.view import utc_now

    since, rest = _take_value_keep(args, "--since")
    by, operands = _take_value(rest, "--by")
    if operands:
        raise fail(SCRIPT, f"unexpected argument: {operands[0]}")
    if len(since) > 1 or len(by) > 1:
        raise fail(SCRIPT, "give --since and --by once each")
    group = usage.check_by(by[0] if by else usage.DEFAULT_BY)
    moment = usage.parse_since(since[0], utc_now()) if since else None
    warn = lambda line: sys.stderr.write(f"{SCRIPT}: {line}\n")  # noqa: E731
    _emit(usage.usage(group, moment, warn))
    return 0


def main(argv: list[str]) -> int:
    return run_script(SCRIPT, _run, argv)
