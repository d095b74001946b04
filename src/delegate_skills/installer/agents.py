"""Which agents read skills, and from where: the Skills CLI's agent table, as data.

The names, display names and directories are those of the Skills CLI
(`npx skills`, version 1.7.4), so an `--agent` that works there works here
and puts the skill in the same place. Each agent has a project directory
(relative to the project root) and a global directory (absolute, from the
environment and the home directory); two of them (eve, promptscript) have
no global one. Several agents read the same directory: a skill installed
there once serves all of them.

A few more names are accepted and stand for the Skills CLI's name (ALIASES):
the relay names of this package where the two differ.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from ..errors import UserError
from ..homes import config_home, home_dir

DEFAULT_AGENT = "universal"
SHARED_PROJECT_DIR = ".agents/skills"
ALL = "*"
LIST_HINT = "delegate skills agents"

GlobalDir = Callable[[], str] | None


@dataclass(frozen=True)
class Agent:
    name: str
    display: str
    project: str  # relative POSIX path under the project root
    global_dir: GlobalDir  # None: the agent reads skills per project only


def _home(path: str) -> Callable[[], str]:
    return lambda: os.path.join(home_dir(), *path.split("/"))


def _config(path: str) -> Callable[[], str]:
    return lambda: os.path.join(config_home(), *path.split("/"))


def _env_home(variable: str, default: str, below: str) -> Callable[[], str]:
    """`$variable` (blank counts as unset), else `~/default`; then `below` inside it."""

    def where() -> str:
        base = (os.environ.get(variable) or "").strip() or os.path.join(home_dir(), default)
        return os.path.join(base, below)

    return where


def _openclaw_global() -> str:
    """OpenClaw's folder under whichever of its former names exists, else ~/.openclaw."""
    for folder in (".openclaw", ".clawdbot", ".moltbot"):
        if os.path.exists(os.path.join(home_dir(), folder)):
            return os.path.join(home_dir(), folder, "skills")
    return os.path.join(home_dir(), ".openclaw", "skills")


