"""`delegate skills` as someone who knows the Skills CLI meets it.

The Skills CLI's agent names and short flags work; the project's git status
shows the lockfile (intent, to be committed) and never its lock file; every
fix a message names is a command that exists and does what it says; every
subcommand prints text on a terminal and JSON on a pipe or with --json.
"""

from __future__ import annotations

import json
import os
import pty
import re
import select
import shlex
import shutil
import subprocess
import time
from pathlib import Path

import pytest
from conftest import ROOT, Result
from skillskit import PYTHON, Machine, bundled_revision, one_error_line

from delegate_skills.commands import skills as skills_cli
from delegate_skills.installer import agents, bundle, lockfile

CODEX = "codex-delegate"
PI = "pi-delegate"
ALL_SKILLS = sorted(p.name for p in (ROOT / "skills").iterdir() if p.is_dir())

# The Skills CLI 1.7.4's agent table (dist/cli.mjs, `const agents`), with HOME
# as `~` and no XDG_CONFIG_HOME or per-agent home variable set.
SKILLS_CLI_AGENTS = [
    ("adal", "AdaL", ".adal/skills", "~/.adal/skills"),
    ("aider-desk", "AiderDesk", ".aider-desk/skills", "~/.aider-desk/skills"),
    ("amp", "Amp", ".agents/skills", "~/.config/agents/skills"),
    ("antigravity", "Antigravity", ".agents/skills", "~/.gemini/antigravity/skills"),
    ("antigravity-cli", "Antigravity CLI", ".agents/skills", "~/.gemini/antigravity-cli/skills"),
    ("astrbot", "AstrBot", "data/skills", "~/.astrbot/data/skills"),
    ("augment", "Augment", ".augment/skills", "~/.augment/skills"),
    ("autohand-code", "Autohand Code CLI", ".autohand/skills", "~/.autohand/skills"),
    ("bob", "IBM Bob", ".bob/skills", "~/.bob/skills"),
    ("claude-code", "Claude Code", ".claude/skills", "~/.claude/skills"),
    ("cline", "Cline", ".agents/skills", "~/.agents/skills"),
    ("codearts-agent", "CodeArts Agent", ".codeartsdoer/skills", "~/.codeartsdoer/skills"),
    ("codebuddy", "CodeBuddy", ".codebuddy/skills", "~/.codebuddy/skills"),
    ("codemaker", "Codemaker", ".codemaker/skills", "~/.codemaker/skills"),
    ("codestudio", "Code Studio", ".codestudio/skills", "~/.codestudio/skills"),
    ("codex", "Codex", ".agents/skills", "~/.agents/skills"),
    ("command-code", "Command Code", ".commandcode/skills", "~/.commandcode/skills"),
    ("continue", "Continue", ".continue/skills", "~/.continue/skills"),
    ("cortex", "Cortex Code", ".cortex/skills", "~/.snowflake/cortex/skills"),
    ("crush", "Crush", ".crush/skills", "~/.config/crush/skills"),
    ("cursor", "Cursor", ".agents/skills", "~/.cursor/skills"),
    ("deepagents", "Deep Agents", ".agents/skills", "~/.deepagents/agent/skills"),
    ("devin", "Devin for Terminal", ".devin/skills", "~/.config/devin/skills"),
    ("dexto", "Dexto", ".agents/skills", "~/.agents/skills"),
    ("droid", "Droid", ".agents/skills", "~/.factory/skills"),
    ("eve", "Eve", "agent/skills", None),
    ("firebender", "Firebender", ".agents/skills", "~/.firebender/skills"),
    ("forgecode", "ForgeCode", ".forge/skills", "~/.forge/skills"),
    ("fx", "fx", ".agents/skills", "~/.agents/skills"),
    ("gemini-cli", "Gemini CLI", ".agents/skills", "~/.gemini/skills"),
    ("github-copilot", "GitHub Copilot", ".agents/skills", "~/.copilot/skills"),
    ("goose", "Goose", ".goose/skills", "~/.config/goose/skills"),
    ("grok", "Grok Build", ".grok/skills", "~/.grok/skills"),
    ("hermes-agent", "Hermes Agent", ".hermes/skills", "~/.hermes/skills"),
    ("iflow-cli", "iFlow CLI", ".iflow/skills", "~/.iflow/skills"),
    ("inference-sh", "inference.sh", ".inferencesh/skills", "~/.inferencesh/skills"),
    ("jazz", "Jazz", ".jazz/skills", "~/.jazz/skills"),
    ("junie", "Junie", ".junie/skills", "~/.junie/skills"),
    ("kilo", "Kilo Code", ".agents/skills", "~/.kilo/skills"),
    ("kimchi", "Kimchi", ".kimchi/skills", "~/.config/kimchi/harness/skills"),
    ("kimi-code-cli", "Kimi Code CLI", ".agents/skills", "~/.agents/skills"),
    ("kiro-cli", "Kiro CLI", ".kiro/skills", "~/.kiro/skills"),
    ("kode", "Kode", ".kode/skills", "~/.kode/skills"),
    ("lingma", "Lingma", ".lingma/skills", "~/.lingma/skills"),
    ("loaf", "Loaf", ".agents/skills", "~/.agents/skills"),
    ("mcpjam", "MCPJam", ".mcpjam/skills", "~/.mcpjam/skills"),
    ("minimax-code", "MiniMax Code", ".minimax/skills", "~/.minimax/skills"),
    ("mistral-vibe", "Mistral Vibe", ".vibe/skills", "~/.vibe/skills"),
    ("moxby", "Moxby", ".moxby/skills", "~/.moxby/skills"),
    ("mux", "Mux", ".mux/skills", "~/.mux/skills"),
    ("neovate", "Neovate", ".neovate/skills", "~/.neovate/skills"),
    ("ona", "Ona", ".ona/skills", "~/.ona/skills"),
    ("openclaw", "OpenClaw", "skills", "~/.openclaw/skills"),
    ("opencode", "OpenCode", ".agents/skills", "~/.config/opencode/skills"),
    ("openhands", "OpenHands", ".openhands/skills", "~/.openhands/skills"),
    ("pi", "Pi", ".agents/skills", "~/.agents/skills"),
    ("pochi", "Pochi", ".pochi/skills", "~/.pochi/skills"),
    ("posit-assistant", "Posit Assistant", ".posit/assistant/skills", "~/.posit/assistant/skills"),
    ("promptscript", "PromptScript", ".agents/skills", None),
    ("qoder", "Qoder", ".qoder/skills", "~/.qoder/skills"),
    ("qoder-cn", "Qoder CN", ".qoder/skills", "~/.qoder-cn/skills"),
    ("qwen-code", "Qwen Code", ".qwen/skills", "~/.qwen/skills"),
    ("reasonix", "Reasonix", ".reasonix/skills", "~/.reasonix/skills"),
    ("replit", "Replit", ".agents/skills", "~/.config/agents/skills"),
    ("roo", "Roo Code", ".roo/skills", "~/.roo/skills"),
    ("rovodev", "Rovo Dev", ".rovodev/skills", "~/.rovodev/skills"),
    ("sarvam-code", "Sarvam Code", ".agents/skills", "~/.agents/skills"),
    ("tabnine-cli", "Tabnine CLI", ".tabnine/agent/skills", "~/.tabnine/agent/skills"),
    ("terramind", "Terramind", ".terramind/skills", "~/.terramind/skills"),
    ("tinycloud", "Tinycloud", ".tinycloud/skills", "~/.tinycloud/skills"),
    ("trae", "Trae", ".trae/skills", "~/.trae/skills"),
    ("trae-cn", "Trae CN", ".trae/skills", "~/.trae-cn/skills"),
    ("universal", "Universal", ".agents/skills", "~/.config/agents/skills"),
    ("warp", "Warp", ".agents/skills", "~/.agents/skills"),
    ("windsurf", "Windsurf", ".windsurf/skills", "~/.codeium/windsurf/skills"),
    ("zcode", "ZCode", ".zcode/skills", "~/.zcode/skills"),
    ("zed", "Zed", ".agents/skills", "~/.agents/skills"),
    ("zencoder", "Zencoder", ".zencoder/skills", "~/.zencoder/skills"),
    ("zenflow", "Zenflow", ".zencoder/skills", "~/.zencoder/skills"),
]
HOME_VARIABLES = (
    "XDG_CONFIG_HOME",
    "CLAUDE_CONFIG_DIR",
    "VIBE_HOME",
    "HERMES_HOME",
    "AUTOHAND_HOME",
    "GROK_HOME",
)


