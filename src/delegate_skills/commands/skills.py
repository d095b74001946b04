"""`delegate skills`: install the bundled skills into the coding agents people use.

Exit codes: 0 done; 1 something was left different from intent (sync,
enable and disable leave changed copies alone without --force; doctor found
a difference); 2 a usage error, a file we cannot read, or a refused write
(install or uninstall left a folder alone).
"""

from __future__ import annotations

import functools
import os
import sys

import click

from .. import jsjson
from ..errors import UserError
from ..installer import agents as agent_table
from .clirun import group_settings, help_if_bare, run_group

SCOPE_CHOICE = click.Choice(["global", "project"])

CWD_OPTION = click.option(
    "--cwd",
    type=click.Path(file_okay=False),
    default=None,
    help="Directory to start from (default: the current one).",
)
JSON_OPTION = click.option("--json", "as_json", is_flag=True, help="JSON even on a terminal.")


GLOBAL_OPTION = click.option(
    "-g", "--global", "global_", is_flag=True, help="Same as --scope global (the Skills CLI's -g)."
)
YES_OPTION = click.option(
    "-y",
    "--yes",
    is_flag=True,
    help="Accepted as the Skills CLI accepts it; nothing here asks for confirmation.",
)
SKILL_OPTION = click.option(
    "-s",
    "--skill",
    "skill_options",
    multiple=True,
    metavar="SKILL",
    help="A skill, as with the [SKILL]... arguments (`*`: every one). Repeatable.",
)


def _agent_option(help_text: str, required: bool = False):
    return click.option(
        "-a",
        "--agent",
        "agents",
        multiple=True,
        required=required,
        metavar="AGENT",
        help=f"{help_text} The Skills CLI's agent names (see `delegate skills agents`), "
        "`*` for every agent; repeatable, and `-a A B` takes both.",
    )


def _scope_option(default: str | None):
    help_text = f"Default: {default}." if default else "Default: every scope in use."
    return click.option("--scope", type=SCOPE_CHOICE, default=None, help=help_text)


def _scope(scope: str | None, global_: bool, default: str | None) -> str | None:
    """The scope asked for with --scope or -g/--global (which must not contradict)."""
    if global_:
        if scope == "project":
            raise click.UsageError("-g/--global and --scope project contradict each other")
        return "global"
    return scope or default


def _skills(names: tuple[str, ...], skill_options: tuple[str, ...]) -> list[str]:
    """The skills named as arguments and with -s/--skill; `*` (or none) means all of them."""
    chosen = [*names, *skill_options]
    return [] if "*" in chosen else chosen


def spread_agents(args: list[str]) -> list[str]:
    """`-a A B` as `-a A -a B`: the agent names that follow an agent flag's value.

    The Skills CLI takes every word after `-a` up to the next flag; here only
    words that are agent names are taken, so a skill after the agents stays a skill.
    """
    out: list[str] = []
    state = None  # "value": the next word is -a's value; "more": agent names may follow
    for index, word in enumerate(args):
        if word == "--":
            out.extend(args[index:])
            break
        if state == "value":
            out.append(word)
            state = "more"
            continue
        if state == "more" and not word.startswith("-") and agent_table.is_name(word):
            out += ["--agent", word]
            continue
        out.append(word)
        if word in ("-a", "--agent"):
            state = "value"
        elif word.startswith("--agent=") or (word.startswith("-a") and len(word) > 2):
            state = "more"
        else:
            state = None
    return out


