"""The skill texts: their frontmatter, their files, and every command they show.

Each `delegate …` command, relay flag and script option a SKILL.md, a
reference page or the README shows must exist: the command's `--help`
succeeds and names the option, or the relay's flag table holds the flag.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from functools import cache
from pathlib import Path

import click
import pytest
from conftest import ROOT

from delegate_skills import __version__, registry
from delegate_skills.commands.cli import cli
from delegate_skills.relay.main import load_adapter

SKILLS = ROOT / "skills"
SKILL_DIRS = sorted(path for path in SKILLS.iterdir() if path.is_dir())
IMPLEMENTER_REFERENCES = (
    "writing-the-brief.md",
    "dispatch-and-poll.md",
    "review-and-land.md",
    "multi-task-queues.md",
)
SKILL_SCRIPT = r"(^|/)(relay|lane|config|discover|runs)\.py$"
SKILL_BY_FOLDER = {impl.skill: impl.key for impl in registry.IMPLEMENTERS}
#: Words that would say where the texts came from rather than what they do.
PROVENANCE = re.compile(r"\b(node|amelnagdy|port(ed)?|mirror(ed)?|upstream|original|\.mjs)\b", re.I)


# ------------------------------------------------------------------ frontmatter


def frontmatter(path: Path) -> dict:
    """The YAML subset our SKILL.md files use: scalars, `>-` folded blocks, one nested map."""
    text = path.read_text(encoding="utf-8")
    assert text.startswith("---\n"), f"{path}: no frontmatter"
    block = text[4 : text.index("\n---\n", 4)]
    fields: dict = {}
    parent: dict | None = None
    folded_key: str | None = None
    for line in block.split("\n"):
        indented = line.startswith("  ")
        if folded_key and indented:
            fields[folded_key] = f"{fields[folded_key]} {line.strip()}".strip()
            continue
        folded_key = None
        key, _, value = line.strip().partition(":")
        value = value.strip()
        if indented and parent is not None:
            parent[key] = value
        elif value == ">-":
            fields[key], folded_key, parent = "", key, None
        elif value == "":
            fields[key] = parent = {}
        else:
            fields[key], parent = value, None
    return fields


@pytest.mark.parametrize("folder", SKILL_DIRS, ids=lambda p: p.name)
def test_frontmatter(folder):
    meta = frontmatter(folder / "SKILL.md")
    assert meta["name"] == folder.name
    description = meta["description"]
    assert 0 < len(description) < 1024
    assert not PROVENANCE.search(description), description
    assert meta["compatibility"]
    assert meta["metadata"]["version"] == __version__
    assert meta["license"] == "MIT"


@pytest.mark.parametrize("skill", sorted(SKILL_BY_FOLDER), ids=str)
def test_implementer_description_triggers_on_its_own_cli_only(skill):
    key = SKILL_BY_FOLDER[skill]
    impl = registry.BY_KEY[key]
    meta = frontmatter(SKILLS / skill / "SKILL.md")
    assert f"`{impl.binary}`" in meta["description"]
    others = [other for other in registry.IMPLEMENTERS if other.key != key]
    for other in others:
        name = other.display.split(" (")[0]
        if name.lower() in impl.display.lower():
            continue  # "Pi" inside "Oh My Pi"
        assert not re.search(rf"\b{re.escape(name)}\b", meta["description"]), other.key
    assert impl.binary in meta["compatibility"] and impl.login in meta["compatibility"]


@pytest.mark.parametrize("skill", sorted(SKILL_BY_FOLDER), ids=str)
def test_implementer_skill_files(skill):
    folder = SKILLS / skill
    for name in IMPLEMENTER_REFERENCES:
        assert (folder / "references" / name).is_file(), name
    for name in ("relay.py", "lane.py", "config.py", "discover.py", "runs.py"):
        assert os.access(folder / "scripts" / name, os.X_OK), name


def test_setup_skill_files():
    folder = SKILLS / "delegate-setup"
    for name in ("schema.md", "setup-dialogue.md"):
        assert (folder / "references" / name).is_file(), name
    for name in ("lane.py", "config.py", "discover.py"):
        assert os.access(folder / "scripts" / name, os.X_OK), name
    assert not (folder / "scripts" / "relay.py").exists()


def test_skills_sh_json_lists_exactly_the_folders():
    document = json.loads((ROOT / "skills.sh.json").read_text())
    listed = [name for group in document["groupings"] for name in group["skills"]]
    assert sorted(listed) == [path.name for path in SKILL_DIRS]
    assert len(listed) == len(set(listed)) == 24


def markdown_files() -> list[Path]:
    return [*sorted(SKILLS.glob("*/**/*.md")), ROOT / "README.md"]


@pytest.mark.parametrize("path", markdown_files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_resolve(path):
    for target in re.findall(r"\]\(([^)#\s]+)\)", path.read_text(encoding="utf-8")):
        if "://" in target:
            continue
        assert (path.parent / target).exists(), target


# ------------------------------------------------------------ commands shown


def code_snippets(text: str) -> list[str]:
    """Every command-like piece of a Markdown text: code-block lines and inline code."""
    snippets = []
    blocks = re.findall(r"```[a-z]*\n(.*?)```", text, flags=re.S)
    for block in blocks:
        snippets += [line for line in block.split("\n") if line.strip()]
    prose = re.sub(r"```[a-z]*\n.*?```", "", text, flags=re.S)
    snippets += re.findall(r"`([^`\n]+)`", prose)
    return snippets


def commands(snippet: str) -> list[list[str]]:
    """Split a snippet into commands (on |, &&, ;, &) and each command into words."""
    snippet = snippet.split(" # ")[0].replace("…", "").replace("[options]", "")
    pieces = re.split(r"\s*(?:\|\||&&|[|;&])\s*", snippet)
    out = []
    for piece in pieces:
        try:
            words = shlex.split(piece)
        except ValueError:
            words = piece.split()
        if words:
            out.append(words)
    return out


def options_in(words: list[str]) -> list[str]:
    """The options among `words`: `--name` and `-x`, without a value after `=`."""
    found = []
    for word in words:
        if re.fullmatch(r"--?[A-Za-z][A-Za-z0-9-]*(=.*)?", word):
            found.append(word.split("=")[0])
        elif re.fullmatch(r"\[(--?[A-Za-z][A-Za-z0-9-]*).*\]?", word):
            found.append(re.match(r"\[(--?[A-Za-z][A-Za-z0-9-]*)", word).group(1))
    return found


@cache
def relay_flags(key: str) -> frozenset[str]:
    return frozenset(flag.name for flag in load_adapter(key).flag_table()) | {"-h", "--help"}


def click_command(words: list[str]) -> tuple[list[str], click.Command]:
    """The longest `delegate` command path that `words` start with."""
    command: click.Command = cli
    path: list[str] = []
    for word in words:
        if isinstance(command, click.Group) and word in command.commands:
            command = command.commands[word]
            path.append(word)
        else:
            break
    return path, command


def click_options(command: click.Command) -> set[str]:
    names = {"-h", "--help"}
    for param in command.params:
        names.update(param.opts)
        names.update(param.secondary_opts)
    return names


@cache
def script_help(script: str) -> str:
    folder = "delegate-setup" if script != "runs.py" else "codex-delegate"
    path = SKILLS / folder / "scripts" / script
    done = subprocess.run(
        [sys.executable, str(path), "--help"], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def shown_commands() -> list[tuple[str, str, list[str]]]:
    """(file, skill folder or "", words) for every command the texts show."""
    found = []
    for path in markdown_files():
        rel = path.relative_to(ROOT)
        skill = rel.parts[1] if rel.parts[0] == "skills" else ""
        for snippet in code_snippets(path.read_text(encoding="utf-8")):
            for words in commands(snippet):
                found.append((str(rel), skill, words))
    return found


def check_delegate(words: list[str]) -> None:
    path, command = click_command(words[1:])
    assert path, f"`delegate {words[1] if len(words) > 1 else ''}` is not a delegate command"
    runner_help = cli.main(
        args=[*path, "--help"], prog_name="delegate", standalone_mode=False
    )  # raises on an unknown path; prints the help
    assert runner_help in (None, 0)
    rest = words[1 + len(path) :]
    if isinstance(command, click.Group):
        assert not rest or rest[0].startswith("-"), f"no command {rest[0]!r} in {path}"
    if path == ["relay"]:
        key, flags = rest[0], options_in(rest[1:])
        if key == "KEY":  # the placeholder: a flag some relay takes
            known = frozenset().union(*(relay_flags(k) for k in registry.KEYS))
        else:
            assert key in registry.KEYS, key
            known = relay_flags(key)
        assert set(flags) <= known, (key, flags)
        return
    assert set(options_in(rest)) <= click_options(command), (path, rest)


def check_script(skill: str, words: list[str]) -> None:
    script_at = next(i for i, word in enumerate(words) if re.search(SKILL_SCRIPT, word))
    script = os.path.basename(words[script_at])
    owner = re.search(r"skills/([\w-]+)/scripts/", words[script_at])
    skill = owner.group(1) if owner else skill
    flags = options_in(words[script_at + 1 :])
    if script == "relay.py":
        # Without a skill to name the relay (prose about relay.py in general),
        # the flag must be one some relay takes.
        keys = [SKILL_BY_FOLDER[skill]] if skill in SKILL_BY_FOLDER else registry.KEYS
        known = frozenset().union(*(relay_flags(key) for key in keys))
        assert set(flags) <= known, (skill, flags)
        return
    text = script_help(script)
    for flag in flags:
        assert flag in text, (script, flag)
    verbs = [w for w in words[script_at + 1 :] if re.fullmatch(r"[a-z]+", w)][:1]
    for verb in verbs:
        assert verb in text, (script, verb)


def test_every_command_shown_exists(capsys):
    checked = {"delegate": 0, "script": 0, "flag": 0}
    for where, skill, words in shown_commands():
        try:
            if words == ["delegate"]:
                continue  # the tool's name in prose
            if words[0] == "delegate":
                check_delegate(words)
                checked["delegate"] += 1
            elif any(re.search(SKILL_SCRIPT, word) for word in words):
                check_script(skill, words)
                checked["script"] += 1
            elif skill in SKILL_BY_FOLDER and re.fullmatch(r"--?[A-Za-z][\w-]*", words[0]):
                # An option on its own, in an implementer skill's text: one of its relay's.
                key = SKILL_BY_FOLDER[skill]
                assert set(options_in(words)) <= relay_flags(key), (key, words)
                checked["flag"] += 1
        except (AssertionError, click.ClickException) as error:
            raise AssertionError(f"{where}: {' '.join(words)}: {error}") from None
    capsys.readouterr()
    # Each kind is really exercised, so a broken extractor cannot pass by finding nothing.
    assert checked["delegate"] > 40 and checked["script"] > 100 and checked["flag"] > 100


def code_blocks(text: str) -> list[str]:
    return re.findall(r"```[a-z]*\n(.*?)```", text, flags=re.S)


@pytest.mark.parametrize("folder", SKILL_DIRS, ids=lambda p: p.name)
def test_every_command_block_of_a_skill_runs_from_its_folder_alone(folder):
    """What an agent copies out of a skill needs that folder and Python, not an install."""
    texts = [folder / "SKILL.md", *sorted((folder / "references").glob("*.md"))]
    scripts_shown = 0
    for path in texts:
        for block in code_blocks(path.read_text(encoding="utf-8")):
            for line in block.split("\n"):
                for words in commands(line):
                    assert words[0] != "delegate", f"{path.name}: {line}"
                    for word in words:
                        shown = re.search(r"<skill-dir>/scripts/([\w.-]+)", word)
                        if shown:
                            scripts_shown += 1
                            assert (folder / "scripts" / shown.group(1)).is_file(), (path, word)
    assert scripts_shown >= 3


@pytest.mark.parametrize(
    "words",
    [
        ["delegate", "runs", "wiat", "x"],
        ["delegate", "relay", "codex", "--no-such-flag"],
        ["delegate", "lane", "set", "x", "--implementor", "codex"],
    ],
)
def test_a_drifted_command_is_caught(words):
    with pytest.raises(AssertionError):
        check_delegate(words)


def test_a_drifted_relay_flag_is_caught():
    with pytest.raises(AssertionError):
        check_script("codex-delegate", ["python3", "<skill-dir>/scripts/relay.py", "--sandboxx"])
    with pytest.raises(AssertionError):
        check_script("", ["python3", "skills/delegate-setup/scripts/lane.py", "resolve", "--lne"])
