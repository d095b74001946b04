"""Which command a message tells the reader to run: one that works where this core runs.

The same core runs as the `delegate` command (installed, or from a checkout)
and bundled inside a skill folder (`<folder>/scripts/delegate_skills/`), where
there is no `delegate` and the commands are that folder's scripts, run with
`python3`. A hint names the one that works here, its paths quoted so the line
pastes into a POSIX shell as it is.
"""

from __future__ import annotations

import os

#: Characters double quotes leave to the shell (and `!`, which bash expands there too).
_EXPANDED_IN_DOUBLE_QUOTES = frozenset('"$`\\!')
SETUP_SKILL = "delegate-setup"
#: The file scripts/build_dist.py writes into every core it bundles into a skill folder.
BUNDLE_MARK = "GENERATED.txt"


def quoted(text: str) -> str:
    """`text` as one POSIX shell word: in double quotes, or in single quotes when double
    quotes would let the shell expand part of it."""
    if not _EXPANDED_IN_DOUBLE_QUOTES.intersection(text):
        return f'"{text}"'
    return "'" + text.replace("'", "'\\''") + "'"


def skill_folder() -> str | None:
    """The skill folder whose scripts/ this core is bundled in; None for the `delegate`
    command's core (an installed package or a checkout)."""
    package = os.path.dirname(os.path.abspath(__file__))
    scripts = os.path.dirname(package)
    if os.path.basename(scripts) == "scripts" and os.path.isfile(
        os.path.join(package, BUNDLE_MARK)
    ):
        return os.path.dirname(scripts)
    return None


def script(folder: str, name: str) -> str:
    """`python3 "<folder>/scripts/<name>"`."""
    return "python3 " + quoted(os.path.join(folder, "scripts", name))


def runs_command() -> str:
    """The start of a `runs` command line here: `delegate runs`, or this folder's runs.py."""
    folder = skill_folder()
    if folder is None or not os.path.isfile(os.path.join(folder, "scripts", "runs.py")):
        return "delegate runs"
    return script(folder, "runs.py")


def setup_folder() -> str | None:
    """The delegate-setup skill folder beside this one (or this one), when this core is a
    skill folder's and that folder is there."""
    folder = skill_folder()
    if folder is None:
        return None
    if os.path.basename(os.path.normpath(folder)) != SETUP_SKILL:
        folder = os.path.join(os.path.dirname(os.path.normpath(folder)), SETUP_SKILL)
    return folder if os.path.isfile(os.path.join(folder, "scripts", "config.py")) else None