@pytest.fixture
def machine(tmp_path) -> Machine:
    return Machine(tmp_path / "m")


@pytest.fixture
def plain_home(tmp_path, monkeypatch) -> Path:
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    for name in HOME_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    return home


def revision_at(path: Path) -> str | None:
    return bundle.revision_or_none(str(path))


# ---------------------------------------------------------------- the agent table


def test_the_agent_table_is_the_skills_cli_one(plain_home):
    ours = [(r["name"], r["displayName"], r["projectDir"], r["globalDir"]) for r in agents.rows()]
    expected = [
        (name, display, project, where and where.replace("~", str(plain_home), 1))
        for name, display, project, where in SKILLS_CLI_AGENTS
    ]
    assert ours == expected
    assert agents.ALIASES == {
        "claude": "claude-code",
        "commandcode": "command-code",
        "copilot": "github-copilot",
        "kimi": "kimi-code-cli",
        "vibe": "mistral-vibe",
    }
    assert agents.DEFAULT_AGENT == "universal"


def test_global_directories_follow_the_same_variables(plain_home, tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", "   ")  # blank counts as unset
    monkeypatch.setenv("VIBE_HOME", str(tmp_path / "vibe"))
    monkeypatch.setenv("GROK_HOME", str(tmp_path / "grok"))
    where = {a: agents.target_dir(a, None) for a in agents.NAMES if agents.has_dir(a, None)}
    assert where["universal"] == str(tmp_path / "xdg" / "agents" / "skills")
    assert where["opencode"] == str(tmp_path / "xdg" / "opencode" / "skills")
    assert where["crush"] == str(plain_home / ".config" / "crush" / "skills")
    assert where["claude-code"] == str(plain_home / ".claude" / "skills")
    assert where["mistral-vibe"] == str(tmp_path / "vibe" / "skills")
    assert where["grok"] == str(tmp_path / "grok" / "skills")
    assert where["openclaw"] == str(plain_home / ".openclaw" / "skills")
    (plain_home / ".moltbot").mkdir()
    assert agents.target_dir("openclaw", None) == str(plain_home / ".moltbot" / "skills")
    (plain_home / ".clawdbot").mkdir()
    assert agents.target_dir("openclaw", None) == str(plain_home / ".clawdbot" / "skills")
    assert {"eve", "promptscript"} == {a for a in agents.NAMES if not agents.has_dir(a, None)}


@pytest.mark.parametrize(
    ("args", "spread"),
    [
        (["-a", "claude-code", "codex", CODEX], ["-a", "claude-code", "--agent", "codex", CODEX]),
        (["--agent=pi", "kimi", "-g"], ["--agent=pi", "--agent", "kimi", "-g"]),
        (["-acodex", "*"], ["-acodex", "--agent", "*"]),
        ([CODEX, "codex", "-a", "pi"], [CODEX, "codex", "-a", "pi"]),
        (["-a", "pi", "--", "codex"], ["-a", "pi", "--", "codex"]),
        (["--cwd", "codex", "-a", "pi", "warp"], ["--cwd", "codex", "-a", "pi", "--agent", "warp"]),
    ],
)
def test_several_agents_after_one_flag(args, spread):
    assert skills_cli.spread_agents(args) == spread


def test_skills_cli_flags_install_and_remove_globally(machine):
    machine.env["CLAUDE_CONFIG_DIR"] = str(machine.home / "claude")
    done = machine.ok("install", "-g", "-a", "claude-code", "qoder", "-s", CODEX, PI, "-y")
    assert done.json()["scope"] == "global"
    for skill in (CODEX, PI):
        for directory in (machine.home / "claude" / "skills", machine.home / ".qoder" / "skills"):
            assert revision_at(directory / skill) == bundled_revision(skill)
    lock = json.loads((machine.state_home / lockfile.GLOBAL_NAME).read_text())
    assert lock["skills"][CODEX]["targets"] == ["claude-code", "qoder"]
    assert not machine.lock.exists()

    machine.ok("uninstall", "-g", "-a", "qoder", "-s", CODEX, "-y")
    assert not (machine.home / ".qoder" / "skills" / CODEX).exists()
    assert (machine.home / ".qoder" / "skills" / PI).is_dir()
    lock = json.loads((machine.state_home / lockfile.GLOBAL_NAME).read_text())
    assert lock["skills"][CODEX]["targets"] == ["claude-code"]


def test_agent_names_aliases_and_every_agent(machine):
    machine.ok("install", "-a", "claude", "kimi", "grok", CODEX, "--copy")
    assert machine.lock_doc()["skills"][CODEX]["targets"] == [
        "claude-code",
        "grok",
        "kimi-code-cli",
    ]
    for folder in (".claude/skills", ".agents/skills", ".grok/skills"):
        assert revision_at(machine.project / folder / CODEX) == bundled_revision(CODEX)
    machine.ok("disable", CODEX, "-a", "kimi", "grok")
    assert not (machine.project / ".grok" / "skills" / CODEX).exists()
    assert json.loads(machine.state.read_text())["skills"][CODEX]["agents"] == {
        "grok": "off",
        "kimi-code-cli": "off",
    }

    machine.ok("install", "-s", "*", "-a", "warp")
    assert sorted(machine.lock_doc()["skills"]) == ALL_SKILLS

    every = machine.ok("install", PI, "-a", "*").json()
    assert set(machine.lock_doc()["skills"][PI]["targets"]) == set(agents.NAMES)
    places = {c["dir"] for c in every["changes"] if c["action"] != "recorded"}
    assert places == {a.project for a in agents.AGENTS.values()} - {".agents/skills"}


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (("install", "--link", "--copy"), "--link and --copy contradict each other"),
        (("install", "-g", "--scope", "project"), "-g/--global and --scope project contradict"),
        (("sync", "-g", "--scope", "project"), "-g/--global and --scope project contradict"),
    ],
)
def test_contradicting_flags_are_usage_errors(machine, args, needle):
    done = machine.skills(*args)
    assert done.code == 2 and needle in done.err and "Traceback" not in done.err, done


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (("install", "-a", "vim"), "unknown agent 'vim' (every name: `delegate skills agents`)"),
        (("install", "-g", "-a", "eve"), "eve has no global skills directory"),
    ],
)
def test_agent_errors_are_one_line(machine, args, needle):
    assert needle in one_error_line(machine.skills(*args))


