"""Fake implementer CLIs for discovery: small shell scripts with canned answers."""

from __future__ import annotations

import json
import os
from pathlib import Path

ESC = "\x1b"

# binary -> {argument string: (stdout, stderr, exit code)}; anything else exits 3.
ANSWERS: dict[str, dict[str, tuple[str, str, int]]] = {
    "claude": {
        "--version": ("2.1.0 (Claude Code)\n", "", 0),
        "auth status": ('{"loggedIn": true, "authMethod": "claude.ai"}\n', "", 0),
    },
    "codex": {
        "--version": ("codex-cli 0.50.0\n", "", 0),
        "login status": ("", "Logged in using ChatGPT\n", 0),
    },
    "cmd": {
        "--version": ("1.64.0\n", "", 0),
        "status": ("Not authenticated. Run cmd login.\n", "", 1),
        "--list-models": (
            "Anthropic\nanthropic/claude-sonnet-4  Claude Sonnet 4\nanthropic/claude-opus-4  Claude Opus 4\n"
            "OpenAI\nopenai/gpt-5  GPT-5\n3 models available\n",
            "",
            0,
        ),
    },
    "opencode": {
        "--version": ("1.18.33\n", "", 0),
        "auth list": (
            f"{ESC}[90m┌{ESC}[0m  Credentials\n{ESC}[32m●{ESC}[0m OpenAI {ESC}[90moauth{ESC}[0m\n",
            "",
            0,
        ),
        "models": ("opencode/grok\nopenai/gpt-5\n\nopenai/gpt-5\n", "", 0),
    },
    "agy": {
        "changelog": ("1.2.3: better plans\n- item\n", "", 0),
        "models": ("gemini-3-pro\ngemini-3-flash\n", "", 0),
    },
    "grok": {
        "version": ("", "unknown command\n", 2),
        "--version": ("grok 1.0.41\n", "", 0),
        "models": ("Available models\n* grok-code-fast-1 (default)\n* grok-4\n", "", 0),
    },
    "kimi": {
        "--version": ("kimi, version 1.3\n", "", 0),
        "provider list": ("moonshot  source=oauth  default\n", "", 0),
    },
    "cursor-agent": {
        "--version": ("2025.11.25-abc\n", "", 0),
        "status": ("Not logged in\n", "", 1),
        "models": (
            "Available models\n\nauto - Auto\ngpt-5 - OpenAI GPT-5\nsonnet-4.5 - Claude\nTip: use --model\n",
            "",
            0,
        ),
    },
    "pi": {
        "--version": ("1.6.0\n", "", 0),
        "--list-models": (
            "provider   model             context\nanthropic  claude-sonnet-4  200k\nopenai     gpt-5  400k\n",
            "",
            0,
        ),
    },
    "oz": {
        "--version": ("oz 0.9.1\n", "", 0),
        "whoami --output-format text": ("service_account:sa_123\n", "", 0),
    },
    "copilot": {"--version": ("GitHub Copilot CLI 1.0.102\n", "", 0)},
    "aider": {"--version": ("aider 0.86.2\n", "", 0)},
}


def _script(answers: dict[str, tuple[str, str, int]]) -> str:
    lines = ["#!/bin/sh", 'case "$*" in']
    for args, (out, err, code) in answers.items():
        lines.append(f"  {json.dumps(args)})")
        if out:
            lines.append(f"    printf '%s' {_sh(out)}")
        if err:
            lines.append(f"    printf '%s' {_sh(err)} >&2")
        lines.append(f"    exit {code};;")
    lines += ["esac", "exit 3", ""]
    return "\n".join(lines)


def _sh(text: str) -> str:
    return "'" + text.replace("'", "'\\''") + "'"


def install(bindir: Path, answers: dict | None = None) -> Path:
    bindir.mkdir(parents=True, exist_ok=True)
    for binary, table in (answers or ANSWERS).items():
        path = bindir / binary
        path.write_text(_script(table))
        path.chmod(0o755)
    return bindir


def codex_cache(home: Path, slugs: list[str]) -> None:
    cache = home / ".codex" / "models_cache.json"
    cache.parent.mkdir(parents=True, exist_ok=True)
    cache.write_text(json.dumps({"models": [{"slug": s} for s in slugs] + [{"name": "no slug"}]}))


def touch(path: Path, mtime: float, directory: bool = False) -> None:
    if directory:
        path.mkdir(parents=True, exist_ok=True)
    else:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("")
    os.utime(path, (mtime, mtime))


