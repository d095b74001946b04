"""`--clean-env` / `--keep-env`: start an implementer with runtime basics only.

Shared by the relays that offer a stripped environment (commandcode; codex
carries its own copy of the same rules and can move here). The stripped
environment changes what the child inherits, nothing more: files and other
same-user secrets stay reachable.
"""

from __future__ import annotations

import os

from delegate_skills.relay.options import ENV_NAME, Flag, Usage

#: What a --clean-env child still gets: runtime basics, never credentials.
BASICS = (
    "PATH", "HOME", "USER", "LOGNAME", "SHELL", "LANG", "LC_ALL", "LC_CTYPE", "TERM",
    "TMPDIR", "SystemRoot", "SystemDrive", "USERPROFILE", "APPDATA", "LOCALAPPDATA",
    "TEMP", "TMP", "PATHEXT", "COMSPEC",
)  # fmt: skip


def flags(product: str) -> tuple[Flag, Flag]:
    return (
        Flag(
            "--clean-env",
            sets={"cleanEnv": True},
            help=f"{product} and its version check get runtime basics only (not a "
            "boundary: files and same-user secrets stay reachable).",
        ),
        Flag(
            "--keep-env",
            "keepEnv",
            metavar="<name>",
            append=True,
            help="Keep one more variable under --clean-env (repeatable): env-based auth, proxies.",
        ),
    )


def check(opts: dict) -> None:
    """The --keep-env rules, in the reference's order. Raises Usage."""
    names = opts["keepEnv"]
    if names and not opts["cleanEnv"]:
        raise Usage("--keep-env requires --clean-env")
    for name in names:
        if ENV_NAME.fullmatch(name) is None:
            raise Usage(f'invalid --keep-env "{name}" (expected an environment variable name)')
    for name in names:
        if name not in os.environ:
            raise Usage(f'--keep-env "{name}" is not set')


def environment(opts: dict, own: tuple[str, ...] = ()) -> dict[str, str]:
    """The child's environment: everything, or the basics plus `own` and the kept names."""
    if not opts["cleanEnv"]:
        return dict(os.environ)
    names = (*BASICS, *own, *opts["keepEnv"])
    return {name: os.environ[name] for name in names if name in os.environ}
