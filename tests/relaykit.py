"""Helpers for relay tests: the adapters under test and how to run them."""

from __future__ import annotations

import json
import signal
import subprocess
import time
from pathlib import Path

import pytest
from conftest import make_repo
from fakes import ROOT, Fake, RelayRun, relay, relay_argv, wait_for

from delegate_skills import registry
from delegate_skills.relay.main import load_adapter

#: Every implementer that has a relay adapter: new adapters join every matrix.
#: (Found by file, so one adapter that fails to import cannot hide the others;
#: test_every_adapter_loads catches that failure.)
RELAYS = [key for key in registry.KEYS if (ROOT / "relays" / f"{key}.py").is_file()]
#: Arguments a relay needs for a plain fresh run beyond --brief/--cd/--out-dir.
EXTRA_ARGS = {"opencode": ["--model", "fake/model"], "claude": ["--skip-preflight"]}
BRIEF = "smoke brief: run until killed.\n"
SHORT_GRACE = {"DELEGATE_RELAY_KILL_GRACE": "0.5"}
#: A read-only run proven by detection alone (no bubblewrap sandbox): the fake can write.
DETECT_ONLY = {"DELEGATE_RELAY_ENFORCE": "0"}


def binary(key: str) -> str:
    return registry.BY_KEY[key].binary


class Bench:
    """One relay under test: a work repo, a brief, an out dir and a fake CLI."""

    def __init__(self, tmp_path: Path, key: str, repo: bool = True) -> None:
        self.key = key
        self.tmp = tmp_path
        self.work = make_repo(tmp_path / "work") if repo else tmp_path / "work"
        self.work.mkdir(exist_ok=True)
        self.out = tmp_path / "out"
        self.brief = tmp_path / "brief.txt"
        self.brief.write_text(BRIEF)
        self.fake = Fake(tmp_path / "fake")
        self.fake.install(binary(key))

    def args(self, *extra: str, brief: bool = True, plain: bool = False) -> list[str]:
        base = ["--cd", str(self.work), "--out-dir", str(self.out)]
        if brief:
            base = ["--brief", str(self.brief), *base]
        needed = [] if plain else EXTRA_ARGS.get(self.key, [])
        return [*base, *needed, *extra]

    def script(self, run: dict | None = None, **scenario) -> None:
        self.fake.script({**scenario, "run": run or {}})

    def relay(
        self,
        *extra: str,
        env: dict | None = None,
        stdin: str | None = None,
        plain: bool = False,
        **kw,
    ) -> RelayRun:
        """Run the relay; `plain` leaves out the arguments a fresh run needs."""
        args = self.args(*extra, plain=plain, brief=stdin is None)
        return relay(
            self.key, *args, env=env or self.fake.env(), out_dir=self.out, stdin=stdin, **kw
        )

    def in_process(self, capfd, *extra: str) -> tuple[int, str, str]:
        """Run the relay in this process, for paths that end before anything is launched.

        Usage errors and --help never start a child, so they need no process of
        their own; returns (exit code, stdout, stderr).
        """
        from delegate_skills.relay.engine import Relay

        capfd.readouterr()
        code = Relay(adapter(self.key)).main(self.args(*extra))
        out, err = capfd.readouterr()
        return code, out, err

    def start(self, *extra: str, env: dict | None = None) -> subprocess.Popen:
        return subprocess.Popen(
            relay_argv(self.key, *self.args(*extra)),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env or self.fake.env(),
        )

    @property
    def result(self) -> dict:
        return json.loads((self.out / "result.json").read_text())

    def pid_file(self, name: str) -> Path:
        return self.tmp / name


def read_pid(path: Path) -> int:
    wait_for(lambda: path.exists() and path.read_text().strip() != "")
    return int(path.read_text())


def finish(proc: subprocess.Popen, timeout: float = 60) -> tuple[int, str, str]:
    out, err = proc.communicate(timeout=timeout)
    return proc.returncode, out.decode(), err.decode()


