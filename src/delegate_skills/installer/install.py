"""Bring the agents' skill directories in line with intent: the commands that change it.

Intent lives in two files: the lockfile (which skills are installed for which
agents, at which revision, copied or linked) and this machine's state (which
agents have a skill switched off). A directory read by several agents holds
the skill while any of its target agents is on.

Here are install, uninstall, sync, enable/disable and prune. Where skills go
is in scopes.py; what is on disk and what to do about each folder (ours or the
user's) in planning.py; how a folder is written in writing.py; what a command
did in report.py; the read-only views (list, doctor) in views.py. Every
lockfile change holds that lockfile's write queue for the whole command, so
two installs never interleave.
"""

from __future__ import annotations

import contextlib
import os

from ..errors import UserError
from . import agents as table
from . import lockfile
from . import state as machine
from .planning import REFUSED, Bundle, decide, plan
from .report import Report, refusal, sync_fix
from .scopes import Scope, find_project_root, global_scope, scope_for, scopes_in_use
from .writing import apply, tidy


def install(
    cwd: str, skills: list[str], agents: list[str], scope_name: str, link: bool, force: bool
) -> Report:
    """Copy (or link) bundled skills into the agents' directories and record them."""
    source = Bundle()
    names = source.check(skills) if skills else source.names
    scope = scope_for(scope_name, cwd)
    chosen = table.check_names(agents or [table.DEFAULT_AGENT], global_scope=scope.root is None)
    state = machine.load_for_write()
    report = Report(scope)
    with lockfile.locked(scope.lockfile, scope.root) as lock:
        lockfile.warn_unknown(lock, source.known)
        chosen_dirs = set(table.group_by_dir(chosen, scope.root))
        for skill in names:
            entry = lock.skills.get(skill)
            if entry is not None and not lockfile.well_formed(entry):
                report.refuse(
                    skill,
                    None,
                    "its lockfile entry is in a form this version does not know",
                    "upgrade delegate-skills, or fix the entry by hand",
                )
                continue
            before = list(entry["targets"]) if entry else []
            recorded = entry["revision"] if entry else None
            targets = set(before) | set(chosen)
            covered = set(table.group_by_dir(before, scope.root))
            placements = plan(
                scope,
                source,
                state,
                skill,
                keep=sorted(targets),
                touch=[],
                link=link,
                recorded=recorded,
                covered=covered,
            )
            tidy(placements)
            for placement in placements:
                asked = placement.directory in chosen_dirs
                action = decide(placement, force and asked)
                if action == REFUSED and not asked:
                    continue  # a changed copy for another agent: doctor reports it
                if action == REFUSED:
                    asked_here = [a for a in placement.readers if a in chosen]
                    flags = [*scope.agent_flags(asked_here), *(["--link"] if link else [])]
                    fix = scope.command("install", skill, *flags, "--force")
                    report.refuse(skill, placement, *refusal(placement, fix))
                    if placement.status == "foreign":
                        targets -= set(placement.agents) - set(before)
                elif action:
                    apply(action, placement, source, link, scope.root)
                    report.change(placement, action, link)
            if targets:
                revision = source.revision(skill) or ""
                report.revision(skill, recorded, revision)
                lock.skills[skill] = lockfile.make_entry(revision, targets, link, entry)
        report.lockfile_written = lockfile.save(lock)
    return report


def uninstall(
    cwd: str, skills: list[str], agents: list[str], scope_name: str, force: bool
) -> Report:
    """Remove installed skills (for some agents, or all) and drop them from the lockfile."""
    source = Bundle()
    chosen = set(table.check_names(agents)) if agents else None
    scope = scope_for(scope_name, cwd)
    if not os.path.isfile(scope.lockfile):
        raise UserError(f"nothing to uninstall: there is no {scope.lockfile}")
    state = machine.load_for_write()
    report = Report(scope)
    with lockfile.locked(scope.lockfile, scope.root) as lock:
        lockfile.warn_unknown(lock, source.known)
        for skill in skills:
            if not lockfile.plain_name(skill):
                raise UserError(f"{skill!r} is not a skill name")
            if skill not in lock.skills:
                raise UserError(f"{skill} is not installed (not in {scope.lockfile})")
        names = sorted(set(skills)) or [
            s for s in sorted(lock.skills) if lockfile.actionable(lock, s, source.known)
        ]
        for skill in names:
            entry = lock.skills[skill]
            if not lockfile.well_formed(entry):
                report.refuse(
                    skill,
                    None,
                    "its lockfile entry is in a form this version does not know",
                    "fix or remove the entry by hand",
                )
                continue
            targets = list(entry["targets"])
            known = {a for a in targets if table.is_known(a)}
            leaving = known & chosen if chosen is not None else known
            if not leaving:
                continue
            keep = [a for a in targets if a not in leaving]
            link = entry.get("mode") == lockfile.LINK
            placements = plan(
                scope,
                source,
                state,
                skill,
                keep=keep,
                touch=sorted(leaving),
                link=link,
                recorded=entry["revision"],
                covered=set(table.group_by_dir(targets, scope.root)),
            )
            tidy(placements)
            for placement in placements:
                if placement.wanted or not set(placement.readers) & leaving:
                    continue
                action = decide(placement, force)
                if action == REFUSED:
                    held = [a for a in placement.readers if a in leaving]
                    fix = scope.command("uninstall", skill, *scope.agent_flags(held), "--force")
                    report.refuse(skill, placement, *refusal(placement, fix))
                    keep += held
                elif action:
                    apply(action, placement, source, link, scope.root)
                    report.change(placement, action, link)
            if keep:
                lock.skills[skill] = lockfile.make_entry(entry["revision"], keep, link, entry)
            else:
                del lock.skills[skill]
        report.lockfile_written = lockfile.save(lock)
    return report


