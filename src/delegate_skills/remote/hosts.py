"""Per-host settings: `$XDG_CONFIG_HOME/delegate-skills/hosts.json`.

    {"hosts": {"devbox": {"root": "~/delegate-runs", "python": "python3.12"}}}

`root` is where runs live on that machine (default
`~/.cache/delegate-skills/remote`, `~` as that machine expands it); `python`
the interpreter the relay runs with there (default `python3`). A host the file
does not name takes the defaults. Lanes stay in the fleet config, unchanged.
"""

from __future__ import annotations

import json
import os

from ..errors import UserError
from ..homes import config_home
from ..reading import CONFIG_LIMIT, read_limited

HOSTS_FILE = "hosts.json"
DEFAULT_ROOT = "~/.cache/delegate-skills/remote"
DEFAULT_PYTHON = "python3"
_KEYS = ("root", "python")


class Host:
    """One machine a run can go to: the ssh name and its settings."""

    __slots__ = ("name", "python", "root")

    def __init__(self, name: str, root: str = DEFAULT_ROOT, python: str = DEFAULT_PYTHON) -> None:
        self.name = name
        self.root = root
        self.python = python


def hosts_path() -> str:
    return os.path.join(config_home(), "delegate-skills", HOSTS_FILE)


def check_name(name: str) -> str:
    """`name` when ssh can take it as a destination. Raises UserError."""
    if not name or name.startswith("-") or any(c.isspace() or ord(c) < 32 for c in name):
        raise UserError(
            f"--host {name!r} is not a host ssh can reach; give an alias from your ssh "
            "config or user@host"
        )
    return name


def load(name: str) -> Host:
    """The settings of host `name` (defaults where hosts.json is silent). Raises UserError."""
    check_name(name)
    path = hosts_path()
    raw = read_limited(path, CONFIG_LIMIT)
    if raw is None:
        return Host(name)
    try:
        document = json.loads(raw)
    except ValueError as problem:
        raise UserError(f"{path}: not valid JSON ({problem}); fix or remove it") from None
    hosts = document.get("hosts") if isinstance(document, dict) else None
    if not isinstance(hosts, dict):
        raise UserError(f'{path}: expected {{"hosts": {{"<name>": {{...}}}}}}; fix or remove it')
    entry = hosts.get(name, {})
    if not isinstance(entry, dict):
        raise UserError(f"{path}: hosts.{name} must be an object with root and python")
    settings = {}
    for key in _KEYS:
        value = entry.get(key)
        if value is None:
            continue
        if not isinstance(value, str) or not value.strip():
            raise UserError(f"{path}: hosts.{name}.{key} must be a non-empty string")
        settings[key] = value
    return Host(name, **settings)
