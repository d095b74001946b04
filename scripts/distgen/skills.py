"""The skill texts: one template per document, facts from the registry and the adapters."""

from __future__ import annotations

import json
import os
import re

from delegate_skills import __version__, lanes, registry
from delegate_skills.relay.main import load_adapter

TEMPLATES = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "templates")
REFERENCES = (
    "writing-the-brief.md",
    "dispatch-and-poll.md",
    "review-and-land.md",
    "multi-task-queues.md",
)
SETUP_REFERENCES = ("schema.md", "setup-dialogue.md")
_PLACEHOLDER = re.compile(r"@@([a-z_]+)@@")
READ_ONLY_FLAGS = ("--read-only", "--plan-only", "--plan")
SESSION_FLAGS = ("--session", "--conversation", "--resume")
LAST_FLAGS = ("--resume-last", "--continue-last")


def render(template: str, values: dict[str, str]) -> str:
    def fill(match: re.Match) -> str:
        name = match.group(1)
        if name not in values:
            raise KeyError(f"template placeholder @@{name}@@ has no value")
        return values[name]

    return _PLACEHOLDER.sub(fill, template)


def read_template(*parts: str) -> str:
    with open(os.path.join(TEMPLATES, *parts), encoding="utf-8") as handle:
        return handle.read()


def product(adapter) -> str:
    """The implementer's product name for prose: "Cline", "Oh My Pi", "Warp"."""
    return adapter.impl.display.split(" (")[0]


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def _flag_names(adapter) -> list[str]:
    return [flag.name for flag in adapter.flag_table()]


def flags_table(adapter) -> str:
    rows = ["| option | what it does |", "| --- | --- |"]
    for flag in adapter.flag_table():
        usage = f"{flag.name} {flag.metavar}".strip()
        rows.append(f"| `{usage}` | {_cell(flag.help)} |")
    rows.append("| `-h`, `--help` | Show every option. |")
    return "\n".join(rows)


def first_flag(adapter, names: tuple[str, ...]) -> str | None:
    present = _flag_names(adapter)
    return next((name for name in names if name in present), None)


def resume_flags(adapter) -> tuple[str | None, str | None]:
    """The relay's resume-by-id and resume-latest flags (None where it has none)."""
    if not adapter.resumable:
        return None, None
    return first_flag(adapter, SESSION_FLAGS), first_flag(adapter, LAST_FLAGS)


def followup(adapter) -> str:
    """How to send a second pass, as the end of a sentence."""
    session, last = resume_flags(adapter)
    if session and last:
        how = f"`{session} <id>` with the id from the result, or `{last}`"
    elif session:
        how = f"`{session} <id>` with the id from the result"
    elif last:
        how = f"`{last}`"
    else:
        return (
            "write a complete new brief that says what the last run did and what is still "
            f"wrong: {product(adapter)} runs cannot be resumed from the relay"
        )
    return (
        f"resume its session ({how}) with a short delta brief naming exactly what was "
        "wrong and what to do now; restating the whole task invites a fresh start"
    )


def quick_followup(adapter) -> str:
    """Quickstart step 5: how a second pass goes (one or two lines)."""
    session, last = resume_flags(adapter)
    if "--continue" in _flag_names(adapter) and (session or last) and adapter.resumable:
        other = f"`{session} <id>` with the id the summary names" if session else f"`{last}`"
        return (
            "a short delta brief with `--continue <run id>` (same session, same place),\n"
            f"   or {other}."
        )
    return (
        f"{product(adapter)} runs cannot be resumed from the relay: dispatch a new,\n"
        "   complete brief that says what the last run did and what is still wrong."
    )


def resume_identity(adapter) -> str:
    """Whether resuming keeps the session id, for this implementer."""
    if not adapter.resumable or not adapter.session_field:
        return ""
    field = f"`{adapter.session_field}`"
    if adapter.resume_keeps_id is True:
        return (
            f"{product(adapter)} kept the session id when resumed when we checked ({field} stays "
            "the same); `sessionChanged` in the result says if a run did not."
        )
    if adapter.resume_keeps_id is False:
        return (
            f"{product(adapter)} answers a resumed run under a new id: continue with the {field} "
            "of the latest run (the summary's `next:` line), not the first one."
        )
    return (
        f"Whether {product(adapter)} keeps the id when resumed is not known: the result says "
        f"(`sessionChanged`), and the summary names the id to pass next."
    )


def read_only_hint(adapter) -> str:
    flag = first_flag(adapter, READ_ONLY_FLAGS)
    if flag:
        return f"`{flag}` for a run that must not edit (review, diagnosis),"
    return f"(no read-only mode: {product(adapter)} has none the relay can rely on),"


