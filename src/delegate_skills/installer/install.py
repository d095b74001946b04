"""Bring the agents' skill directories in line with intent, and report on them.

Intent lives in two files: the lockfile (which skills are installed for which
agents, at which revision, copied or linked) and this machine's state (which
agents have a skill switched off). A directory read by several agents holds
the skill while any of its target agents is on.

A folder on disk is ours when it matches what we installed: a copy whose
revision is the one recorded (or the one bundled now), or a link to the
bundled folder. Anything else in its place is the user's: a copy they
changed, or a folder we never installed. Those are left alone unless the
command has --force.

A copy is written beside its final place under a temporary name, then renamed
into place (the old folder is renamed aside first and removed after), so no
agent ever sees half a skill. Every lockfile change holds that lockfile's
write queue for the whole command, so two installs never interleave.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import stat
from dataclasses import dataclass, field

from .. import gitmeta
from ..errors import UserError
from . import agents as table
from . import bundle, files, lockfile
from . import state as machine

PROJECT = "project"
GLOBAL = "global"
SCOPES = (GLOBAL, PROJECT)
REFUSED = "refused"


# ---------------------------------------------------------------- where


@dataclass
class Scope:
    name: str
    root: str | None  # the project root; None for global installs
    lockfile: str

    def show(self, directory: str) -> str:
        """A directory as the user should read it: relative to the project root."""
        if self.root is None:
            return directory
        relative = os.path.relpath(directory, self.root)
        return directory if relative.startswith("..") else relative.replace(os.sep, "/")

    def head(self) -> dict:
        return {"scope": self.name, "root": self.root, "lockfile": self.lockfile}

    def command(self, verb: str, skill: str, *flags: str) -> str:
        """The `delegate skills` command line that does `verb` to `skill` in this scope."""
        return " ".join(["`delegate skills", verb, skill, *flags, "--scope", f"{self.name}`"])

    def agent_flags(self, agents) -> list[str]:
        return [flag for agent in sorted(agents) for flag in ("--agent", agent)]


def find_project_root(cwd: str) -> str | None:
    """The nearest directory at or above `cwd` holding a project lockfile."""
    here = os.path.abspath(cwd)
    while True:
        if os.path.isfile(lockfile.project_path(here)):
            return here
        parent = os.path.dirname(here)
        if parent == here:
            return None
        here = parent


def project_scope(cwd: str) -> Scope:
    """The project of `cwd`: the nearest lockfile's, else the git top level, else `cwd`."""
    root = find_project_root(cwd)
    if root is None:
        root = gitmeta.repo_paths(cwd).toplevel or os.path.abspath(cwd)
    return Scope(PROJECT, root, lockfile.project_path(root))


def global_scope() -> Scope:
    return Scope(GLOBAL, None, os.path.join(machine.state_home(), lockfile.GLOBAL_NAME))


def scope_for(name: str, cwd: str) -> Scope:
    if name == GLOBAL:
        return global_scope()
    if name == PROJECT:
        return project_scope(cwd)
    raise UserError("--scope must be global or project")


def scopes_in_use(cwd: str, name: str | None) -> list[Scope]:
    """The scope asked for, or else every scope with a lockfile: the project's, then global."""
    if name:
        return [scope_for(name, cwd)]
    found = []
    root = find_project_root(cwd)
    if root is not None:
        found.append(Scope(PROJECT, root, lockfile.project_path(root)))
    glob = global_scope()
    if os.path.isfile(glob.lockfile):
        found.append(glob)
    return found


# ---------------------------------------------------------------- the bundle


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


# ---------------------------------------------------------------- what is on disk


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


# ---------------------------------------------------------------- changing the disk


def _side_name(path: str, kind: str) -> str:
    directory, name = os.path.split(path)
    return os.path.join(directory, f".{name}.{kind}-{os.getpid()}-{os.urandom(4).hex()}")


def _discard(path: str) -> None:
    """Remove a file, link or tree that is already out of every agent's sight."""

    def retry(function, failed, _info) -> None:
        with contextlib.suppress(OSError):
            os.chmod(os.path.dirname(failed), stat.S_IRWXU)
        function(failed)

    if os.path.islink(path) or not os.path.isdir(path):
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)
        return
    shutil.rmtree(path, onerror=retry)


def sweep(directory: str, skill: str) -> None:
    """Remove what a crashed writer left beside `skill` (the lockfile's queue held)."""
    prefixes = (f".{skill}.tmp-", f".{skill}.old-")
    try:
        names = os.listdir(directory)
    except OSError:
        return
    for name in names:
        if name.startswith(prefixes):
            with contextlib.suppress(OSError):
                _discard(os.path.join(directory, name))