def signal_number(name: str) -> int:
    return int(getattr(signal, name))


def adapter(key: str):
    return load_adapter(key)


#: Every relay, written out; test_the_written_lists_name_every_relay checks RELAYS against it.
ALL_RELAYS = [
    "claude", "cline", "codex", "commandcode", "opencode", "agy", "grok", "kimi", "qoder",
    "vibe", "cursor", "pi", "omp", "aider", "copilot", "warp", "zcode", "gemini", "qwen",
    "auggie", "kilo", "hermes", "dsh",
]  # fmt: skip

#: Every value flag of every relay, in --help order, as the Node relays take them.
VALUE_FLAGS = {
    "claude": ["--brief", "--cd", "--lane", "--model", "--effort", "--max-turns",
               "--max-budget-usd", "--session", "--timeout", "--out-dir", "--host", "--continue", "--setup", "--check"],
    "cline": ["--brief", "--cd", "--lane", "--model", "--provider", "--auto-approve",
              "--timeout", "--out-dir", "--host", "--continue", "--setup", "--check"],
    "codex": ["--brief", "--cd", "--lane", "--model", "--effort", "--sandbox", "--session",
              "--keep-env", "--timeout", "--out-dir", "--host", "--continue", "--setup", "--check"],
    "commandcode": ["--brief", "--cd", "--lane", "--model", "--effort", "--max-turns",
                    "--session", "--keep-env", "--timeout", "--out-dir", "--host", "--continue", "--setup", "--check"],
    "opencode": ["--brief", "--cd", "--lane", "--model", "--agent", "--variant", "--session",
                 "--timeout", "--out-dir", "--host", "--continue", "--setup", "--check"],
    "agy": ["--brief", "--cd", "--lane", "--model", "--effort", "--project", "--conversation",
            "--print-timeout", "--add-dir", "--timeout", "--out-dir", "--host", "--continue", "--setup", "--check"],
    "grok": ["--brief", "--cd", "--lane", "--model", "--effort", "--max-turns", "--session",
             "--timeout", "--out-dir", "--host", "--continue", "--setup", "--check"],
    "kimi": ["--brief", "--cd", "--lane", "--model", "--session", "--add-dir", "--timeout",
             "--out-dir", "--host", "--continue", "--setup", "--check"],
    "qoder": ["--brief", "--cd", "--lane", "--model", "--context-window", "--resume",
              "--add-dir", "--permission-mode", "--timeout", "--out-dir", "--host", "--continue", "--setup", "--check"],
    "vibe": ["--brief", "--cd", "--lane", "--max-turns", "--max-price", "--max-tokens",
             "--session", "--enabled-tools", "--disabled-tools", "--timeout", "--out-dir", "--host", "--continue", "--setup", "--check"],
    "cursor": ["--brief", "--cd", "--lane", "--model", "--sandbox", "--session", "--add-dir",
               "--timeout", "--out-dir", "--host", "--continue", "--setup", "--check"],
    "pi": ["--brief", "--cd", "--lane", "--model", "--provider", "--session", "--timeout",
           "--out-dir", "--host", "--continue", "--setup", "--check"],
    "omp": ["--brief", "--cd", "--lane", "--model", "--provider", "--thinking", "--session",
            "--timeout", "--out-dir", "--host", "--continue", "--setup", "--check"],
    "aider": ["--brief", "--cd", "--lane", "--model", "--api-base", "--edit-format", "--file",
              "--read", "--history-file", "--timeout", "--out-dir", "--host", "--continue", "--setup", "--check"],
    "copilot": ["--brief", "--cd", "--lane", "--model", "--effort", "--session", "--timeout",
                "--out-dir", "--host", "--continue", "--setup", "--check"],
    "warp": ["--brief", "--cd", "--lane", "--model", "--profile", "--name", "--conversation",
             "--skill", "--mcp", "--timeout", "--out-dir", "--host", "--continue", "--setup", "--check"],
    "zcode": ["--brief", "--cd", "--lane", "--mode", "--disallowed-tools", "--session",
              "--zcode-path", "--timeout", "--out-dir", "--host", "--continue", "--setup", "--check"],
    "gemini": ["--brief", "--cd", "--lane", "--model", "--approval-mode", "--session",
               "--add-dir", "--timeout", "--out-dir", "--host", "--continue", "--setup", "--check"],
    "qwen": ["--brief", "--cd", "--lane", "--model", "--approval-mode", "--session",
             "--add-dir", "--openai-base-url", "--timeout", "--out-dir", "--host", "--continue", "--setup", "--check"],
    "auggie": ["--brief", "--cd", "--lane", "--model", "--session", "--max-turns",
               "--permission", "--timeout", "--out-dir", "--host", "--continue", "--setup", "--check"],
    "kilo": ["--brief", "--cd", "--lane", "--model", "--agent", "--variant", "--session",
             "--timeout", "--out-dir", "--host", "--continue", "--setup", "--check"],
    "hermes": ["--brief", "--cd", "--lane", "--model", "--provider", "--max-turns", "--session",
               "--timeout", "--out-dir", "--host", "--continue", "--setup", "--check"],
    "dsh": ["--brief", "--cd", "--lane", "--model", "--provider", "--permission-mode", "--patch",
            "--timeout", "--out-dir", "--host", "--continue", "--setup", "--check"],
}  # fmt: skip

