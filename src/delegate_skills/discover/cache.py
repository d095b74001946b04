"""What `delegate discover` found, remembered until it could have changed.

`$XDG_CACHE_HOME/delegate-skills/discover.json` (else `~/.cache/...`) keeps,
for each implementer, its discover entry and what it depended on:

- the binary: its real path, size and mtime (a reinstall or upgrade changes
  one of them);
- its sign-in: the size and mtime of each file the CLI keeps its login in
  (LOGIN_FILES), the names (never the values) of the environment variables
  that carry keys or tokens, and the time it was probed: sign-in state older
  than LOGIN_TTL_S is asked again.

An entry whose binary is the same and whose sign-in has not moved is
answered from here; anything else is probed. The relay reads the same file
before a dispatch (a CLI known to be signed out fails at once) and never
writes it.
"""

from __future__ import annotations

import os
import time

CACHE_NAME = "discover.json"
CACHE_VERSION = 1
#: How long a probed sign-in state stands, in seconds.
LOGIN_TTL_S = 15 * 60
#: Where each CLI keeps its sign-in, as (environment variable naming its dir or None,
#: path under that dir or under HOME). Unknown for kimi, cursor, agy, warp, zcode:
#: their sign-in rests on LOGIN_TTL_S alone.
LOGIN_FILES: dict[str, tuple[tuple[str | None, str], ...]] = {
    "claude": (("CLAUDE_CONFIG_DIR", ".credentials.json"), (None, ".claude/.credentials.json"),
               (None, ".claude.json")),
    "codex": (("CODEX_HOME", "auth.json"), (None, ".codex/auth.json")),
    "opencode": ((None, ".local/share/opencode/auth.json"),),
    "cline": ((None, ".cline/data/settings/providers.json"), (None, ".cline/data/secrets.json")),
    "copilot": (("COPILOT_HOME", "config.json"), (None, ".copilot/config.json")),
    "pi": ((None, ".pi/agent/auth.json"),),
    "omp": (("PI_CODING_AGENT_DIR", "agent.db"), (None, ".omp/agent/agent.db")),
    "qoder": ((None, ".qoder/.auth"),),
    "grok": ((None, ".grok/auth.json"),),
    "commandcode": ((None, ".commandcode/auth.json"),),
    "gemini": ((None, ".gemini/oauth_creds.json"), (None, ".gemini/gemini-credentials.json"),
               (None, ".gemini/settings.json")),
    "qwen": ((None, ".qwen/oauth_creds.json"), (None, ".qwen/settings.json")),
    "auggie": ((None, ".augment/session.json"),),
    "aider": ((None, ".aider/oauth-keys.env"),),
    "vibe": (("VIBE_HOME", ".env"), (None, ".vibe/.env")),
}  # fmt: skip
_SECRET_WORDS = ("API_KEY", "TOKEN", "AUTH", "SECRET", "CREDENTIAL")


def cache_path(env: dict[str, str] | None = None) -> str:
    env = os.environ if env is None else env
    base = env.get("XDG_CACHE_HOME")
    if not base or not os.path.isabs(base):
        base = os.path.join(env.get("HOME") or os.path.expanduser("~"), ".cache")
    return os.path.join(base, "delegate-skills", CACHE_NAME)


def _stat_key(path: str) -> list | None:
    """[size, mtime in ns as text] (JSON numbers past 2**53 would lose the last digits)."""
    try:
        info = os.stat(path)
    except OSError:
        return None
    return [info.st_size, str(info.st_mtime_ns)]


def binary_key(path: str) -> dict | None:
    real = os.path.realpath(path)
    found = _stat_key(real)
    return None if found is None else {"path": real, "size": found[0], "mtimeNs": found[1]}


def login_key(key: str, env: dict[str, str]) -> dict:
    """What a CLI's sign-in state depends on, that we can see without running it."""
    home = env.get("HOME") or os.path.expanduser("~")
    files = {}
    for variable, rel in LOGIN_FILES.get(key, ()):
        base = env.get(variable) if variable else home
        if variable and not base:
            continue
        path = os.path.join(base, rel)
        files[path] = _stat_key(path)
    names = sorted(
        n
        for n in env
        if any(word in n.upper() for word in _SECRET_WORDS) and not n.startswith("DELEGATE_")
    )
    return {"files": files, "env": names}


def load(env: dict[str, str] | None = None) -> dict:
    """The cache's entries ({} when there is none, or it is not ours)."""
    from ..reading import CONFIG_LIMIT, read_json_object

    document = read_json_object(cache_path(env), 4 * CONFIG_LIMIT) or {}
    if document.get("version") != CACHE_VERSION or not isinstance(document.get("entries"), dict):
        return {}
    return document["entries"]


def fresh_entry(entries: dict, key: str, path: str, env: dict[str, str], now: float) -> dict | None:
    """The remembered entry for `key` at `path`, when nothing it depended on has moved."""
    remembered = entries.get(key)
    if not isinstance(remembered, dict) or not isinstance(remembered.get("entry"), dict):
        return None
    if remembered.get("binary") != binary_key(path):
        return None
    if remembered.get("login") != login_key(key, env):
        return None
    checked = remembered.get("checkedAt")
    if not isinstance(checked, (int, float)) or not 0 <= now - checked <= LOGIN_TTL_S:
        return None
    return remembered


def store(new: dict[str, dict], env: dict[str, str] | None = None) -> None:
    """Remember freshly probed entries (key → {"entry", "path", "seconds"}), through the queue."""
    from .. import store as files
    from ..jsjson import document_bytes

    env = os.environ if env is None else env
    path = cache_path(env)
    now = time.time()
    with files.queue((path,), files.lock_path_for(path), by_hand=True):
        entries = load(env)
        for key, probed in new.items():
            entries[key] = {
                "binary": binary_key(probed["path"]),
                "login": login_key(key, env),
                "checkedAt": now,
                "entry": probed["entry"],
                "seconds": probed.get("seconds"),
            }
        files.atomic_write(
            path, document_bytes({"version": CACHE_VERSION, "entries": entries}), durable=False
        )


def known_signed_out(key: str, path: str, env: dict[str, str]) -> float | None:
    """When the cache says the CLI at `path` is signed out (and nothing moved since): that time."""
    try:
        remembered = fresh_entry(load(env), key, path, env, time.time())
    except (OSError, ValueError):
        return None
    if remembered is None or remembered["entry"].get("authenticated") is not False:
        return None
    return remembered.get("checkedAt")