class AgentsCommand(click.Command):
    """A subcommand whose -a/--agent reads several names after one flag, as the Skills CLI's."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        return super().parse_args(ctx, spread_agents(list(args)))


def _cwd(value: str | None) -> str:
    return os.path.abspath(value) if value else os.getcwd()


def _wants_json(as_json: bool) -> bool:
    return as_json or not sys.stdout.isatty()


def _short(revision: str | None) -> str:
    return revision[:19] if revision else "(none)"


def _user_errors(command):
    """A file-system error in a command becomes one line and exit 2, never a traceback."""

    @functools.wraps(command)
    def run(*args, **kwargs):
        try:
            return command(*args, **kwargs)
        except OSError as error:
            where = f"{error.filename}: " if error.filename else ""
            raise UserError(f"{where}{error.strerror or error}") from None

    return run


def _emit(document, text: str, as_json: bool) -> None:
    click.echo(jsjson.stringify(document, 2) if _wants_json(as_json) else text)


@click.group("skills", **group_settings())
def skills() -> None:
    """Install the bundled skills into your agents' skill directories, and keep them in line.

    Intent is recorded in a lockfile (per project: .agents/delegate-skills.lock.json;
    global installs: skills.lock.json in the state home) and, per machine, in
    state.json (agents switched off). Copies you changed by hand are never
    replaced without --force.
    """
    help_if_bare()


# ---------------------------------------------------------------- text


#: What a dry run says it would do, for each action a run reports as done.
WOULD = {
    "installed": "install",
    "updated": "update",
    "switched": "switch",
    "replaced": "replace",
    "removed": "remove",
    "left": "leave",
}


def report_text(document: dict) -> str:
    """One command's changes in one scope, for a person."""
    where = document["root"] or "global"
    dry = document["dryRun"]

    def verb(action: str) -> str:
        return f"{'would ' + WOULD.get(action, action):<13}" if dry else action

    lines = []
    for change in document["changes"]:
        if change["action"] == "recorded":
            lines.append(
                f"{'would record' if dry else 'recorded'} {change['skill']} at "
                f"{_short(change['to'])} (was {_short(change['from'])}) in {document['lockfile']}"
            )
        else:
            agents = ", ".join(change["agents"])
            lines.append(
                f"{verb(change['action']):<9} {change['skill']:<22} {change['dir']}  ({agents})"
            )
    for refused in document["refused"]:
        place = refused["dir"] or document["lockfile"]
        lines.append(
            f"{verb('left'):<9} {refused['skill']:<22} {place}  "
            f"{refused['reason']}; {refused['fix']}"
        )
    if not lines:
        lines.append("nothing to change")
    return "\n".join(f"[{where}] {line}" for line in lines)


def listing_text(document: dict) -> str:
    lines = []
    for scope in document["scopes"]:
        title = scope["root"] or "global"
        lines.append(f"{scope['scope']} {title}  ({scope['lockfile']})")
        if not scope["skills"]:
            lines.append("  nothing installed")
        for skill in scope["skills"]:
            if not skill["known"]:
                lines.append(f"  {skill['name']}  (not known to this version; kept as is)")
                continue
            stale = "" if skill["revision"] == skill["bundled"] else "  [stale revision]"
            lines.append(f"  {skill['name']}  {skill['mode']} {_short(skill['revision'])}{stale}")
            for row in skill["targets"]:
                if row["dir"] is None:
                    lines.append(f"    {row['agent']:<16} (unknown agent)")
                    continue
                intent = "on" if row["enabled"] else "off"
                lines.append(f"    {row['agent']:<16} {intent:<4} {row['disk']:<9} {row['dir']}")
    if not document["scopes"]:
        lines.append("nothing installed here (see: delegate skills install --help)")
    installed = {s["name"] for scope in document["scopes"] for s in scope["skills"]}
    for skill, agents in document["disabled"].items():
        note = "" if skill in installed else " (not installed)"
        lines.append(f"off on this machine: {skill}: {', '.join(agents)}{note}")
    return "\n".join(lines)


def doctor_text(document: dict) -> str:
    if document["ok"]:
        return "skills: everything matches intent"
    lines = []
    for problem in document["problems"]:
        where = problem["root"] or "global"
        place = f" {problem['dir']}" if problem["dir"] else ""
        lines.append(
            f"[{where}] {problem['skill']}{place}: {problem['problem']}; fix: {problem['fix']}"
        )
    return "\n".join(lines)


def _left_alone(document: dict, verb: str) -> None:
    refused = document["refused"]
    if refused:
        places = ", ".join(f"{r['dir']}/{r['skill']}" if r["dir"] else r["skill"] for r in refused)
        raise UserError(
            f"left {len(refused)} folder(s) alone: {places}; rerun with --force to {verb} them"
        )