#: Every switch (a flag without a value) of every relay, in --help order, as the
#: Node relays have them, but for this port's own: cursor's --force, the
#: --read-only that kimi refuses and qoder honours, and --worktree on every relay.
SWITCHES = {
    "claude": ["--resume-last", "--read-only", "--dangerously-skip-permissions", "--worktree", "--include-uncommitted", "--confine", "--no-confine", "--skip-preflight", "--dry-run"],
    "cline": ["--plan", "--worktree", "--include-uncommitted", "--confine", "--no-confine", "--skip-preflight", "--dry-run"],
    "codex": ["--read-only", "--resume-last", "--clean-env", "--skip-git-repo-check", "--worktree", "--include-uncommitted", "--confine", "--no-confine", "--skip-preflight", "--dry-run"],
    "commandcode": ["--read-only", "--tools-all", "--continue-last", "--clean-env", "--worktree", "--include-uncommitted", "--confine", "--no-confine", "--skip-preflight", "--dry-run"],
    "opencode": ["--read-only", "--auto", "--no-auto", "--resume-last", "--pure", "--worktree", "--include-uncommitted", "--confine", "--no-confine", "--skip-preflight", "--dry-run"],
    "agy": ["--new-project", "--resume-last", "--sandbox", "--read-only",
            "--dangerously-skip-permissions", "--worktree", "--include-uncommitted", "--confine", "--no-confine", "--skip-preflight", "--dry-run"],
    "grok": ["--read-only", "--full-access", "--resume-last", "--worktree", "--include-uncommitted", "--confine", "--no-confine", "--skip-preflight", "--dry-run"],
    "kimi": ["--resume-last", "--read-only", "--worktree", "--include-uncommitted", "--confine", "--no-confine", "--skip-preflight", "--dry-run"],
    "qoder": ["--resume-last", "--read-only", "--worktree", "--include-uncommitted", "--confine", "--no-confine", "--skip-preflight", "--dry-run"],
    "vibe": ["--resume-last", "--plan-only", "--full-access", "--worktree", "--include-uncommitted", "--confine", "--no-confine", "--skip-preflight", "--dry-run"],
    "cursor": ["--read-only", "--force", "--no-force", "--resume-last", "--worktree", "--include-uncommitted", "--confine", "--no-confine", "--skip-preflight", "--dry-run"],
    "pi": ["--resume-last", "--approve", "--read-only", "--worktree", "--include-uncommitted", "--confine", "--no-confine", "--skip-preflight", "--dry-run"],
    "omp": ["--resume-last", "--read-only", "--approve", "--worktree", "--include-uncommitted", "--confine", "--no-confine", "--skip-preflight", "--dry-run"],
    "aider": ["--architect", "--subtree-only", "--read-only", "--resume-last", "--worktree", "--include-uncommitted", "--confine", "--no-confine", "--skip-preflight", "--dry-run"],
    "copilot": ["--read-only", "--allow-all-tools", "--resume-last", "--worktree", "--include-uncommitted", "--confine", "--no-confine", "--skip-preflight", "--dry-run"],
    "warp": ["--no-snapshot", "--worktree", "--include-uncommitted", "--confine", "--no-confine", "--skip-preflight", "--dry-run"],
    "zcode": ["--read-only", "--resume-last", "--worktree", "--include-uncommitted", "--confine", "--no-confine", "--skip-preflight", "--dry-run"],
    "gemini": ["--read-only", "--resume-last", "--skip-trust", "--sandbox", "--worktree", "--include-uncommitted", "--confine", "--no-confine", "--skip-preflight", "--dry-run"],
    "qwen": ["--read-only", "--resume-last", "--worktree", "--include-uncommitted", "--confine", "--no-confine", "--skip-preflight", "--dry-run"],
    "auggie": ["--read-only", "--resume-last", "--worktree", "--include-uncommitted", "--confine", "--no-confine", "--skip-preflight", "--dry-run"],
    "kilo": ["--read-only", "--auto", "--no-auto", "--resume-last", "--pure", "--worktree", "--include-uncommitted", "--confine", "--no-confine", "--skip-preflight", "--dry-run"],
    "hermes": ["--read-only", "--resume-last", "--worktree", "--include-uncommitted", "--confine", "--no-confine", "--skip-preflight", "--dry-run"],
    "dsh": ["--read-only", "--worktree", "--include-uncommitted", "--confine", "--no-confine", "--skip-preflight", "--dry-run"],
}  # fmt: skip


