"""Where a skill folder's scripts/*.py land: one dispatcher for all of them.

Every skill's `scripts/relay.py`, `lane.py`, `config.py` and `discover.py` is
the same generated file; it imports this module and calls `run` with its own
file name and skill folder.
"""

from __future__ import annotations

import gc
import importlib
import os
import sys

SKILL_SUFFIX = "-delegate"

#: Each script and the module whose `main` it runs. scripts/build_dist.py
#: bundles into a skill folder what these modules import, so this table is
#: also the list of what a skill folder's scripts may reach.
SCRIPT_MODULES = {
    "relay": "delegate_skills.skillscripts.relay",
    "lane": "delegate_skills.skillscripts.lane",
    "config": "delegate_skills.skillscripts.config",
    "discover": "delegate_skills.skillscripts.discover",
    "runs": "delegate_skills.skillscripts.runs",
}

#: Scripts that keep the cyclic collector off, as the entry left it: lane and config
#: end as soon as they answer; the relay turns it on once its implementer runs.
SHORT_LIVED = ("relay", "lane", "config")


def skill_key(skill_dir: str) -> str | None:
    """The implementer key of a `<key>-delegate` skill folder.

    A folder renamed on install is recognised by the `name:` in its SKILL.md.
    """
    name = os.path.basename(os.path.normpath(skill_dir))
    if name.endswith(SKILL_SUFFIX):
        return name[: -len(SKILL_SUFFIX)]
    from ..errors import UserError
    from ..reading import CONFIG_LIMIT, read_limited

    try:
        raw = read_limited(os.path.join(skill_dir, "SKILL.md"), CONFIG_LIMIT)
    except UserError:
        return None
    for line in (raw or b"").decode("utf-8", errors="replace").split("\n"):
        if line.startswith("name:"):
            declared = line.split(":", 1)[1].strip().strip("\"'")
            if declared.endswith(SKILL_SUFFIX):
                return declared[: -len(SKILL_SUFFIX)]
    return None


def run(script: str, skill_dir: str, argv: list[str]) -> int:
    stem = script[:-3] if script.endswith(".py") else script
    if stem not in SCRIPT_MODULES:
        sys.stderr.write(f"{script}: not a delegate-skills script\n")
        return 2
    module = importlib.import_module(SCRIPT_MODULES[stem])
    if stem not in SHORT_LIVED:
        gc.freeze()  # start-up's objects live as long as the script: no collection walks them
        gc.enable()  # the entry turned it off for start-up; a wait may last hours
    if stem != "relay":
        return module.main(argv)
    key = skill_key(skill_dir)
    if key is None:
        sys.stderr.write(f"relay: cannot tell which implementer {skill_dir} is for\n")
        return 2
    return module.main(key, argv)