# ---------------------------------------------------------------- what git sees


def porcelain(project: Path, env: dict) -> list[str]:
    done = subprocess.run(
        ["git", "status", "--porcelain", "--ignored", "--untracked-files=all"],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    return [line[3:] for line in done.stdout.splitlines()]


def test_git_status_shows_the_lockfile_and_never_its_lock(machine):
    project = machine.project
    machine.ok("install", CODEX, PI, "-a", "claude-code", "codex")
    machine.ok("disable", CODEX, "-a", "claude-code")
    machine.ok("enable", CODEX, "-a", "claude-code")
    machine.ok("uninstall", PI)
    machine.ok("sync")
    seen = porcelain(project, machine.env)
    assert ".agents/delegate-skills.lock.json" in seen
    assert [p for p in seen if p.endswith(".lock")] == []
    assert [p.name for p in project.rglob("*.lock") if ".git" not in p.parts] == []
    assert (
        project / ".git" / "delegate-skills" / ".agents" / "delegate-skills.lock.json.lock"
    ).exists()


def test_a_project_inside_a_repository_keeps_its_lock_in_the_git_dir(machine):
    app = machine.project / "packages" / "app"
    (app / ".agents").mkdir(parents=True)
    (app / ".agents" / lockfile.NAME).write_text('{"version": 1, "skills": {}}\n')
    done = machine.ok("install", CODEX, "-a", "claude-code", cwd=app).json()
    assert done["root"] == str(app)
    seen = porcelain(machine.project, machine.env)
    assert "packages/app/.agents/delegate-skills.lock.json" in seen
    assert [p for p in seen if p.endswith(".lock")] == []
    queue = machine.project / ".git" / "delegate-skills" / "packages" / "app" / ".agents"
    assert (queue / "delegate-skills.lock.json.lock").exists()


def test_a_project_outside_git_keeps_its_lock_in_the_state_home(machine, tmp_path):
    plain = tmp_path / "outside" / "plain"
    plain.mkdir(parents=True)
    machine.env["GIT_CEILING_DIRECTORIES"] = str(tmp_path / "outside")
    machine.ok("install", CODEX, "-a", "claude-code", "--cwd", str(plain))
    assert (plain / ".agents" / lockfile.NAME).is_file()
    assert [p for p in plain.rglob("*.lock")] == []
    assert len(list((machine.state_home / "locks").glob("*.lock"))) == 1


# ---------------------------------------------------------------- every fix works


def fix_command(text: str) -> list[str]:
    """The arguments of the one `delegate skills …` command a message names."""
    found = re.findall(r"`delegate skills ([^`]*)`", text)
    assert len(found) == 1, text
    return shlex.split(found[0])


def test_the_uninstall_fix_removes_the_changed_copy(machine):
    machine.ok("install", CODEX, "-a", "claude-code", "qoder")
    copy = machine.project / ".qoder" / "skills" / CODEX
    (copy / "SKILL.md").write_text("mine\n")
    left = machine.skills("uninstall", CODEX, "-a", "qoder")
    assert left.code == 2 and "rerun with --force to remove them" in left.err
    refused = left.json()["refused"]
    assert [r["reason"] for r in refused] == ["the copy was changed by hand"]
    args = fix_command(refused[0]["fix"])
    assert args == ["uninstall", CODEX, "--agent", "qoder", "--force", "--scope", "project"]
    machine.ok(*args)
    assert not copy.exists()
    assert machine.lock_doc()["skills"][CODEX]["targets"] == ["claude-code"]
    assert machine.skills("doctor").code == 0


def test_the_global_uninstall_fix_names_the_global_scope(machine):
    machine.ok("install", CODEX, "-g", "-a", "qoder")
    copy = machine.home / ".qoder" / "skills" / CODEX
    (copy / "SKILL.md").write_text("mine\n")
    fix = machine.skills("uninstall", "-g").json()["refused"][0]["fix"]
    machine.ok(*fix_command(fix))
    assert not copy.exists()


def test_the_install_fix_replaces_the_folder_in_the_way(machine):
    in_the_way = machine.project / ".claude" / "skills" / CODEX
    in_the_way.mkdir(parents=True)
    (in_the_way / "notes.txt").write_text("someone else's\n")
    left = machine.skills("install", CODEX, "-a", "claude-code", "--link")
    assert left.code == 2
    args = fix_command(left.json()["refused"][0]["fix"])
    assert args == [
        "install",
        CODEX,
        "--agent",
        "claude-code",
        "--link",
        "--force",
        "--scope",
        "project",
    ]
    machine.ok(*args)
    assert in_the_way.is_symlink()
    assert machine.skills("doctor").code == 0


def test_every_doctor_fix_clears_its_problem(machine):
    machine.ok("install", CODEX, "-a", "claude-code", "qoder", "codex")
    (machine.project / ".qoder" / "skills" / CODEX / "SKILL.md").write_text("mine too\n")
    assert machine.skills("disable", CODEX, "-a", "qoder").code == 1  # the changed copy stays
    (machine.project / ".claude" / "skills" / CODEX / "SKILL.md").write_text("mine\n")
    shutil.rmtree(machine.project / ".agents" / "skills" / CODEX)
    problems = machine.skills("doctor").json()["problems"]
    assert sorted((p["dir"], p["problem"]) for p in problems) == [
        (".agents/skills", "missing copy"),
        (".claude/skills", "modified copy"),
        (".qoder/skills", "modified copy present for disabled agent(s) qoder"),
    ]
    for problem in problems:
        fixed = machine.skills(*fix_command(problem["fix"]))
        assert fixed.code in (0, 1), fixed  # 1: another problem is still there
        after = machine.skills("doctor").json()["problems"]
        assert (problem["dir"], problem["problem"]) not in {(p["dir"], p["problem"]) for p in after}
    assert machine.skills("doctor").code == 0
    assert not (machine.project / ".qoder" / "skills" / CODEX).exists()


def test_every_command_a_message_names_exists():
    sources = [
        Path(skills_cli.__file__),
        Path(skills_cli.__file__).parents[1] / "installer" / "install.py",
        Path(skills_cli.__file__).parents[1] / "installer" / "agents.py",
        Path(skills_cli.__file__).parents[1] / "installer" / "views.py",
    ]
    named = set()
    for source in sources:
        named |= set(re.findall(r"delegate skills ([a-z-]+)", source.read_text()))
    assert named and named <= set(skills_cli.skills.commands), named


# ---------------------------------------------------------------- text or JSON


def on_a_terminal(machine: Machine, *args: str) -> Result:
    """Run `delegate skills` with its stdout on a pseudo-terminal."""
    leader, follower = pty.openpty()
    try:
        proc = subprocess.Popen(
            [PYTHON, "-m", "delegate_skills.commands.skills", *args],
            stdin=subprocess.DEVNULL,
            stdout=follower,
            stderr=subprocess.PIPE,
            env=machine.env,
            cwd=machine.project,
        )
    finally:
        os.close(follower)
    chunks = []
    deadline = time.monotonic() + 120
    try:
        while True:
            ready, _, _ = select.select([leader], [], [], max(0.0, deadline - time.monotonic()))
            if not ready:
                proc.kill()
                raise AssertionError(f"`delegate skills {' '.join(args)}` did not finish")
            try:
                chunk = os.read(leader, 65536)
            except OSError:  # EIO: every writer of the terminal is gone
                break
            if not chunk:
                break
            chunks.append(chunk)
    finally:
        os.close(leader)
    err = proc.stderr.read().decode()
    proc.stderr.close()
    proc.wait(timeout=60)
    out = b"".join(chunks).decode().replace("\r\n", "\n")
    return Result(subprocess.CompletedProcess(args, proc.returncode, out, err))


# Each subcommand in the order one session runs them, with the text it shows a person.
SESSION = [
    (("install", CODEX, "-a", "claude-code"), f"installed {CODEX}"),
    (("list",), "    claude-code      on   current   .claude/skills"),
    (("sync", "--dry-run"), f"would install {CODEX}"),
    (("disable", CODEX, "-a", "claude-code"), f"{CODEX}: off for claude-code"),
    (("enable", CODEX, "-a", "claude-code"), f"{CODEX}: on for claude-code"),
    (("doctor",), "skills: everything matches intent"),
    (("prune", "--dry-run"), "nothing to prune"),
    (("agents",), "claude-code       .claude/skills"),
    (("uninstall", CODEX), f"removed   {CODEX}"),
]


def test_every_subcommand_takes_json_and_is_in_the_session():
    assert {args[0] for args, _ in SESSION} == set(skills_cli.skills.commands)
    for name, command in skills_cli.skills.commands.items():
        assert any("--json" in p.opts for p in command.params), name


@pytest.mark.parametrize("where", ["pipe", "terminal", "terminal --json"])
def test_text_on_a_terminal_json_on_a_pipe_or_asked(machine, where):
    copy = machine.project / ".claude" / "skills" / CODEX
    for args, text in SESSION:
        if args[0] == "sync":
            shutil.rmtree(copy)
        if where == "pipe":
            done = machine.skills(*args)
        else:
            extra = ("--json",) if where.endswith("--json") else ()
            done = on_a_terminal(machine, *args, *extra)
        assert done.code == 0, (args, done)
        if where == "terminal":
            assert text in done.out, (args, done)
            with pytest.raises(ValueError):
                json.loads(done.out)
        else:
            assert isinstance(done.json(), dict), (args, done)