def needs(flag: str) -> list[str]:
    """The relays that take `flag`, by the written tables above (never the adapters' own)."""
    return [key for key in ALL_RELAYS if flag in VALUE_FLAGS[key] or flag in SWITCHES[key]]


#: The flag that asks each relay for a read-only run, written out (vibe's and
#: cline's differ, as in the Node relays; qoder's is this port's own).
READ_ONLY_FLAG = {
    "claude": "--read-only", "cline": "--plan", "codex": "--read-only",
    "commandcode": "--read-only", "opencode": "--read-only", "agy": "--read-only",
    "grok": "--read-only", "qoder": "--read-only", "vibe": "--plan-only",
    "cursor": "--read-only", "pi": "--read-only", "omp": "--read-only",
    "aider": "--read-only", "copilot": "--read-only", "zcode": "--read-only",
    "gemini": "--read-only", "qwen": "--read-only", "auggie": "--read-only",
    "kilo": "--read-only", "hermes": "--read-only", "dsh": "--read-only",
}  # fmt: skip
#: The relays with no read-only route: kimi refuses --read-only, warp has none.
NO_READ_ONLY = ["kimi", "warp"]


def read_only_flag(key: str) -> str:
    return READ_ONLY_FLAG[key]


def read_only_relays() -> list[str]:
    """The relays with a read-only route, from the written table (never the adapters' answers)."""
    return list(READ_ONLY_FLAG)


def elapsed(start: float) -> float:
    return time.monotonic() - start


__all__ = ["RELAYS", "ROOT", "Bench", "pytest"]


def argv_of(bench: Bench, *flags: str, **kw) -> list[str]:
    """The argv the implementer got from a relay run that must succeed."""
    run = bench.relay(*flags, **kw)
    assert run.code == 0, run
    return bench.fake.calls("run")[-1]["argv"]