def brief_route(adapter) -> str:
    if adapter.brief_route:
        return adapter.brief_route
    binary = f"`{adapter.binary}`"
    routes = {
        "stdin": f"The relay pipes it to {binary} on standard input.",
        "argv": (
            f"The relay passes it to {binary} as one command-line argument (no shell), so "
            "it shows in the process list while the run lasts and its size is capped: "
            "keep secrets out of it."
        ),
        "file": f"The relay writes it into the run directory and points {binary} at that file.",
    }
    return routes.get(adapter.brief_via, routes["file"])


def read_only_line(adapter) -> str:
    if adapter.read_only_route:
        return adapter.read_only_route + "."
    refusal = (
        "refuses `--read-only`"
        if "--read-only" in _flag_names(adapter)
        else "offers no read-only switch"
    )
    return (
        f"none. {product(adapter)} has no mode the relay could trust to keep it from "
        f"writing, so the relay {refusal} and a lane with `readOnly` is refused."
    )


def tripwire(adapter) -> str:
    if not adapter.read_only_route:
        return _wrap(
            "The relay reports what it saw: `touchedFiles` is `git status --porcelain` after "
            "the run. Review the tree whatever it says."
        )
    return _wrap(
        "The relay reports what it saw: `touchedFiles` is `git status --porcelain` after the "
        "run, and a read-only run also gets `readOnlyViolation` (`true` a change git can see, "
        "`false` nothing changed, `null` git could not tell). That is a tripwire, not a wall: "
        "review the tree whatever it says."
    )


def dials_text(key: str) -> str:
    impl = registry.BY_KEY[key]
    if not impl.supports:
        return f"Lanes for `{key}` take no dials."
    lines = [f"Lanes for `{key}` may set: " + ", ".join(f"`{d}`" for d in impl.supports) + "."]
    samples = {"readOnly": True, "sandbox": None, "effort": "high"}
    for dial in impl.supports:
        sample = samples.get(dial)
        if sample is None:
            continue
        renamed = lanes.relay_dials(key, {dial: sample})
        if renamed != {dial: sample}:
            shown = ", ".join(f"`{k}: {json.dumps(v)}`" for k, v in renamed.items())
            lines.append(f"- `{dial}: {json.dumps(sample)}` reaches the relay as {shown}.")
    choices = {
        "effort": registry.EFFORT_CHOICES.get(key),
        "sandbox": registry.SANDBOX_CHOICES.get(key),
        "permissionMode": registry.PERMISSION_CHOICES.get(key),
    }
    for dial, values in choices.items():
        if dial in impl.supports and values:
            lines.append(f"- `{dial}` is one of: " + ", ".join(f"`{v}`" for v in values) + ".")
    return "\n".join(lines)


def results_text(adapter) -> str:
    lines = [
        "- `status`: `completed`, `failed`, `timeout`, `aborted`, or "
        f"`{adapter.unavailable_status}`.",
        "- exit code: 0 completed; 2 usage error (no result.json); 127 "
        f"`{adapter.binary}` not found; 124 its version check hung; 128+n a signal; "
        f"otherwise {product(adapter)}'s own code.",
        f"- `{adapter.version_field}`: what `{adapter.probe_name({})}` printed.",
        "- `finalMessage`: the implementer's report; `touchedFiles`: `git status --porcelain` "
        "after the run (`null` when git cannot say); `stderrTail` and `error` when it did not "
        "succeed.",
    ]
    resume = resume_flags(adapter)[0]
    if adapter.session_field and resume:
        lines.append(f"- `{adapter.session_field}`: the session to continue (`{resume} <id>`).")
    elif adapter.session_field:
        lines.append(
            f"- `{adapter.session_field}`: {product(adapter)}'s own session id, for reference "
            "(the relay cannot resume it)."
        )
    lines.append(
        f"- artifacts in the run directory: `{adapter.brief_name}`, "
        + _artifact_list(adapter)
        + "`result.json`."
    )
    return "\n".join(lines)


def _artifact_list(adapter) -> str:
    names = []
    if adapter.events_name:
        names.append(adapter.events_name)
    names.append("final.txt")
    if adapter.stderr_file:
        names.append("stderr.txt")
    return "".join(f"`{name}`, " for name in names)


def _about(adapter) -> str:
    return " ".join(adapter.about.split())


def _wrap(text: str, width: int = 78) -> str:
    words, lines, line = text.split(), [], ""
    for word in words:
        if line and len(line) + 1 + len(word) > width:
            lines.append(line)
            line = word
        else:
            line = f"{line} {word}" if line else word
    return "\n".join([*lines, line] if line else lines)


