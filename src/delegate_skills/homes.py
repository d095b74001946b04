"""Where the user's own configuration lives: the home dir and the XDG config home."""

from __future__ import annotations

import os


def home_dir() -> str:
    if "HOME" in os.environ:
        return os.environ["HOME"]
    return os.path.expanduser("~")


def config_home() -> str:
    """$XDG_CONFIG_HOME if it is absolute (the XDG spec ignores a relative one), else ~/.config."""
    value = os.environ.get("XDG_CONFIG_HOME")
    return value if value and os.path.isabs(value) else os.path.join(home_dir(), ".config")
