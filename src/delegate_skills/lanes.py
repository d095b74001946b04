"""Lane resolution: from a lane name to the dials one relay applies.

The dials come back in the relay's own terms (grok speaks `autonomy`, opencode
takes read-only as `agent: plan`, omp's effort is `thinking`, …), and a relay
applies a dial only where no explicit flag already set that field.
"""

from __future__ import annotations

from . import jsjson, registry
from .errors import UserError, did_you_mean
from .fleet import Effective


def resolve(cwd: str, lane_name: str, implementer_key: str) -> dict:
    """What `lane resolve` prints: lane, source, implementer, skill, dials. Raises UserError."""
    if not registry.LANE_NAME.accepts(lane_name):
        raise UserError(f"invalid lane name {jsjson.stringify(lane_name)}")
    if registry.get(implementer_key) is None:
        raise UserError(f"unknown implementer {jsjson.stringify(implementer_key)}")
    effective = Effective(cwd)
    entry = effective.lanes().get(lane_name)
    if entry is None:
        raise UserError(
            f"fleet lane not found: {lane_name}{did_you_mean(lane_name, effective.lanes())}"
        )
    rest = dict(entry)
    source = rest.pop("source")
    implementer = rest.pop("implementer")
    if source == "project" and not effective.project_trusted:
        raise UserError(untrusted_message(effective))
    if implementer != implementer_key:
        skill = registry.BY_KEY[implementer].skill
        raise UserError(
            f'fleet lane "{lane_name}" → {implementer} (use {skill}); '
            f"this relay is {implementer_key}"
        )
    return {
        "lane": lane_name,
        "source": source,
        "implementer": implementer,
        "skill": registry.BY_KEY[implementer].skill,
        "dials": relay_dials(implementer_key, rest),
    }


def untrusted_message(effective: Effective) -> str:
    """Why a project lane may not run: which file, whether it changed since it was
    approved, and the command that approves it, as a line that pastes."""
    import os

    from . import approval
    from .invocation import quoted, script, setup_folder

    path = effective.project_path
    top = os.path.dirname(os.path.dirname(path))
    approved_once = bool(effective.git_dir) and os.path.isfile(
        approval.approval_path(effective.git_dir)
    )
    state = "changed since it was approved" if approved_once else "has not been approved yet"
    where = f"--cwd {quoted(top)}"
    line = (
        f"project fleet config is not trusted: {path} {state}; review it, then approve it: "
        f"delegate config approve {where}"
    )
    folder = setup_folder()
    if folder is not None:
        line += f", or from the skill folders: {script(folder, 'config.py')} approve {where}"
    return line


def relay_dials(key: str, lane: dict) -> dict:
    """Rename a stored lane's dials into the fields relay `key` reads."""
    dials = dict(lane)
    read_only = dials.get("readOnly") is True
    if key == "grok":
        if isinstance(dials.get("sandbox"), str):
            sandbox = dials.pop("sandbox")
            dials["autonomy"] = registry.GROK_SANDBOX_TO_AUTONOMY.get(sandbox, sandbox)
        if read_only:
            dials.setdefault("autonomy", "read-only")
            del dials["readOnly"]
    elif key == "codex" and read_only:
        dials.setdefault("sandbox", "read-only")
        del dials["readOnly"]
    elif key == "opencode" and read_only:
        dials["agent"] = "plan"
        del dials["readOnly"]
    elif key in ("qoder", "gemini", "qwen") and read_only:
        dials.setdefault("permissionMode", "plan")
        del dials["readOnly"]
    elif key == "omp" and isinstance(dials.get("effort"), str):
        dials["thinking"] = dials.pop("effort")
    elif key == "vibe" and read_only:
        dials["planOnly"] = True
        del dials["readOnly"]
    return dials


#: A dial is skipped when any of these flags was given explicitly.
_SHADOWED_BY = {
    "sandbox": ("sandbox", "readOnly"),
    "autonomy": ("autonomy", "sandbox", "readOnly"),
    "agent": ("agent", "readOnly"),
    "permissionMode": ("permissionMode", "readOnly"),
    "planOnly": ("planOnly", "readOnly", "fullAccess"),
    "readOnly": ("readOnly", "dangerouslySkipPermissions", "fullAccess"),
}


def merge_dials(
    opts: dict,
    dials: dict,
    flagged: set[str],
    *,
    extra_blockers: dict[str, tuple[str, ...]] | None = None,
    apply=None,
) -> None:
    """Apply lane dials onto relay options; explicit flags (`flagged`) win.

    `extra_blockers` adds relay-specific flags that shadow a dial; `apply`
    sets one dial (default: `opts[field] = value`).
    """
    for field, value in dials.items():
        blockers = _SHADOWED_BY.get(field, (field,)) + (extra_blockers or {}).get(field, ())
        if any(flag in flagged for flag in blockers):
            continue
        if apply is None:
            opts[field] = value
        else:
            apply(opts, field, value)
