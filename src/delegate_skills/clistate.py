"""Where each implementer CLI keeps its own state and config: what a confined run may write.

A confined implementer sees the file system read-only but for an
allowlist (isolation/sandbox.py); these are its CLI's own entries in it:
session stores, logs, caches, its config and credentials files. Each entry
is a folder or a file under the user's home, moved where the CLI reads an
environment variable for it. A file the CLI replaces by renaming a new one
over it cannot be bound alone; its folder is listed instead.
"""

from __future__ import annotations

import os


class Spot:
    """One place a CLI writes: `home` (relative to $HOME), or `sub` under $`env` when set."""

    __slots__ = ("env", "file", "home", "sub")

    def __init__(self, home: str, env: str | None = None, sub: str = "", file: bool = False):
        self.home = home
        self.env = env
        self.sub = sub
        self.file = file

    def path(self, env: dict[str, str], home: str) -> str:
        base = env.get(self.env) if self.env else None
        if base and os.path.isabs(base):
            return os.path.join(base, self.sub) if self.sub else base
        return os.path.join(home, self.home)


def _xdg(kind: str, name: str) -> tuple[Spot, ...]:
    """A CLI's folder under one of the XDG base dirs (data, config, cache, state)."""
    env, default = {
        "data": ("XDG_DATA_HOME", ".local/share"),
        "config": ("XDG_CONFIG_HOME", ".config"),
        "cache": ("XDG_CACHE_HOME", ".cache"),
        "state": ("XDG_STATE_HOME", ".local/state"),
    }[kind]
    return (Spot(f"{default}/{name}", env, name),)


#: The CLIs' state, as a run writes it: checked with the real CLIs for codex, claude, grok,
#: gemini, qwen, opencode, kilo and hermes (a write run, a resumed run, its version); read off
#: each CLI's documentation for the others. Claude Code's ~/.claude.json (replaced by rename, so it
#: cannot be bound alone) stays read-only: what it would save there is lost for the run.
STATE: dict[str, tuple[Spot, ...]] = {
    "claude": (Spot(".claude", "CLAUDE_CONFIG_DIR"),),
    "cline": (Spot(".cline"),),
    "codex": (Spot(".codex", "CODEX_HOME"),),
    "commandcode": (Spot(".commandcode"),),
    "opencode": tuple(
        spot for kind in ("data", "state", "cache", "config") for spot in _xdg(kind, "opencode")
    ),
    "agy": (Spot(".gemini"), Spot(".antigravity")),
    "grok": (Spot(".grok", "GROK_HOME"),),
    "kimi": (Spot(".kimi-code"), Spot(".kimi")),
    "qoder": (Spot(".qoder"),),
    "vibe": (Spot(".vibe"),),
    "cursor": (Spot(".cursor"), *_xdg("config", "cursor")),
    "pi": (Spot(".pi"),),
    "omp": (Spot(".omp"), Spot(".pi")),
    "aider": (Spot(".aider"), *_xdg("cache", "aider")),
    "copilot": (Spot(".copilot"),),
    "warp": (*_xdg("data", "warp-terminal"), *_xdg("state", "warp-terminal")),
    "zcode": (Spot(".zcode"),),
    "gemini": (Spot(".gemini", "GEMINI_CLI_HOME", ".gemini"),),
    "qwen": (Spot(".qwen", "QWEN_HOME"),),
    "auggie": (Spot(".augment"),),
    # Kilo (an OpenCode fork) also needs its sandbox policy folder, even with its sandbox off.
    "kilo": (
        *(spot for kind in ("data", "state", "cache", "config") for spot in _xdg(kind, "kilo")),
        *_xdg("state", "kilo-sandbox-policy"),
    ),
    "hermes": (Spot(".hermes", "HERMES_HOME"),),
    "dsh": (Spot(".dsh", "DSH_HOME"),),
}

#: Inside those, what stays read-only: the CLI's own configuration, where hooks, MCP servers
#: and notify commands live that would run later, outside any sandbox (relative to the
#: state folder listed first).
CONFIG: dict[str, tuple[str, ...]] = {
    "claude": ("settings.json",),
    "codex": ("config.toml",),
    "grok": ("config.toml", "hooks"),
    "gemini": ("settings.json",),
    "qwen": ("settings.json",),
    "hermes": ("config.yaml",),
}


def state_paths(key: str, env: dict[str, str]) -> list[str]:
    """Absolute paths implementer `key` writes besides its work tree and its temp dir.

    Only those that exist: the relay makes nothing in the user's home. A CLI
    used before (signed in) has made its own; one that has not cannot make
    them from inside a confined run, and says so.
    """
    home = env.get("HOME") or os.path.expanduser("~")
    found = []
    for spot in STATE.get(key, ()):
        path = spot.path(env, home)
        if os.path.isfile(path) if spot.file else os.path.isdir(path):
            found.append(path)
    return found


def config_paths(key: str, env: dict[str, str]) -> list[str]:
    """The CLI's own configuration inside its state folder, kept read-only (those that exist)."""
    spots = STATE.get(key, ())
    if not spots:
        return []
    home = env.get("HOME") or os.path.expanduser("~")
    base = spots[0].path(env, home)
    return [p for name in CONFIG.get(key, ()) if os.path.lexists(p := os.path.join(base, name))]
