"""Where skills are installed: the project's scope or the global one, and its lockfile.

A project scope belongs to the nearest directory holding a project lockfile
(else the git top level, else the working directory); the global scope's
lockfile sits in this machine's state directory.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from .. import gitmeta
from ..errors import UserError
from . import lockfile
from . import state as machine

PROJECT = "project"
GLOBAL = "global"
SCOPES = (GLOBAL, PROJECT)


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