_TABLE = (
    Agent("aider-desk", "AiderDesk", ".aider-desk/skills", _home(".aider-desk/skills")),
    Agent("amp", "Amp", ".agents/skills", _config("agents/skills")),
    Agent("antigravity", "Antigravity", ".agents/skills", _home(".gemini/antigravity/skills")),
    Agent(
        "antigravity-cli",
        "Antigravity CLI",
        ".agents/skills",
        _home(".gemini/antigravity-cli/skills"),
    ),
    Agent("astrbot", "AstrBot", "data/skills", _home(".astrbot/data/skills")),
    Agent(
        "autohand-code",
        "Autohand Code CLI",
        ".autohand/skills",
        _env_home("AUTOHAND_HOME", ".autohand", "skills"),
    ),
    Agent("augment", "Augment", ".augment/skills", _home(".augment/skills")),
    Agent("bob", "IBM Bob", ".bob/skills", _home(".bob/skills")),
    Agent(
        "claude-code",
        "Claude Code",
        ".claude/skills",
        _env_home("CLAUDE_CONFIG_DIR", ".claude", "skills"),
    ),
    Agent("openclaw", "OpenClaw", "skills", _openclaw_global),
    Agent("cline", "Cline", ".agents/skills", _home(".agents/skills")),
    Agent(
        "codearts-agent", "CodeArts Agent", ".codeartsdoer/skills", _home(".codeartsdoer/skills")
    ),
    Agent("codebuddy", "CodeBuddy", ".codebuddy/skills", _home(".codebuddy/skills")),
    Agent("codemaker", "Codemaker", ".codemaker/skills", _home(".codemaker/skills")),
    Agent("codestudio", "Code Studio", ".codestudio/skills", _home(".codestudio/skills")),
    Agent("codex", "Codex", ".agents/skills", _home(".agents/skills")),
    Agent("command-code", "Command Code", ".commandcode/skills", _home(".commandcode/skills")),
    Agent("continue", "Continue", ".continue/skills", _home(".continue/skills")),
    Agent("cortex", "Cortex Code", ".cortex/skills", _home(".snowflake/cortex/skills")),
    Agent("crush", "Crush", ".crush/skills", _home(".config/crush/skills")),
    Agent("cursor", "Cursor", ".agents/skills", _home(".cursor/skills")),
    Agent("deepagents", "Deep Agents", ".agents/skills", _home(".deepagents/agent/skills")),
    Agent("devin", "Devin for Terminal", ".devin/skills", _config("devin/skills")),
    Agent("dexto", "Dexto", ".agents/skills", _home(".agents/skills")),
    Agent("droid", "Droid", ".agents/skills", _home(".factory/skills")),
    Agent("eve", "Eve", "agent/skills", None),
    Agent("firebender", "Firebender", ".agents/skills", _home(".firebender/skills")),
    Agent("forgecode", "ForgeCode", ".forge/skills", _home(".forge/skills")),
    Agent("fx", "fx", ".agents/skills", _home(".agents/skills")),
    Agent("gemini-cli", "Gemini CLI", ".agents/skills", _home(".gemini/skills")),
    Agent("github-copilot", "GitHub Copilot", ".agents/skills", _home(".copilot/skills")),
    Agent("goose", "Goose", ".goose/skills", _config("goose/skills")),
    Agent("grok", "Grok Build", ".grok/skills", _env_home("GROK_HOME", ".grok", "skills")),
    Agent(
        "hermes-agent",
        "Hermes Agent",
        ".hermes/skills",
        _env_home("HERMES_HOME", ".hermes", "skills"),
    ),
    Agent("inference-sh", "inference.sh", ".inferencesh/skills", _home(".inferencesh/skills")),
    Agent("jazz", "Jazz", ".jazz/skills", _home(".jazz/skills")),
    Agent("junie", "Junie", ".junie/skills", _home(".junie/skills")),
    Agent("iflow-cli", "iFlow CLI", ".iflow/skills", _home(".iflow/skills")),
    Agent("kilo", "Kilo Code", ".agents/skills", _home(".kilo/skills")),
    Agent("kimchi", "Kimchi", ".kimchi/skills", _home(".config/kimchi/harness/skills")),
    Agent("kimi-code-cli", "Kimi Code CLI", ".agents/skills", _home(".agents/skills")),
    Agent("kiro-cli", "Kiro CLI", ".kiro/skills", _home(".kiro/skills")),
    Agent("kode", "Kode", ".kode/skills", _home(".kode/skills")),
    Agent("lingma", "Lingma", ".lingma/skills", _home(".lingma/skills")),
    Agent("loaf", "Loaf", ".agents/skills", _home(".agents/skills")),
    Agent("mcpjam", "MCPJam", ".mcpjam/skills", _home(".mcpjam/skills")),
    Agent("minimax-code", "MiniMax Code", ".minimax/skills", _home(".minimax/skills")),
    Agent(
        "mistral-vibe", "Mistral Vibe", ".vibe/skills", _env_home("VIBE_HOME", ".vibe", "skills")
    ),
    Agent("moxby", "Moxby", ".moxby/skills", _home(".moxby/skills")),
    Agent("mux", "Mux", ".mux/skills", _home(".mux/skills")),
    Agent("opencode", "OpenCode", ".agents/skills", _config("opencode/skills")),
    Agent("openhands", "OpenHands", ".openhands/skills", _home(".openhands/skills")),
    Agent("ona", "Ona", ".ona/skills", _home(".ona/skills")),
    Agent("pi", "Pi", ".agents/skills", _home(".agents/skills")),
    Agent(
        "posit-assistant",
        "Posit Assistant",
        ".posit/assistant/skills",
        _home(".posit/assistant/skills"),
    ),
    Agent("qoder", "Qoder", ".qoder/skills", _home(".qoder/skills")),
    Agent("qoder-cn", "Qoder CN", ".qoder/skills", _home(".qoder-cn/skills")),
    Agent("qwen-code", "Qwen Code", ".qwen/skills", _home(".qwen/skills")),
    Agent("replit", "Replit", ".agents/skills", _config("agents/skills")),
    Agent("reasonix", "Reasonix", ".reasonix/skills", _home(".reasonix/skills")),
    Agent("rovodev", "Rovo Dev", ".rovodev/skills", _home(".rovodev/skills")),
    Agent("roo", "Roo Code", ".roo/skills", _home(".roo/skills")),
    Agent("sarvam-code", "Sarvam Code", ".agents/skills", _home(".agents/skills")),
    Agent("tabnine-cli", "Tabnine CLI", ".tabnine/agent/skills", _home(".tabnine/agent/skills")),
    Agent("terramind", "Terramind", ".terramind/skills", _home(".terramind/skills")),
    Agent("tinycloud", "Tinycloud", ".tinycloud/skills", _home(".tinycloud/skills")),
    Agent("trae", "Trae", ".trae/skills", _home(".trae/skills")),
    Agent("trae-cn", "Trae CN", ".trae/skills", _home(".trae-cn/skills")),
    Agent("warp", "Warp", ".agents/skills", _home(".agents/skills")),
    Agent("windsurf", "Windsurf", ".windsurf/skills", _home(".codeium/windsurf/skills")),
    Agent("zed", "Zed", ".agents/skills", _home(".agents/skills")),
    Agent("zcode", "ZCode", ".zcode/skills", _home(".zcode/skills")),
    Agent("zencoder", "Zencoder", ".zencoder/skills", _home(".zencoder/skills")),
    Agent("zenflow", "Zenflow", ".zencoder/skills", _home(".zencoder/skills")),
    Agent("neovate", "Neovate", ".neovate/skills", _home(".neovate/skills")),
    Agent("pochi", "Pochi", ".pochi/skills", _home(".pochi/skills")),
    Agent("promptscript", "PromptScript", ".agents/skills", None),
    Agent("adal", "AdaL", ".adal/skills", _home(".adal/skills")),
    Agent("universal", "Universal", ".agents/skills", _config("agents/skills")),
)

