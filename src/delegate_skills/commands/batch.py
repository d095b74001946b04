"""`delegate batch FILE`: many tasks, each its own brief, run like fanout in parallel worktrees.

The file is JSON:

    {"tasks": [
      {"brief": "tasks/login.md", "lane": "feature"},
      {"brief": "tasks/docs.md", "implementer": "claude", "timeout": "30m",
       "args": ["--model", "sonnet"]},
      {"brief": "tasks/perf.md", "lane": "feature", "host": "devbox"}
    ]}

Each task names its brief (a path, relative to the batch file) and either a
lane or an implementer; `timeout`, `args` (further relay flags) and `host`
(another machine, reached with the user's ssh: see --host on the relays) are
optional.

A batch file is code: a task's `--setup` and `--check` in `args` run as shell
commands with the user's rights, as the batch's own --setup and --check do.
Run only a batch file you would run as a script.

Every task is checked in full before any run starts: its fields, its host
name, and its relay command line as the run would get it (the batch's
--setup/--check included) through the relay's own checks, configured here
without a launch and without a worktree, as `--dry-run` configures a run. So
an unknown flag, a lane that does not resolve, a bad timeout, a flag the
batch sets itself or one a new run cannot take (--continue, --dry-run) stops
the batch with one line naming the task, exit 2, before anything is made.
"""

from __future__ import annotations

import os

from .. import durations
from ..errors import UserError
from ..reading import CONFIG_LIMIT, read_json_object
from .fanout import Target, plan

_KEYS = {"brief", "lane", "implementer", "timeout", "args", "host"}
#: Relay flags a batch sets itself.
_RESERVED = ("--brief", "--cd", "--out-dir", "--worktree", "--lane", "--host")
#: Relay flags a batch task cannot take, each with why.
_REFUSED = {
    "--continue": "resumes an earlier run where it ran, and a batch task is a new run in "
    "its own worktree",
    "--dry-run": "launches nothing, and a batch starts its runs (see one task's command "
    "line with `delegate relay KEY --dry-run`)",
    "-h": "prints the relay's help",
    "--help": "prints the relay's help",
}


def load(path: str, cd: str, hooks: list[str] | None = None) -> list[Target]:
    """The batch's runs, every task checked in full, nothing made. Raises UserError naming
    the file and task.

    `hooks` are the batch's own relay flags (--setup, --check) every task gets
    before its `args`.
    """
    document = read_json_object(path, CONFIG_LIMIT)
    if document is None:
        raise UserError(f"{path}: not found, or not a JSON object")
    tasks = document.get("tasks")
    if not isinstance(tasks, list) or not tasks:
        raise UserError(f'{path}: needs "tasks", a non-empty list')
    base = os.path.dirname(os.path.abspath(path))
    return [
        _task(path, base, cd, number, task, hooks or []) for number, task in enumerate(tasks, 1)
    ]


def _task(path: str, base: str, cd: str, number: int, task, hooks: list[str]) -> Target:
    where = f"{path}: task {number}"
    if not isinstance(task, dict):
        raise UserError(f"{where} is not an object")
    unknown = sorted(set(task) - _KEYS)
    if unknown:
        raise UserError(f"{where}: unknown field {unknown[0]} (one of: {', '.join(sorted(_KEYS))})")
    brief = task.get("brief")
    if not isinstance(brief, str) or not brief:
        raise UserError(f'{where}: "brief" must name the brief\'s file')
    brief_path = os.path.join(base, brief)
    if not os.path.isfile(brief_path):
        raise UserError(f"{where}: brief file not found: {brief_path}")

    def bad(problem: str) -> UserError:
        """The task's problem, on one line that names the task and its brief."""
        return UserError(f"{where}: {' '.join(problem.split())} (brief {brief})")

    lane, implementer = task.get("lane"), task.get("implementer")
    if (lane is None) == (implementer is None) or not isinstance(lane or implementer, str):
        raise bad('give "lane" or "implementer", one of them')
    try:
        (target,) = plan(cd, [lane] if lane else [], [implementer] if implementer else [])
    except UserError as problem:
        raise bad(str(problem)) from None
    args = task.get("args", [])
    if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
        raise bad('"args" must be a list of relay flags')
    for arg in args:
        flag = arg.split("=", 1)[0]
        if flag in _RESERVED:
            raise bad(f"{arg} is set by the batch; leave it out of args")
        if flag in _REFUSED:
            raise bad(f"{flag} {_REFUSED[flag]}; leave it out of args")
    timeout = task.get("timeout")
    if timeout is not None:
        if not isinstance(timeout, str) or durations.parse_timeout_ms(timeout) is None:
            raise bad('"timeout" must be an h/m/s duration such as 30m')
        args = [*args, "--timeout", timeout]
    host = task.get("host")
    if host is not None:
        if not isinstance(host, str):
            raise bad('"host" must be a host name your ssh reaches')
        from ..remote import hosts

        try:
            hosts.load(host)
        except UserError as problem:
            raise bad(str(problem)) from None
    name = os.path.splitext(os.path.basename(brief))[0]
    run = Target(target.implementer, target.lane, os.path.abspath(brief_path), args, name, host)
    problem = relay_problem(run, cd, hooks)
    if problem is not None:
        raise bad(problem)
    return run


def relay_problem(target: Target, cd: str, hooks: list[str]) -> str | None:
    """What the relay would refuse in `target`'s run as a usage error, or None.

    The relay configures the run here, in this process, on the command line the
    run gets (fanout adds only a fresh --out-dir), with --dry-run first: a
    dry run's configuration makes no worktree and no run directory and
    launches nothing, and no later token can turn it off.
    """
    from ..relay.engine import Relay
    from ..relay.main import load_adapter
    from ..relay.options import HelpRequested, Usage

    adapter = load_adapter(target.implementer)
    if adapter is None:
        return f"no relay for implementer {target.implementer!r}"
    argv = ["--dry-run", "--brief", target.brief, "--cd", cd, "--worktree"]
    if target.lane:
        argv += ["--lane", target.lane]
    if target.host:
        argv += ["--host", target.host]
    argv += [*hooks, *target.args]
    try:
        Relay(adapter).configure(argv)
    except Usage as problem:
        return str(problem)
    except HelpRequested:
        return "-h/--help prints the relay's help; leave it out of args"
    return None
