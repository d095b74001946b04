"""The user's own settings for delegate-skills, apart from the Node-compatible fleet file.

`$XDG_CONFIG_HOME/delegate-skills/settings.json` (else ~/.config/...):

    {"version": 1, "confine": true}

`confine` (true or false): confine every write run (see relay/confine.py);
DELEGATE_CONFINE and the relay's --confine / --no-confine win over it. The
file is the user's alone: nothing in a repository, a batch file or an MCP
call can set it. A missing file is no settings; a file whose version is not
1 is refused, naming the file and both versions. Unknown keys are kept.
"""

from __future__ import annotations

import os

from .errors import UserError

SETTINGS_VERSION = 1
SETTINGS_FILE = "settings.json"


def settings_path() -> str:
    from .homes import config_home

    return os.path.join(config_home(), "delegate-skills", SETTINGS_FILE)


def load_settings() -> dict:
    """The settings as they are now ({} when there is no file). Raises UserError."""
    from .reading import CONFIG_LIMIT, read_json_object

    path = settings_path()
    try:
        document = read_json_object(path, CONFIG_LIMIT)
    except UserError:
        raise
    if document is None:
        if os.path.lexists(path):
            raise UserError(f"{path}: not a JSON object; fix it or remove it")
        return {}
    version = document.get("version")
    if version != SETTINGS_VERSION:
        raise UserError(
            f"{path}: version {version!r} is not one this delegate-skills reads "
            f"(version {SETTINGS_VERSION}); fix the file or upgrade"
        )
    confine = document.get("confine")
    if confine is not None and not isinstance(confine, bool):
        raise UserError(f"{path}: confine must be true or false")
    return document