def sync(
    cwd: str,
    scope_name: str | None,
    skills: list[str] | None = None,
    force: bool = False,
    dry_run: bool = False,
) -> list[Report]:
    """Make every target directory match intent; with `dry_run`, only say what would change."""
    source = Bundle()
    only = set(skills) if skills else None
    state = machine.load() if dry_run else machine.load_for_write()
    reports = []
    for scope in scopes_in_use(cwd, scope_name):
        report = Report(scope, dry_run)
        reports.append(report)
        if not os.path.isfile(scope.lockfile):
            continue
        held = (
            contextlib.nullcontext(lockfile.read(scope.lockfile, scope.root))
            if dry_run
            else lockfile.locked(scope.lockfile, scope.root)
        )
        with held as lock:
            lockfile.warn_unknown(lock, source.known)
            for skill in sorted(lock.skills):
                if only is not None and skill not in only:
                    continue
                if not lockfile.actionable(lock, skill, source.known):
                    continue
                entry = lock.skills[skill]
                _sync_entry(scope, source, state, lock, skill, entry, force, report)
            if not dry_run:
                report.lockfile_written = lockfile.save(lock)
    return reports


def _sync_entry(
    scope: Scope,
    source: Bundle,
    state: machine.State,
    lock: lockfile.Lock,
    skill: str,
    entry: dict,
    force: bool,
    report: Report,
) -> None:
    targets = list(entry["targets"])
    link = entry.get("mode") == lockfile.LINK
    placements = plan(
        scope,
        source,
        state,
        skill,
        keep=targets,
        touch=[],
        link=link,
        recorded=entry["revision"],
        covered=set(table.group_by_dir(targets, scope.root)),
    )
    if not report.dry_run:
        tidy(placements)
    for placement in placements:
        action = decide(placement, force)
        if action == REFUSED:
            report.refuse(skill, placement, *refusal(placement, sync_fix(scope, skill)))
        elif action:
            if not report.dry_run:
                apply(action, placement, source, link, scope.root)
            report.change(placement, action, link)
    revision = source.revision(skill)
    if placements and revision:
        report.revision(skill, entry["revision"], revision)
        if not report.dry_run:
            lock.skills[skill] = lockfile.make_entry(revision, targets, link, entry)


def set_enabled(cwd: str, skill: str, agents: list[str], enabled: bool) -> dict:
    """Switch a skill on or off for agents on this machine, then bring copies in line."""
    source = Bundle()
    chosen = table.check_names(agents)
    if skill not in source.known and not (enabled and skill in machine.load().skills):
        source.check([skill])
    _, changed = machine.update(lambda state: state.set_agents(skill, chosen, off=not enabled))
    reports = sync(cwd, None, [skill]) if skill in source.known else []
    return {
        "skill": skill,
        "agents": chosen,
        "enabled": enabled,
        "changed": changed,
        "state": machine.state_path(),
        "sync": [r.document() for r in reports],
        "refused": sum(len(r.refused) for r in reports),
    }


def prune(cwd: str, dry_run: bool) -> dict:
    """Drop state entries of skills no lockfile this machine knows of mentions."""
    lockfiles: list[tuple[str, str | None]] = [(global_scope().lockfile, None)]
    root = find_project_root(cwd)
    if root is not None:
        lockfiles.insert(0, (lockfile.project_path(root), root))
    installed: set[str] = set()
    for path, owner in lockfiles:
        installed |= set(lockfile.read(path, owner).skills)

    def drop(state: machine.State) -> list[str]:
        gone = sorted(s for s in state.skills if s not in installed)
        if not dry_run:
            for skill in gone:
                del state.skills[skill]
        return gone

    dropped = drop(machine.load()) if dry_run else machine.update(drop)[1]
    return {
        "state": machine.state_path(),
        "lockfiles": [p for p, _owner in lockfiles if os.path.isfile(p)],
        "dropped": dropped,
        "dryRun": dry_run,
    }
