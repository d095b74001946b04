"""Fail before dispatch, not after: what is already known stops a run that would fail."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

from conftest import PYTHON, commit_all, make_repo
from discoverkit import install
from fakes import relay
from relaykit import Bench

SIGNED_OUT = {
    "codex": {
        "--version": ("codex-cli 0.50.0\n", "", 0),
        "login status": ("", "Not logged in\n", 1),
    }
}


def delegate(*args: str, env: dict) -> subprocess.CompletedProcess:
    return subprocess.run(
        [PYTHON, "-m", "delegate_skills.commands.cli", *args],
        capture_output=True, text=True, env=env, timeout=120,
    )  # fmt: skip


def test_a_cli_discover_saw_signed_out_is_not_dispatched(tmp_path, home):
    bindir = install(tmp_path / "bin", SIGNED_OUT)
    env = {**os.environ, "PATH": f"{bindir}{os.pathsep}{os.environ['PATH']}",
           "XDG_CACHE_HOME": str(tmp_path / "cache")}  # fmt: skip
    seen = delegate("discover", "codex", "--json", env=env)
    assert seen.returncode == 0, seen.stderr
    (entry,) = json.loads(seen.stdout)["discovered"]
    assert entry["authenticated"] is False
    repo = make_repo(tmp_path / "repo")
    commit_all(repo)
    brief = tmp_path / "brief.txt"
    brief.write_text("do it\n")
    out = tmp_path / "out"
    run = relay("codex", "--brief", str(brief), "--cd", str(repo), "--out-dir", str(out),
                env=env, out_dir=out)  # fmt: skip
    assert run.code == 1
    result = run.result
    assert result["status"] == "failed"
    assert result["error"].startswith("Codex is signed out (delegate discover saw so at ")
    assert result["error"].endswith(
        "); sign it in (codex login), or pass --skip-preflight to dispatch anyway"
    )
    assert result["implementerArgv"] is None  # never launched
    assert result["codexVersion"] is None  # not even asked for its version
    out2 = tmp_path / "out2"
    forced = relay("codex", "--brief", str(brief), "--cd", str(repo), "--out-dir", str(out2),
                   "--skip-preflight", env=env, out_dir=out2)  # fmt: skip
    assert forced.result["implementerArgv"] is not None  # dispatched (the fake then fails)
    assert "signed out" not in (forced.result.get("error") or "")


def test_a_changed_sign_in_file_lets_the_run_through(tmp_path, home):
    bindir = install(tmp_path / "bin", SIGNED_OUT)
    env = {**os.environ, "PATH": f"{bindir}{os.pathsep}{os.environ['PATH']}",
           "XDG_CACHE_HOME": str(tmp_path / "cache")}  # fmt: skip
    assert delegate("discover", "codex", "--json", env=env).returncode == 0
    (home / ".codex").mkdir()
    (home / ".codex" / "auth.json").write_text("{}")  # signed in since
    repo = make_repo(tmp_path / "repo")
    commit_all(repo)
    brief = tmp_path / "brief.txt"
    brief.write_text("do it\n")
    out = tmp_path / "out"
    run = relay("codex", "--brief", str(brief), "--cd", str(repo), "--out-dir", str(out),
                env=env, out_dir=out)  # fmt: skip
    assert run.result["implementerArgv"] is not None


def path_without(tmp_path: Path, *hidden: str) -> str:
    """A PATH with git and sh and nothing else from the machine (the fake comes first)."""
    tools = tmp_path / "tools"
    tools.mkdir()
    for tool in ("git", "sh", "cat", "true"):
        found = shutil.which(tool)
        if found and tool not in hidden:
            os.symlink(found, tools / tool)
    return str(tools)


def test_claude_write_runs_need_bubblewrap_and_socat(tmp_path):
    bench = Bench(tmp_path, "claude")
    bench.script({})
    (bench.fake.bin / "socat").unlink()  # the fake's stand-in: this machine has neither tool
    env = {**bench.fake.env(), "PATH": f"{bench.fake.bin}{os.pathsep}{path_without(tmp_path)}"}
    run = bench.relay(env=env, plain=True)
    assert run.code == 1
    assert run.result["error"] == (
        "Claude Code's shell sandbox needs bwrap and socat, not found on PATH: install them "
        "(Debian/Ubuntu: sudo apt-get install bubblewrap socat), or pass --skip-preflight to "
        "dispatch anyway"
    )
    assert bench.fake.calls() == []
    assert run.err.endswith(run.result["error"] + "\n")
    read_only = bench.relay("--read-only", env=env, plain=True)  # no shell sandbox there
    assert read_only.result["implementerArgv"] is not None
    forced = bench.relay("--skip-preflight", env=env, plain=True)
    assert forced.result["implementerArgv"] is not None


def test_a_worktree_run_stopped_by_the_check_leaves_no_worktree(tmp_path, home):
    bench = Bench(tmp_path, "claude")
    (bench.work / "a.txt").write_text("a\n")
    commit_all(bench.work)
    env = {**bench.fake.env(XDG_STATE_HOME=str(tmp_path / "state")),
           "PATH": f"{bench.fake.bin}{os.pathsep}{path_without(tmp_path)}"}  # fmt: skip
    run = bench.relay("--worktree", env=env, plain=True)
    assert run.code == 1
    assert run.result["worktree"]["removed"] is True
    listed = subprocess.run(["git", "-C", str(bench.work), "worktree", "list"],
                            capture_output=True, text=True).stdout  # fmt: skip
    assert len(listed.splitlines()) == 1
