"""This machine's skill state: which agents have a skill switched off.

`state.json` lives in the state home: `$DELEGATE_SKILLS_HOME` when set, else
the directory of the global fleet config. Version 1:

    {"version": 1,
     "writtenBy": "delegate-skills <version>",
     "skills": {"<skill>": {"agents": {"<agent>": "off"}}}}

Sparse and disable-only: a skill with no entry is on for every agent.
Removing the last disable removes `agents`, and a skill entry left empty.
Fields and values this version does not know are kept as read and written
after ours, in sorted order; only the exact value "off" disables.

Older layouts are brought up to date by `MIGRATIONS`, a ladder of pure
functions over the parsed JSON: `MIGRATIONS[n]` turns version n into n + 1
and leaves any other document alone, so running a step twice changes
nothing. A file with no version, or a newer one, is a hard stop.
"""

from __future__ import annotations

import copy
import os
import time
from collections.abc import Callable, Iterable

from .. import fleet, jsjson
from ..errors import UserError
from . import files, warn

VERSION = 1
OFF = "off"
FILE_NAME = "state.json"
HOME_ENV = "DELEGATE_SKILLS_HOME"


def state_home() -> str:
    return os.environ.get(HOME_ENV) or os.path.dirname(fleet.global_config_path())


def state_path() -> str:
    return os.path.join(state_home(), FILE_NAME)


# ---------------------------------------------------------------- migrations


class MigrationError(ValueError):
    pass


def migrate_0_to_1(document: dict) -> dict:
    """The draft layout, `"disabled": {"<skill>": ["<agent>", ...]}`, to version 1."""
    if document.get("version") != 0 or isinstance(document.get("version"), bool):
        return document
    disabled = document.get("disabled", {})
    if not isinstance(disabled, dict) or not all(
        isinstance(agents, list) and all(isinstance(a, str) for a in agents)
        for agents in disabled.values()
    ):
        raise MigrationError('"disabled" must map skill names to lists of agent names')
    skills = copy.deepcopy(document.get("skills", {}))
    if not isinstance(skills, dict):
        raise MigrationError('"skills" must be an object')
    for skill, agents in disabled.items():
        entry = skills.setdefault(skill, {})
        if not isinstance(entry, dict) or not isinstance(entry.setdefault("agents", {}), dict):
            raise MigrationError(f"skills.{skill} cannot hold the disables of version 0")
        for agent in agents:
            entry["agents"][agent] = OFF
    rest = {k: copy.deepcopy(v) for k, v in document.items() if k not in ("version", "disabled")}
    return {**rest, "version": 1, "skills": skills}


MIGRATIONS: tuple[Callable[[dict], dict], ...] = (migrate_0_to_1,)
OLDEST = VERSION - len(MIGRATIONS)


def migrate(path: str, document: dict) -> tuple[dict, bool]:
    """The document at the current version, and whether any step changed it."""
    found = files.check_version(path, document, VERSION, "state", OLDEST)
    migrated = document
    for step in MIGRATIONS[found - OLDEST :]:
        try:
            migrated = step(migrated)
        except MigrationError as problem:
            raise UserError(f"{path}: cannot migrate it: {problem}") from None
    return migrated, migrated is not document


# ---------------------------------------------------------------- the state