AGENTS: dict[str, Agent] = {agent.name: agent for agent in _TABLE}
NAMES: tuple[str, ...] = tuple(sorted(AGENTS))

#: Other names accepted for an agent (never written to a lockfile or state).
ALIASES: dict[str, str] = {
    "claude": "claude-code",
    "commandcode": "command-code",
    "copilot": "github-copilot",
    "kimi": "kimi-code-cli",
    "vibe": "mistral-vibe",
}


def is_known(agent: str) -> bool:
    return agent in AGENTS


def is_name(word: str) -> bool:
    """Whether `word` names an agent (or every agent) on a command line."""
    return word == ALL or word in AGENTS or word in ALIASES


def has_dir(agent: str, root: str | None) -> bool:
    """Whether `agent` reads skills in that scope (a project `root`, or None for global)."""
    return agent in AGENTS and (root is not None or AGENTS[agent].global_dir is not None)


def check_names(agents: Iterable[str], global_scope: bool | None = None) -> list[str]:
    """The agents' names, aliases resolved, deduplicated and sorted.

    `*` stands for every agent; an unknown name is a UserError. With
    `global_scope` True, every agent must have a global directory and `*`
    means every agent that has one.
    """
    chosen: set[str] = set()
    for word in agents:
        if word == ALL:
            chosen |= {a for a in AGENTS if not global_scope or has_dir(a, None)}
            continue
        name = ALIASES.get(word, word)
        if name not in AGENTS:
            raise UserError(f"unknown agent {word!r} (every name: `{LIST_HINT}`)")
        if global_scope and not has_dir(name, None):
            raise UserError(
                f"{name} has no global skills directory; leave out -g/--scope global "
                "to install it for the project"
            )
        chosen.add(name)
    return sorted(chosen)


def target_dir(agent: str, root: str | None) -> str:
    """Where `agent` reads skills: under project `root`, or globally when root is None."""
    entry = AGENTS[agent]
    if root is None:
        if entry.global_dir is None:
            raise UserError(f"{agent} has no global skills directory")
        return os.path.normpath(os.path.abspath(entry.global_dir()))
    return os.path.normpath(os.path.join(root, *entry.project.split("/")))


def group_by_dir(agents: Iterable[str], root: str | None) -> dict[str, list[str]]:
    """Agents that read skills in this scope, grouped by directory, directories sorted."""
    groups: dict[str, list[str]] = {}
    for agent in sorted(set(agents)):
        if has_dir(agent, root):
            groups.setdefault(target_dir(agent, root), []).append(agent)
    return dict(sorted(groups.items()))


def rows() -> list[dict]:
    """The table for people and scripts: every agent, its directories, its aliases."""
    aliases: dict[str, list[str]] = {}
    for alias, name in sorted(ALIASES.items()):
        aliases.setdefault(name, []).append(alias)
    out = []
    for name in NAMES:
        entry = AGENTS[name]
        out.append(
            {
                "name": name,
                "displayName": entry.display,
                "projectDir": entry.project,
                "globalDir": target_dir(name, None) if entry.global_dir else None,
                "aliases": aliases.get(name, []),
            }
        )
    return out
