"""What is on disk against what the lockfile says, and what to do about each folder.

A folder on disk is ours when it matches what we installed: a copy whose
revision is the one recorded (or the one bundled now), or a link to the
bundled folder. Anything else in its place is the user's: a copy they
changed, or a folder we never installed. Those are left alone unless the
command has --force.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass, field

from ..errors import UserError
from . import agents as table
from . import bundle
from . import state as machine
from .scopes import Scope

REFUSED = "refused"


class Bundle:
    def __init__(self) -> None:
        self.dir = bundle.bundle_dir()
        self.names = bundle.skill_names(self.dir)
        self.known = set(self.names)
        self._revisions: dict[str, str] = {}

    def source(self, skill: str) -> str:
        return os.path.join(self.dir, skill)

    def revision(self, skill: str) -> str | None:
        if skill not in self.known:
            return None
        if skill not in self._revisions:
            self._revisions[skill] = bundle.revision(self.source(skill))
        return self._revisions[skill]

    def check(self, skills) -> list[str]:
        unique = sorted(set(skills))
        for skill in unique:
            if skill not in self.known:
                raise UserError(f"unknown skill {skill!r} (bundled: {', '.join(self.names)})")
        return unique


@dataclass
class Placement:
    """One skill folder in one agent directory: who reads it, who wants it, what is there."""

    skill: str
    directory: str
    agents: list[str]  # the target agents reading this directory
    enabled: list[str]  # those not switched off on this machine
    status: str  # missing | current | stale | mode | modified | foreign
    readers: list[str] = field(default_factory=list)  # every agent considered here

    @property
    def path(self) -> str:
        return os.path.join(self.directory, self.skill)

    @property
    def wanted(self) -> bool:
        return bool(self.enabled)

    @property
    def disk(self) -> str:
        return "absent" if self.status == "missing" and not self.wanted else self.status


def inspect(
    path: str, source: str, link: bool, recorded: str | None, bundled: str | None, covered: bool
) -> str:
    """What is at `path`, judged against what the lockfile says we put there."""
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return "missing"
    except OSError:
        return "modified" if covered else "foreign"
    if stat.S_ISLNK(info.st_mode):
        if os.path.realpath(path) == os.path.realpath(source) and os.path.isdir(source):
            return "current" if link else "mode"
        return "modified" if covered else "foreign"
    if not stat.S_ISDIR(info.st_mode):
        return "modified" if covered else "foreign"
    found = bundle.revision_or_none(path)
    if found is not None and found == bundled:
        return "mode" if link else "current"
    if found is not None and covered and found == recorded:
        return "mode" if link and bundled else "stale"
    return "modified" if covered else "foreign"


def plan(
    scope: Scope,
    source: Bundle,
    state: machine.State,
    skill: str,
    *,
    keep: list[str],
    touch: list[str],
    link: bool,
    recorded: str | None,
    covered: set[str],
) -> list[Placement]:
    """The placements of `skill` in every directory read by `keep` or `touch` agents.

    `keep` are the agents the skill stays installed for; `touch` adds agents
    whose directories are looked at too (those being uninstalled).
    """
    out = []
    groups = table.group_by_dir([*keep, *touch], scope.root)
    for directory, readers in groups.items():
        kept = [a for a in readers if a in keep]
        enabled = [a for a in kept if state.is_enabled(skill, a)]
        status = inspect(
            os.path.join(directory, skill),
            source.source(skill),
            link,
            recorded,
            source.revision(skill),
            directory in covered,
        )
        out.append(Placement(skill, directory, kept, enabled, status, readers))
    return out


_WANTED_ACTIONS = {"missing": "installed", "stale": "updated", "mode": "switched"}


def decide(placement: Placement, force: bool) -> str | None:
    """What to do with one placement: an action name, REFUSED, or None (nothing)."""
    status = placement.status
    if placement.wanted:
        if status == "current":
            return None
        if status in _WANTED_ACTIONS:
            return _WANTED_ACTIONS[status]
        return "replaced" if force else REFUSED
    if status in ("missing", "foreign"):
        return None
    if status == "modified":
        return "removed" if force else REFUSED
    return "removed"