def session_store(home: Path) -> None:
    """A small session store for several CLIs with known counts and mtimes."""
    t = 1_790_000_000  # 2026-09-21T13:46:40Z
    touch(home / ".claude/projects/-repo-a/11111111-aaaa.jsonl", t + 10)
    touch(home / ".claude/projects/-repo-b/22222222-bbbb.jsonl", t + 50)
    touch(home / ".claude/projects/-repo-b/notes.txt", t + 99)
    touch(home / ".codex/sessions/2026/09/21/rollout-1.jsonl", t + 5)
    touch(home / ".codex/sessions/2026/09/22/rollout-2.jsonl", t + 7)
    touch(home / ".codex/sessions/2026/09/22/other.jsonl", t + 90)
    touch(
        home / ".grok/sessions/%2Frepo/0a1b2c3d-1111-4111-8111-111111111111", t + 1, directory=True
    )
    touch(home / ".grok/sessions/%2Frepo/0a1b2c3d-1111-4111-8111-111111111111/log.jsonl", t + 70)
    os.utime(home / ".grok/sessions/%2Frepo/0a1b2c3d-1111-4111-8111-111111111111", (t + 1, t + 1))
    touch(home / ".grok/sessions/%2Frepo/prompt_history.jsonl", t + 80)
    touch(home / ".kimi-code/sessions/wd_repo/session_1", t + 3, directory=True)
    touch(
        home / ".cursor/projects/repo/agent-transcripts/0a1b2c3d-2222-4222-8222-222222222222.txt",
        t + 4,
    )
    touch(
        home / ".cursor/projects/repo/agent-transcripts/0a1b2c3d-3333-4333-8333-333333333333",
        t + 6,
        directory=True,
    )
    (home / ".pi/agent/sessions").mkdir(parents=True)


# ---------------------------------------------------------------- recording fakes


def recording(
    bindir: Path,
    binary: str,
    log: Path,
    answers: dict[str, tuple[str, str, int]],
    work: float = 0.0,
    hang: tuple[str, ...] = (),
    hang_once: tuple[str, ...] = (),
    spin: tuple[str, ...] = (),
    spin_once: tuple[str, ...] = (),
) -> Path:
    """A fake CLI that logs each run in `log`: `<pid>.start` ("<ns> <args>"), `<pid>.end`.

    Each answer takes `work` seconds. An argument string in `hang` never
    answers (the run leaves a child `sleep` in its process group, logged as
    `<pid>.child`); one in `hang_once` hangs on its first run only. `spin` and
    `spin_once` are the same with a busy loop: a probe working, not waiting.
    """
    log.mkdir(parents=True, exist_ok=True)
    lines = [
        "#!/bin/sh",
        f"log={_sh(str(log))}",
        f'echo "$(date +%s%N) {binary} $*" > "$log/$$.start"',
        'case "$*" in',
    ]
    for number, (args, (out, err, code)) in enumerate(answers.items()):
        lines.append(f"  {json.dumps(args)})")
        if args in hang:
            lines.append('    sleep 600 & echo "$!" > "$log/$!.child"; exec sleep 600;;')
            continue
        if args in spin:
            lines.append("    while :; do :; done;;")
            continue
        if args in spin_once:
            lines.append(
                f'    mkdir "$log/once-{binary}-{number}" 2>/dev/null && while :; do :; done'
            )
        if args in hang_once:
            lines.append(f'    mkdir "$log/once-{binary}-{number}" 2>/dev/null && exec sleep 600')
        if work:
            lines.append(f"    sleep {work}")
        if out:
            lines.append(f"    printf '%s' {_sh(out)}")
        if err:
            lines.append(f"    printf '%s' {_sh(err)} >&2")
        lines.append(f'    date +%s%N > "$log/$$.end"; exit {code};;')
    lines += ["esac", 'date +%s%N > "$log/$$.end"', "exit 3", ""]
    bindir.mkdir(parents=True, exist_ok=True)
    path = bindir / binary
    path.write_text("\n".join(lines))
    path.chmod(0o755)
    return path


class Run:
    """One logged run of a recording fake."""

    def __init__(self, pid: int, start: int, end: int | None, argv: str) -> None:
        self.pid, self.start, self.end, self.argv = pid, start, end, argv

    def __repr__(self) -> str:
        return f"Run({self.argv!r}, {self.start}, {self.end})"


def runs(log: Path) -> list[Run]:
    found = []
    for start_file in log.glob("*.start"):
        stamp, argv = start_file.read_text().strip().split(" ", 1)
        end_file = start_file.with_suffix(".end")
        end = int(end_file.read_text()) if end_file.exists() else None
        found.append(Run(int(start_file.stem), int(stamp), end, argv))
    return sorted(found, key=lambda run: run.start)


def pids(log: Path) -> list[int]:
    """Every process a recording fake started: the runs and their children."""
    return [int(p.stem) for p in [*log.glob("*.start"), *log.glob("*.child")]]


def most_at_once(finished: list[Run]) -> int:
    """The largest number of the finished runs that were running at one moment."""
    events = sorted([(r.start, 1) for r in finished] + [(r.end, -1) for r in finished])
    most = now = 0
    for _, step in events:
        now += step
        most = max(most, now)
    return most
