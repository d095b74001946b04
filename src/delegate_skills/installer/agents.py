"""Which agents read skills, and from where (the Skills CLI's agent table, as data).

Each agent has a project directory (relative to the project root) and a
global directory (absolute, from the environment and the home directory).
Several agents read the same directory: a skill installed there once serves
all of them.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable

from ..errors import UserError
from ..fleet import config_home, home_dir

DEFAULT_AGENT = "universal"
SHARED_PROJECT_DIR = ".agents/skills"


def _home(*parts: str) -> Callable[[], str]:
    return lambda: os.path.join(home_dir(), *parts)


def _config(*parts: str) -> Callable[[], str]:
    return lambda: os.path.join(config_home(), *parts)


def _claude_global() -> str:
    base = os.environ.get("CLAUDE_CONFIG_DIR") or os.path.join(home_dir(), ".claude")
    return os.path.join(base, "skills")


# agent name -> (project directory, relative POSIX path; global directory)
AGENTS: dict[str, tuple[str, Callable[[], str]]] = {
    "claude-code": (".claude/skills", _claude_global),
    "cline": (SHARED_PROJECT_DIR, _home(".agents", "skills")),
    "codex": (SHARED_PROJECT_DIR, _home(".agents", "skills")),
    "cursor": (SHARED_PROJECT_DIR, _home(".cursor", "skills")),
    "github-copilot": (SHARED_PROJECT_DIR, _home(".copilot", "skills")),
    "opencode": (SHARED_PROJECT_DIR, _config("opencode", "skills")),
    "pi": (SHARED_PROJECT_DIR, _home(".agents", "skills")),
    "universal": (SHARED_PROJECT_DIR, _config("agents", "skills")),
}

NAMES: tuple[str, ...] = tuple(sorted(AGENTS))


def is_known(agent: str) -> bool:
    return agent in AGENTS


def check_names(agents: Iterable[str]) -> list[str]:
    """The agents, deduplicated and sorted; an unknown name is a UserError."""
    unique = sorted(set(agents))
    for agent in unique:
        if agent not in AGENTS:
            raise UserError(f"unknown agent {agent!r} (one of: {', '.join(NAMES)})")
    return unique


def target_dir(agent: str, root: str | None) -> str:
    """Where `agent` reads skills: under project `root`, or globally when root is None."""
    project, global_dir = AGENTS[agent]
    if root is None:
        return os.path.normpath(os.path.abspath(global_dir()))
    return os.path.normpath(os.path.join(root, *project.split("/")))


def group_by_dir(agents: Iterable[str], root: str | None) -> dict[str, list[str]]:
    """Known agents grouped by the directory they read, directories in sorted order."""
    groups: dict[str, list[str]] = {}
    for agent in sorted(set(agents)):
        if agent in AGENTS:
            groups.setdefault(target_dir(agent, root), []).append(agent)
    return dict(sorted(groups.items()))
