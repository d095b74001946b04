"""The read-only views of installed skills: `delegate skills list` and `doctor`.

Each compares intent (the lockfile and this machine's state) with what is on
disk; neither changes anything.
"""

from __future__ import annotations

from . import agents as table
from . import lockfile
from . import state as machine
from .planning import Bundle, Placement, plan
from .report import sync_fix
from .scopes import Scope, scopes_in_use


def _unknown_problem(scope: Scope, item: dict) -> dict:
    return {
        **scope.head(),
        "skill": item["skill"],
        "dir": None,
        "problem": f"unknown entry: {item['problem']}",
        "fix": "kept as is; a delegate-skills that knows it can act on it "
        "(pipx install --force <newer checkout>), or remove it from the lockfile",
    }


def _placement_problem(scope: Scope, placement: Placement) -> tuple[str, str] | None:
    status = placement.status
    sync = scope.command("sync", placement.skill)
    force = sync_fix(scope, placement.skill)
    if placement.wanted:
        return {
            "current": None,
            "missing": ("missing copy", sync),
            "stale": ("copy of an older revision", sync),
            "mode": ("copied where a link is recorded, or linked where a copy is", sync),
            "modified": ("modified copy", f"keep it, or {force} to restore it"),
            "foreign": ("a folder delegate-skills did not install", f"{force} to replace it"),
        }[status]
    off = ", ".join(a for a in placement.agents if a not in placement.enabled)
    if status in ("missing", "foreign"):
        return None
    if status == "modified":
        return (f"modified copy present for disabled agent(s) {off}", f"{force} to remove it")
    return (f"copy present for disabled agent(s) {off}", sync)


def _entry_placements(scope: Scope, source: Bundle, state: machine.State, skill: str, entry):
    targets = list(entry["targets"])
    return plan(
        scope,
        source,
        state,
        skill,
        keep=targets,
        touch=[],
        link=entry.get("mode") == lockfile.LINK,
        recorded=entry["revision"],
        covered=set(table.group_by_dir(targets, scope.root)),
    )


def doctor(cwd: str, scope_name: str | None) -> dict:
    """Every difference between intent and disk, each with its fix. Changes nothing."""
    source = Bundle()
    state = machine.load()
    problems = []
    scopes = scopes_in_use(cwd, scope_name)
    for scope in scopes:
        lock = lockfile.read(scope.lockfile, scope.root)
        for item in lockfile.warn_unknown(lock, source.known):
            if item["skill"] is not None and not item["problem"].startswith("unknown field"):
                problems.append(_unknown_problem(scope, item))
        for skill in sorted(lock.skills):
            if not lockfile.actionable(lock, skill, source.known):
                continue
            entry = lock.skills[skill]
            if entry["revision"] != source.revision(skill):
                problems.append(
                    {
                        **scope.head(),
                        "skill": skill,
                        "dir": None,
                        "problem": f"stale revision {entry['revision']} "
                        f"(bundled: {source.revision(skill)})",
                        "fix": scope.command("sync", skill),
                    }
                )
            for placement in _entry_placements(scope, source, state, skill, entry):
                found = _placement_problem(scope, placement)
                if found:
                    problems.append(
                        {
                            **scope.head(),
                            "skill": skill,
                            "dir": scope.show(placement.directory),
                            "problem": found[0],
                            "fix": found[1],
                        }
                    )
    return {
        "ok": not problems,
        "scopes": [s.head() for s in scopes],
        "problems": problems,
    }


def listing(cwd: str, scope_name: str | None) -> dict:
    """Intent (lockfile and state) and what is on disk, side by side. Changes nothing."""
    source = Bundle()
    state = machine.load()
    scopes = []
    for scope in scopes_in_use(cwd, scope_name):
        lock = lockfile.read(scope.lockfile, scope.root)
        lockfile.warn_unknown(lock, source.known)
        skills = []
        for skill in sorted(lock.skills):
            entry = lock.skills[skill]
            if not lockfile.actionable(lock, skill, source.known):
                skills.append({"name": skill, "known": False, "entry": entry})
                continue
            rows = []
            for placement in _entry_placements(scope, source, state, skill, entry):
                for agent in placement.agents:
                    rows.append(
                        {
                            "agent": agent,
                            "dir": scope.show(placement.directory),
                            "enabled": agent in placement.enabled,
                            "disk": placement.disk,
                        }
                    )
            for agent in sorted(set(entry["targets"])):
                if not table.is_known(agent):
                    rows.append({"agent": agent, "dir": None, "enabled": None, "disk": None})
            skills.append(
                {
                    "name": skill,
                    "known": True,
                    "revision": entry["revision"],
                    "bundled": source.revision(skill),
                    "mode": "link" if entry.get("mode") == lockfile.LINK else "copy",
                    "targets": rows,
                }
            )
        scopes.append({**scope.head(), "exists": lock.exists, "skills": skills})
    return {
        "bundle": str(source.dir),
        "bundled": source.names,
        "state": state.path,
        "disabled": state.disabled(),
        "scopes": scopes,
    }
