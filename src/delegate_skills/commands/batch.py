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
optional. Every task is checked before any run starts.
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


def load(path: str, cd: str) -> list[Target]:
    """The batch's runs, every task checked. Raises UserError naming the file and task."""
    document = read_json_object(path, CONFIG_LIMIT)
    if document is None:
        raise UserError(f"{path}: not found, or not a JSON object")
    tasks = document.get("tasks")
    if not isinstance(tasks, list) or not tasks:
        raise UserError(f'{path}: needs "tasks", a non-empty list')
    base = os.path.dirname(os.path.abspath(path))
    return [_task(path, base, cd, number, task) for number, task in enumerate(tasks, 1)]


def _task(path: str, base: str, cd: str, number: int, task) -> Target:
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
    lane, implementer = task.get("lane"), task.get("implementer")
    if (lane is None) == (implementer is None) or not isinstance(lane or implementer, str):
        raise UserError(f'{where}: give "lane" or "implementer", one of them')
    try:
        (target,) = plan(cd, [lane] if lane else [], [implementer] if implementer else [])
    except UserError as problem:
        raise UserError(f"{where}: {problem}") from None
    args = task.get("args", [])
    if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
        raise UserError(f'{where}: "args" must be a list of relay flags')
    for arg in args:
        if arg.split("=", 1)[0] in _RESERVED:
            raise UserError(f"{where}: {arg} is set by the batch; leave it out of args")
    timeout = task.get("timeout")
    if timeout is not None:
        if not isinstance(timeout, str) or durations.parse_timeout_ms(timeout) is None:
            raise UserError(f'{where}: "timeout" must be an h/m/s duration such as 30m')
        args = [*args, "--timeout", timeout]
    host = task.get("host")
    if host is not None and (not isinstance(host, str) or not host or host.startswith("-")):
        raise UserError(f'{where}: "host" must be a host name your ssh reaches')
    name = os.path.splitext(os.path.basename(brief))[0]
    return Target(target.implementer, target.lane, os.path.abspath(brief_path), args, name, host)