# ---------------------------------------------------------------- commands


@skills.command("install", cls=AgentsCommand)
@_user_errors
@click.argument("names", nargs=-1, metavar="[SKILL]...")
@SKILL_OPTION
@_agent_option("Agent to install for (default: universal).")
@GLOBAL_OPTION
@_scope_option("project")
@click.option("--link", is_flag=True, help="Symlink the bundled folders instead of copying.")
@click.option("--copy", is_flag=True, help="Copy the bundled folders (the default).")
@click.option(
    "--force", is_flag=True, help="Replace changed copies and folders we did not install."
)
@YES_OPTION
@CWD_OPTION
@JSON_OPTION
def install_command(
    names: tuple[str, ...],
    skill_options: tuple[str, ...],
    agents: tuple[str, ...],
    global_: bool,
    scope: str | None,
    link: bool,
    copy: bool,
    force: bool,
    yes: bool,
    cwd: str | None,
    as_json: bool,
) -> None:
    """Copy (or link) bundled skills into the agents' skill directories (default: all).

    The Skills CLI's `add` flags work here too: `-g`, `-a AGENT...`, `-s SKILL...`,
    `-y`, `--copy`.
    """
    from ..installer import install

    if link and copy:
        raise click.UsageError("--link and --copy contradict each other")
    document = install.install(
        _cwd(cwd),
        _skills(names, skill_options),
        list(agents),
        _scope(scope, global_, "project"),
        link,
        force,
    ).document()
    _emit(document, report_text(document), as_json)
    _left_alone(document, "replace")


@skills.command("uninstall", cls=AgentsCommand)
@_user_errors
@click.argument("names", nargs=-1, metavar="[SKILL]...")
@SKILL_OPTION
@_agent_option("Agent to uninstall for (default: every agent it is installed for).")
@GLOBAL_OPTION
@_scope_option("project")
@click.option("--force", is_flag=True, help="Also remove copies changed by hand.")
@YES_OPTION
@CWD_OPTION
@JSON_OPTION
def uninstall_command(
    names: tuple[str, ...],
    skill_options: tuple[str, ...],
    agents: tuple[str, ...],
    global_: bool,
    scope: str | None,
    force: bool,
    yes: bool,
    cwd: str | None,
    as_json: bool,
) -> None:
    """Remove installed skills and their lockfile entries (default: every installed skill).

    The Skills CLI's `remove` flags work here too: `-g`, `-a AGENT...`, `-s SKILL...`, `-y`.
    """
    from ..installer import install

    document = install.uninstall(
        _cwd(cwd),
        _skills(names, skill_options),
        list(agents),
        _scope(scope, global_, "project"),
        force,
    ).document()
    _emit(document, report_text(document), as_json)
    _left_alone(document, "remove")


@skills.command("sync")
@_user_errors
@click.argument("names", nargs=-1, metavar="[SKILL]...")
@GLOBAL_OPTION
@_scope_option(None)
@click.option("--force", is_flag=True, help="Replace or remove copies changed by hand.")
@click.option("--dry-run", is_flag=True, help="Report what would change; change nothing.")
@CWD_OPTION
@JSON_OPTION
def sync_command(
    names: tuple[str, ...],
    global_: bool,
    scope: str | None,
    force: bool,
    dry_run: bool,
    cwd: str | None,
    as_json: bool,
) -> None:
    """Make the agents' directories match the lockfile and this machine's state."""
    from ..installer import install

    reports = install.sync(
        _cwd(cwd), _scope(scope, global_, None), list(names) or None, force, dry_run
    )
    documents = [r.document() for r in reports]
    text = "\n".join(report_text(d) for d in documents) or "no lockfile here or global"
    _emit({"scopes": documents}, text, as_json)
    sys.exit(1 if any(d["refused"] for d in documents) else 0)


