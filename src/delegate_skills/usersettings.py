"""The user's own settings for delegate-skills, apart from the Node-compatible fleet file.

`$XDG_CONFIG_HOME/delegate-skills/settings.json` (else ~/.config/...):

    {"version": 1, "confine": true}

`confine` (true or false): confine every write run (see relay/confine.py);
DELEGATE_CONFINE and the relay's --confine / --no-confine win over it. The
file is the user's alone: nothing in a repository, a batch file or an MCP
call can set it. A missing file is no settings; a file whose version is not
1 is refused, naming the file and both versions. Unknown keys are kept.

`notify` (an object): what `--notify` on `delegate fanout`, `delegate batch`
and `delegate runs watch` does when a run ends (see notify.py). Without
--notify it does nothing, so scripted use stays silent.

    {"version": 1,
     "notify": {"desktop": true, "command": ["/usr/local/bin/pager-me", "--quiet"]}}

- `desktop` (true or false, default true): a desktop notification through
  notify-send or osascript, whichever is on PATH.
- `command` (a list of strings: the program, then its arguments): run once
  per ended run, without a shell, with DELEGATE_RUN_RESULT (the run's
  result.json path), DELEGATE_RUN_STATUS, DELEGATE_RUN_ID and
  DELEGATE_RUN_IMPLEMENTER in its environment; stdin /dev/null, output
  discarded, killed after 10 s. A string (a shell command line) is refused.

Any other shape, or another key under `notify`, is refused with one line naming
this file and the key.
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


#: The keys `notify` takes.
NOTIFY_KEYS = ("command", "desktop")


def notify_settings(document: dict) -> dict:
    """`notify` of a loaded settings document, checked: {} when absent, else a dict with
    `desktop` (bool) and/or `command` (a list of strings). Raises UserError naming the key."""
    found = document.get("notify")
    if found is None:
        return {}
    path = settings_path()
    if not isinstance(found, dict):
        raise UserError(
            f'{path}: notify must be an object such as {{"desktop": true, "command": '
            f'["program", "argument"]}}'
        )
    for key in sorted(found):
        if key not in NOTIFY_KEYS:
            raise UserError(
                f"{path}: notify.{key} is not a setting (one of: {', '.join(NOTIFY_KEYS)})"
            )
    desktop = found.get("desktop", True)
    if not isinstance(desktop, bool):
        raise UserError(f"{path}: notify.desktop must be true or false")
    checked = {"desktop": desktop}
    if "command" in found:
        command = found["command"]
        if (
            not isinstance(command, list)
            or not command
            or not all(isinstance(part, str) and "\0" not in part for part in command)
            or not command[0]
        ):
            raise UserError(
                f"{path}: notify.command must be a list of strings, the program then its "
                "arguments (it runs without a shell; a command line as one string is refused)"
            )
        checked["command"] = list(command)
    return checked