def description(adapter) -> str:
    display, binary, key = product(adapter), adapter.binary, adapter.key
    text = (
        f"Hand a coding task to {display} (the `{binary}` CLI) as a separate implementer, wait "
        "for its structured result, then review the diff and commit it yourself. Use when the "
        f'user wants work delegated, handed off or queued to {display} ("have {display} do it", '
        f'"run this through {binary}"), or when a fleet lane bound to {key} fits the task. Not for '
        "changes quicker to make directly, not for other implementers (each has its own "
        "*-delegate skill), and not for setting up lanes (delegate-setup)."
    )
    return _wrap(text).replace("\n", "\n  ")


def compatibility(adapter) -> str:
    text = (
        f"Needs the `{adapter.binary}` CLI installed and signed in ({adapter.impl.login}), "
        "git, and Python 3.10+ (standard library only: the scripts carry the code they run, "
        "nothing to pip-install). The orchestrating agent needs a shell tool and file reads."
    )
    return _wrap(text).replace("\n", "\n  ")


def implementer_values(adapter) -> dict[str, str]:
    return {
        "skill": adapter.impl.skill,
        "key": adapter.key,
        "display": product(adapter),
        "binary": adapter.binary,
        "version": __version__,
        "description": description(adapter),
        "compatibility": compatibility(adapter),
        "install": adapter.install_hint,
        "about": _wrap(_about(adapter)),
        "write_access": adapter.write_access,
        "read_only_line": read_only_line(adapter),
        "tripwire": tripwire(adapter),
        "read_only_hint": read_only_hint(adapter),
        "default_timeout": adapter.default_timeout or "off",
        "followup": followup(adapter),
        "quick_followup": quick_followup(adapter),
        "resume_identity": resume_identity(adapter),
        "flags_table": flags_table(adapter),
        "dials": dials_text(adapter.key),
        "results": results_text(adapter),
        "brief_route": _wrap(brief_route(adapter)),
        "brief_name": adapter.brief_name,
        "unavailable": adapter.unavailable_status,
    }


def implementer_skill(key: str) -> dict[str, str]:
    adapter = load_adapter(key)
    values = implementer_values(adapter)
    folder = f"skills/{adapter.impl.skill}"
    files = {f"{folder}/SKILL.md": render(read_template("implementer", "SKILL.md"), values)}
    for name in REFERENCES:
        files[f"{folder}/references/{name}"] = render(
            read_template("implementer", "references", name), values
        )
    return files


def implementer_table() -> str:
    rows = [
        "| implementer | binary | skill | dials | effort values |",
        "| --- | --- | --- | --- | --- |",
    ]
    for impl in registry.IMPLEMENTERS:
        effort = registry.EFFORT_CHOICES.get(impl.key)
        if "effort" not in impl.supports:
            effort_text = "—"
        elif effort:
            effort_text = ", ".join(effort)
        else:
            effort_text = "any bare token (letters, digits, `-`)"
        dials = ", ".join(f"`{d}`" for d in impl.supports)
        rows.append(f"| `{impl.key}` | `{impl.binary}` | {impl.skill} | {dials} | {effort_text} |")
    return "\n".join(rows)


def setup_skill() -> dict[str, str]:
    values = {"version": __version__, "implementer_table": implementer_table()}
    files = {"skills/delegate-setup/SKILL.md": render(read_template("setup", "SKILL.md"), values)}
    for name in SETUP_REFERENCES:
        files[f"skills/delegate-setup/references/{name}"] = render(
            read_template("setup", "references", name), values
        )
    return files


def skills_json(keys: list[str]) -> str:
    document = {
        "$schema": "https://skills.sh/schemas/skills.sh.schema.json",
        "groupings": [
            {
                "title": "Delegate to CLI agents",
                "description": (
                    "Hand a coding task to another CLI coding agent, then review its diff "
                    "and land it yourself."
                ),
                "skills": [registry.BY_KEY[key].skill for key in keys],
            },
            {
                "title": "Setup",
                "description": "Choose which implementer takes which kind of work: fleet lanes.",
                "skills": ["delegate-setup"],
            },
        ],
    }
    return json.dumps(document, indent=2) + "\n"


def readme_table(keys: list[str]) -> str:
    rows = [
        "| skill | implementer | binary | default write access | read-only run | resume |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for key in keys:
        adapter = load_adapter(key)
        read_only = adapter.read_only_route or "none"
        access = adapter.write_access
        resume = ", ".join(f"`{f}`" for f in resume_flags(adapter) if f) or "none"
        cells = [adapter.impl.skill, product(adapter), f"`{adapter.binary}`", _cell(access)]
        rows.append("| " + " | ".join([*cells, _cell(read_only), resume]) + " |")
    return "\n".join(rows)
