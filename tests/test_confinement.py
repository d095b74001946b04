"""A confined implementer writes its work tree, its CLI's state and its own /tmp: nothing else.

Each run's fake implementer tries every write a hostile one would (through
a shell, as an agent's tool does) and notes which ones the file system let
through, in a file in its work tree. Where bubblewrap works the run is
confined (`confined: "bwrap"`); without it, or off Linux, the run goes on
unconfined and its result says why.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from conftest import commit_all, git, write_json
from relaykit import DETECT_ONLY, Bench


def _bwrap_problem() -> str | None:
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        return "bwrap is not installed here"
    done = subprocess.run(
        [bwrap, "--ro-bind", "/", "/", "--proc", "/proc", "--unshare-pid", "--", "true"],
        capture_output=True, text=True, timeout=30, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    return None if done.returncode == 0 else f"bwrap cannot start here: {done.stderr[:200]}"


NO_BWRAP = _bwrap_problem()
needs_bwrap = pytest.mark.skipif(NO_BWRAP is not None, reason=NO_BWRAP or "")


def probe(targets: dict[str, Path], report: str) -> dict:
    """A fake action: try to write each target, note `name ok|denied` lines in `report`."""
    lines = [f': > "{report}"']
    for name, path in targets.items():
        lines.append(
            f'(mkdir -p "{path.parent}" && echo x >> "{path}") 2>/dev/null '
            f'&& echo "{name} ok" >> "{report}" || echo "{name} denied" >> "{report}"'
        )
    script = "; ".join(lines)
    return {"git": ["-c", f"alias.probe=!{script}", "probe"]}


def outcomes(report: Path) -> dict[str, str]:
    return dict(line.split(" ", 1) for line in report.read_text().splitlines())


class World:
    """A source repository, a home with its secrets, the fleet config, an earlier run."""

    def __init__(self, tmp_path: Path) -> None:
        self.bench = Bench(tmp_path, "codex")
        self.repo = self.bench.work
        (self.repo / "a.txt").write_text("first\n")
        commit_all(self.repo, "start")
        self.home = tmp_path / "home"
        (self.home / ".ssh").mkdir(parents=True)
        (self.home / ".ssh" / "authorized_keys").write_text("mine\n")
        (self.home / ".codex").mkdir()
        self.config = self.home / ".config" / "delegate-skills" / "config.json"
        write_json(self.config, {"version": "delegate-fleet.v1", "lanes": {}})
        self.state = tmp_path / "state"
        self.other_run = tmp_path / "other-run"
        self.other_run.mkdir()
        (self.other_run / "result.json").write_text("{}\n")
        self.env = self.bench.fake.env(
            HOME=str(self.home), XDG_STATE_HOME=str(self.state),
            XDG_CONFIG_HOME=str(self.home / ".config"),
        )  # fmt: skip

    def targets(self, worktree: Path) -> dict[str, Path]:
        return {
            "worktree": worktree / "made.txt",
            "cli-state": self.home / ".codex" / "session.jsonl",
            "tmp": Path("/tmp") / f"delegate-probe-{self.home.parent.name}.txt",
            "source": self.repo / "evil.txt",
            "ssh": self.home / ".ssh" / "authorized_keys",
            "shell-startup": self.home / ".bashrc",
            "fleet-config": self.config,
            "state-dir": self.state / "delegate-skills" / "evil.txt",
            "other-run": self.other_run / "result.json",
            "hooks": self.repo / ".git" / "hooks" / "pre-commit",
        }


@pytest.fixture
def world(tmp_path, home) -> World:
    return World(tmp_path)


WRITABLE = {"worktree", "cli-state", "tmp"}


@needs_bwrap
def test_a_confined_worktree_run_writes_its_worktree_state_and_tmp_and_nothing_else(world):
    """The worktree's own path is only known once the run starts: the probe writes into the
    current folder (the worktree) and reports there."""
    targets = world.targets(Path("WORKTREE"))
    targets["worktree"] = Path("made.txt")
    world.bench.script({"actions": [probe(targets, "report.txt")]})
    run = world.bench.relay("--worktree", "--confine", env=world.env)
    assert run.code == 0, run
    result = run.result
    assert result["confined"] == "bwrap" and "confinedUnavailable" not in result
    tree = Path(result["worktree"]["path"])
    # What it could write, it wrote (its worktree and CLI state are ours to see after the run).
    report = outcomes(tree / "report.txt")
    assert {name: report[name] for name in WRITABLE} == dict.fromkeys(WRITABLE, "ok")
    assert (tree / "made.txt").read_text() == "x\n"
    assert (world.home / ".codex" / "session.jsonl").read_text() == "x\n"
    # Everything else is as it was. (Under /tmp, where these tests live, a write the sandbox
    # does not allow lands in the run's private /tmp, which is gone: the real file decides.)
    assert (world.home / ".ssh" / "authorized_keys").read_text() == "mine\n"
    assert not (world.home / ".bashrc").exists() and not (world.repo / "evil.txt").exists()
    assert json.loads(world.config.read_text()) == {"version": "delegate-fleet.v1", "lanes": {}}
    assert (world.other_run / "result.json").read_text() == "{}\n"
    assert not (world.repo / ".git" / "hooks" / "pre-commit").exists()
    assert git(world.repo, "status", "--porcelain") == ""
    assert not (world.state / "delegate-skills" / "evil.txt").exists()
    assert not targets["tmp"].exists()  # its /tmp was its own, and is gone
    assert sorted(e["path"] for e in result["changes"]["files"]) == ["made.txt", "report.txt"]


@needs_bwrap
def test_a_confined_run_in_place_may_commit_but_not_touch_hooks_or_config(world):
    repo = world.repo
    hook, config = repo / ".git" / "hooks" / "pre-commit", repo / ".git" / "config"
    before = config.read_bytes()
    script = (
        "echo change >> a.txt && git -c user.name=a -c user.email=a@example.invalid "
        "commit -qam run && echo committed > committed.txt; "
        f'(echo "#!/bin/sh" > "{hook}") 2>/dev/null || echo denied > hook.txt; '
        f'(echo "[core]" >> "{config}") 2>/dev/null || echo denied > config.txt'
    )
    world.bench.script({"actions": [{"git": ["-c", f"alias.go=!{script}", "go"]}]})
    run = world.bench.relay("--confine", env=world.env)
    assert run.code == 0, run
    assert run.result["confined"] == "bwrap"
    assert git(repo, "rev-list", "--count", "HEAD") == "2"
    assert (repo / "committed.txt").exists()
    assert (repo / "hook.txt").read_text() == (repo / "config.txt").read_text() == "denied\n"
    assert not hook.exists() and config.read_bytes() == before


def test_without_bubblewrap_a_confined_run_goes_on_and_says_why(world, tmp_path):
    tools = tmp_path / "tools"
    tools.mkdir()
    for tool in ("git", "sh", "true"):
        os.symlink(shutil.which(tool), tools / tool)
    env = {**world.env, "PATH": f"{world.bench.fake.bin}{os.pathsep}{tools}"}
    world.bench.script({"actions": [{"write": ["made.txt", "x\n"]}]})
    run = world.bench.relay("--confine", env=env)
    assert run.code == 0, run
    assert (run.result["confined"], run.result["confinedUnavailable"]) == (
        None, "bwrap is not on PATH (install Debian's or Ubuntu's bubblewrap package)"
    )  # fmt: skip
    switched_off = world.bench.relay("--confine", env={**world.env, **DETECT_ONLY})
    assert switched_off.result["confinedUnavailable"] == (
        "DELEGATE_RELAY_ENFORCE=0 turned enforcement off"
    )


def test_a_write_run_is_confined_only_when_asked(world):
    world.bench.script({})
    plain = world.bench.relay(env=world.env).result
    assert "confined" not in plain and "confinedUnavailable" not in plain
    world.bench.script({})
    asked = world.bench.relay(env={**world.env, "DELEGATE_CONFINE": "1", **DETECT_ONLY}).result
    assert asked["confined"] is None and "turned enforcement off" in asked["confinedUnavailable"]
    settings = world.home / ".config" / "delegate-skills" / "settings.json"
    write_json(settings, {"version": 1, "confine": True})
    world.bench.script({})
    by_setting = world.bench.relay(env={**world.env, **DETECT_ONLY}).result
    assert "confinedUnavailable" in by_setting
    world.bench.script({})
    declined = world.bench.relay("--no-confine", env={**world.env, **DETECT_ONLY}).result
    assert "confined" not in declined


def test_a_settings_file_of_another_version_is_refused_before_anything(world):
    settings = world.home / ".config" / "delegate-skills" / "settings.json"
    write_json(settings, {"version": 2, "confine": True})
    world.bench.script({})
    run = world.bench.relay(env=world.env)
    assert (run.code, run.err) == (2, (
        f"relay: {settings}: version 2 is not one this delegate-skills reads (version 1); "
        "fix the file or upgrade\n"
    ))  # fmt: skip
    assert world.bench.fake.calls() == [] and not world.bench.out.exists()


@needs_bwrap
def test_a_path_of_the_repository_made_writable_keeps_the_read_only_verdict_honest(world):
    """Enforced, a read-only run proves nothing changed by enforcement alone only while no part
    of the repository is writable to it; a path of it the user lets it write is watched."""
    notes = world.repo / ".git" / "notes-cache"
    notes.mkdir()
    env = {**world.env, "DELEGATE_CONFINE_WRITABLE": f"{world.env['DELEGATE_CONFINE_WRITABLE']}"
           f"{os.pathsep}{notes}"}  # fmt: skip
    world.bench.script({"actions": [{"write": [str(notes / "x"), "x\n"]}]})
    result = world.bench.relay("--read-only", env=env).result
    assert (result["readOnlyEnforced"], result["readOnlyViolation"]) == ("bwrap", True)
    assert result["readOnlyChanges"] == [".git/notes-cache/x"]
    world.bench.script({"actions": [{"write": ["made.txt", "x\n"]}]})
    blocked = world.bench.relay("--read-only", env=world.env).result
    assert (blocked["readOnlyEnforced"], blocked["readOnlyViolation"]) == ("bwrap", False)
    assert not (world.repo / "made.txt").exists()