def place(source: str, path: str, link: bool) -> None:
    """Put a copy of (or a link to) `source` at `path`, replacing whatever is there."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    fresh = _side_name(path, "tmp")
    try:
        if link:
            os.symlink(os.path.realpath(source), fresh, target_is_directory=True)
        else:
            bundle.copy_skill(source, fresh)
        if os.path.lexists(path):
            old = _side_name(path, "old")
            os.rename(path, old)
            try:
                os.rename(fresh, path)
            except OSError:
                os.rename(old, path)
                raise
            _discard(old)
        else:
            os.rename(fresh, path)
    except BaseException:
        with contextlib.suppress(OSError):
            _discard(fresh)
        raise


def remove(path: str) -> None:
    """Take `path` out of sight in one rename, then delete it."""
    if not os.path.lexists(path):
        return
    old = _side_name(path, "old")
    os.rename(path, old)
    _discard(old)


def _tidy(placements: list[Placement]) -> None:
    """Sweep the leftovers of crashed writers beside each placement (queue held)."""
    for placement in placements:
        sweep(placement.directory, placement.skill)


def _apply(action: str, placement: Placement, source: Bundle, link: bool, root: str | None) -> None:
    files.refuse_symlinks(root, placement.directory)
    try:
        if action == "removed":
            remove(placement.path)
        else:
            place(source.source(placement.skill), placement.path, link)
    except OSError as error:
        raise UserError(f"cannot write {placement.path}: {error.strerror or error}") from None


# ---------------------------------------------------------------- reports


class Report:
    """What one command did (or would do) in one scope."""

    def __init__(self, scope: Scope, dry_run: bool = False) -> None:
        self.scope = scope
        self.dry_run = dry_run
        self.changes: list[dict] = []
        self.refused: list[dict] = []
        self.lockfile_written = False

    def change(self, placement: Placement, action: str, link: bool) -> None:
        self.changes.append(
            {
                "skill": placement.skill,
                "dir": self.scope.show(placement.directory),
                "agents": placement.readers,
                "action": action,
                "was": placement.status,
                "mode": "link" if link else "copy",
            }
        )

    def revision(self, skill: str, old: str | None, new: str) -> None:
        if old != new:
            self.changes.append({"skill": skill, "action": "recorded", "from": old, "to": new})

    def refuse(self, skill: str, placement: Placement | None, reason: str, fix: str) -> None:
        self.refused.append(
            {
                "skill": skill,
                "dir": self.scope.show(placement.directory) if placement else None,
                "status": placement.status if placement else "unknown",
                "reason": reason,
                "fix": fix,
            }
        )

    def document(self) -> dict:
        return {
            **self.scope.head(),
            "dryRun": self.dry_run,
            "changes": self.changes,
            "refused": self.refused,
            "lockfileWritten": self.lockfile_written,
        }


def _refusal(placement: Placement, fix: str) -> tuple[str, str]:
    """Why a placement was left alone, and the fix: `fix` is the command that forces it."""
    if placement.status == "foreign":
        return (
            "a folder delegate-skills did not install is in the way",
            f"move it away, or {fix} to replace it",
        )
    if placement.wanted:
        return ("the copy was changed by hand", f"keep it, or {fix} to restore it")
    return ("the copy was changed by hand", f"keep it, or {fix} to remove it")


def _sync_fix(scope: Scope, skill: str) -> str:
    return scope.command("sync", skill, "--force")


# ---------------------------------------------------------------- commands


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
            _tidy(placements)
            for placement in placements:
                asked = placement.directory in chosen_dirs
                action = decide(placement, force and asked)
                if action == REFUSED and not asked:
                    continue  # a changed copy for another agent: doctor reports it
                if action == REFUSED:
                    asked_here = [a for a in placement.readers if a in chosen]
                    flags = [*scope.agent_flags(asked_here), *(["--link"] if link else [])]
                    fix = scope.command("install", skill, *flags, "--force")
                    report.refuse(skill, placement, *_refusal(placement, fix))
                    if placement.status == "foreign":
                        targets -= set(placement.agents) - set(before)
                elif action:
                    _apply(action, placement, source, link, scope.root)
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
            _tidy(placements)
            for placement in placements:
                if placement.wanted or not set(placement.readers) & leaving:
                    continue
                action = decide(placement, force)
                if action == REFUSED:
                    held = [a for a in placement.readers if a in leaving]
                    fix = scope.command("uninstall", skill, *scope.agent_flags(held), "--force")
                    report.refuse(skill, placement, *_refusal(placement, fix))
                    keep += held
                elif action:
                    _apply(action, placement, source, link, scope.root)
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
        _tidy(placements)
    for placement in placements:
        action = decide(placement, force)
        if action == REFUSED:
            report.refuse(skill, placement, *_refusal(placement, _sync_fix(scope, skill)))
        elif action:
            if not report.dry_run:
                _apply(action, placement, source, link, scope.root)
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


# ---------------------------------------------------------------- read-only views


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
    force = _sync_fix(scope, placement.skill)
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