def _switch(name: str, agents: tuple[str, ...], cwd: str | None, as_json: bool, on: bool):
    from ..installer import install

    document = install.set_enabled(_cwd(cwd), name, list(agents), on)
    word = "on" if on else "off"
    head = (
        f"{name}: {word} for {', '.join(document['changed'])}"
        if document["changed"]
        else f"{name}: already {word} for {', '.join(document['agents'])}"
    )
    text = "\n".join([head, *(report_text(d) for d in document["sync"])])
    _emit(document, text, as_json)
    sys.exit(1 if document["refused"] else 0)


@skills.command("enable", cls=AgentsCommand)
@_user_errors
@click.argument("name", metavar="SKILL")
@_agent_option("Agent to switch the skill back on for.", required=True)
@CWD_OPTION
@JSON_OPTION
def enable_command(name: str, agents: tuple[str, ...], cwd: str | None, as_json: bool) -> None:
    """Switch SKILL back on for agents on this machine, then install it where it belongs."""
    _switch(name, agents, cwd, as_json, True)


@skills.command("disable", cls=AgentsCommand)
@_user_errors
@click.argument("name", metavar="SKILL")
@_agent_option("Agent to switch the skill off for.", required=True)
@CWD_OPTION
@JSON_OPTION
def disable_command(name: str, agents: tuple[str, ...], cwd: str | None, as_json: bool) -> None:
    """Switch SKILL off for agents on this machine, then remove copies no agent reads."""
    _switch(name, agents, cwd, as_json, False)


@skills.command("list")
@_user_errors
@GLOBAL_OPTION
@_scope_option(None)
@CWD_OPTION
@JSON_OPTION
def list_command(global_: bool, scope: str | None, cwd: str | None, as_json: bool) -> None:
    """Show intent (lockfile, this machine's switches) and what is on disk, side by side."""
    from ..installer import views

    document = views.listing(_cwd(cwd), _scope(scope, global_, None))
    _emit(document, listing_text(document), as_json)


@skills.command("doctor")
@_user_errors
@GLOBAL_OPTION
@_scope_option(None)
@CWD_OPTION
@JSON_OPTION
def doctor_command(global_: bool, scope: str | None, cwd: str | None, as_json: bool) -> None:
    """Every difference between intent and disk, with its fix. Exit 1 when there is any."""
    from ..installer import views

    document = views.doctor(_cwd(cwd), _scope(scope, global_, None))
    _emit(document, doctor_text(document), as_json)
    sys.exit(0 if document["ok"] else 1)


@skills.command("prune")
@_user_errors
@click.option("--dry-run", is_flag=True, help="Report what would be dropped; change nothing.")
@CWD_OPTION
@JSON_OPTION
def prune_command(dry_run: bool, cwd: str | None, as_json: bool) -> None:
    """Forget switches of skills installed nowhere this machine knows (global or this project)."""
    from ..installer import install

    document = install.prune(_cwd(cwd), dry_run)
    verb = "would drop" if dry_run else "dropped"
    text = (
        f"{verb} {', '.join(document['dropped'])} from {document['state']}"
        if document["dropped"]
        else "nothing to prune"
    )
    _emit(document, text, as_json)


def agents_text(document: dict) -> str:
    lines = [f"{'AGENT':<17} {'PROJECT DIR':<25} GLOBAL DIR"]
    for row in document["agents"]:
        where = row["globalDir"] or "(none: per project only)"
        also = f"  (also: {', '.join(row['aliases'])})" if row["aliases"] else ""
        lines.append(f"{row['name']:<17} {row['projectDir']:<25} {where}{also}")
    lines.append(f"default: {document['default']}; agents sharing a directory share one copy")
    return "\n".join(lines)


@skills.command("agents")
@_user_errors
@JSON_OPTION
def agents_command(as_json: bool) -> None:
    """Every name --agent takes (the Skills CLI's), and where each agent reads skills."""
    document = {"default": agent_table.DEFAULT_AGENT, "agents": agent_table.rows()}
    _emit(document, agents_text(document), as_json)


def main(argv: list[str] | None = None) -> int:
    """Run `delegate skills` on its own: one line on stderr for every error a user can cause."""
    return run_group(skills, sys.argv[1:] if argv is None else argv, "delegate skills")


if __name__ == "__main__":
    sys.exit(main())