class State:
    """The parsed state: per-skill entries and the top-level fields we do not know."""

    def __init__(self, path: str, raw: bytes | None, skills: dict, extra: dict) -> None:
        self.path = path
        self.raw = raw
        self.skills = skills
        self.extra = extra

    def agents(self, skill: str) -> dict:
        entry = self.skills.get(skill)
        agents = entry.get("agents") if isinstance(entry, dict) else None
        return agents if isinstance(agents, dict) else {}

    def is_enabled(self, skill: str, agent: str) -> bool:
        return self.agents(skill).get(agent) != OFF

    def disabled(self) -> dict[str, list[str]]:
        """Every skill with an agent switched off, and those agents (sorted)."""
        out = {}
        for skill in sorted(self.skills):
            off = sorted(a for a, v in self.agents(skill).items() if v == OFF)
            if off:
                out[skill] = off
        return out

    def set_agents(self, skill: str, agents: Iterable[str], off: bool) -> list[str]:
        """Record agents as off (or remove our "off"); return the agents that changed."""
        entry = dict(self.skills.get(skill) or {})
        current = dict(entry.get("agents") or {})
        changed = []
        for agent in agents:
            value = current.get(agent)
            if off and value != OFF:
                if agent in current:
                    warn(
                        f"{self.path}: skills.{skill}.agents.{agent} was "
                        f"{jsjson.stringify(value)}; now {OFF!r}"
                    )
                current[agent] = OFF
                changed.append(agent)
            elif not off and value == OFF:
                del current[agent]
                changed.append(agent)
        if current:
            entry["agents"] = current
        else:
            entry.pop("agents", None)
        if entry:
            self.skills[skill] = entry
        else:
            self.skills.pop(skill, None)
        return changed

    def document(self) -> dict:
        skills = {}
        for name in sorted(self.skills):
            entry = self.skills[name]
            out = {}
            if "agents" in entry:
                out["agents"] = dict(sorted(entry["agents"].items()))
            for key in sorted(k for k in entry if k != "agents"):
                out[key] = entry[key]
            skills[name] = out
        document = {"version": VERSION, "writtenBy": files.WRITTEN_BY, "skills": skills}
        for key in sorted(self.extra):
            document[key] = self.extra[key]
        return document

    def to_bytes(self) -> bytes:
        return jsjson.document_bytes(self.document())


def _strict(path: str, raw: bytes | None, document: dict) -> State:
    skills = document.get("skills", {})
    if not isinstance(skills, dict):
        raise UserError(f'{path}: "skills" must be an object')
    for name, entry in skills.items():
        if not isinstance(entry, dict):
            raise UserError(f"{path}: skills.{name} must be an object")
        if "agents" in entry and not isinstance(entry["agents"], dict):
            raise UserError(f"{path}: skills.{name}.agents must be an object")
    extra = {k: v for k, v in document.items() if k not in ("version", "writtenBy", "skills")}
    return State(path, raw, {k: dict(v) for k, v in skills.items()}, extra)


def _corrupt_message(path: str, problem: files.Corrupt) -> str:
    return (
        f"{path} is {problem}; a command that writes state (e.g. `delegate skills sync`) "
        "moves it aside, or fix it by hand"
    )


def _read(path: str) -> tuple[bytes, dict] | None:
    """The file's bytes and JSON object; None when there is no file. Raises files.Corrupt."""
    raw = files.read_bytes(path)
    return None if raw is None else (raw, files.parse_object(raw))


def load(path: str | None = None) -> State:
    """Read-only: the state as it is (migrated in memory). Changes nothing on disk."""
    path = path or state_path()
    try:
        found = _read(path)
    except files.Corrupt as problem:
        raise UserError(_corrupt_message(path, problem)) from None
    if found is None:
        return State(path, None, {}, {})
    raw, document = found
    document, _ = migrate(path, document)
    return _strict(path, raw, document)


def _move_aside(path: str, problem: files.Corrupt) -> None:
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    aside = f"{path}.corrupt-{stamp}"
    n = 1
    while os.path.lexists(aside):
        n += 1
        aside = f"{path}.corrupt-{stamp}-{n}"
    os.replace(path, aside)
    warn(f"{path} was {problem}; moved it to {aside} and started from an empty state")


def _load_locked(path: str) -> State:
    """Under the queue: the state as it is, a corrupt file moved aside, a migration saved."""
    try:
        found = _read(path)
    except files.Corrupt as problem:
        _move_aside(path, problem)
        found = None
    if found is None:
        return State(path, None, {}, {})
    raw, document = found
    document, migrated = migrate(path, document)
    state = _strict(path, raw, document)
    if migrated:
        data = state.to_bytes()
        files.replace(path, data)
        state.raw = data
    return state


def load_for_write(path: str | None = None) -> State:
    """The state for a command that changes things: repaired and migrated on disk first."""
    path = path or state_path()
    if not os.path.lexists(path):
        return State(path, None, {}, {})
    with files.write_queue(path):
        return _load_locked(path)


def update(change: Callable[[State], list], path: str | None = None) -> tuple[State, list]:
    """Load the state under its queue, apply `change`, write it back when it changed.

    `change` edits the state in place and returns what it changed (empty: nothing).
    """
    path = path or state_path()
    with files.write_queue(path):
        state = _load_locked(path)
        changed = change(state)
        data = state.to_bytes()
        if changed and data != state.raw:
            files.replace(path, data)
            state.raw = data
    return state, changed
