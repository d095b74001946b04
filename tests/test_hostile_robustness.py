"""No traceback and no leak: hostile configs and records, signals at awkward moments."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
from pathlib import Path

import pytest
from conftest import PYTHON, commit_all, fleet_doc, git, write_json
from fakes import relay_argv, wait_for
from relaykit import Bench, finish, read_pid

HUGE = "9" * 5000 + "m"


def delegate(*args: str, env: dict | None = None, cwd=None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [PYTHON, "-m", "delegate_skills.commands.cli", *args],
        capture_output=True, text=True, env=env, cwd=cwd, timeout=120,
    )  # fmt: skip


def one_line(done: subprocess.CompletedProcess) -> None:
    assert "Traceback" not in done.stderr, done.stderr
    assert done.stderr.count("\n") == 1, done.stderr


class Source:
    def __init__(self, tmp_path: Path) -> None:
        self.bench = Bench(tmp_path, "codex")
        self.repo = self.bench.work
        (self.repo / "a.txt").write_text("a\n")
        commit_all(self.repo)
        self.state = tmp_path / "state"
        self.env = self.bench.fake.env(XDG_STATE_HOME=str(self.state))

    def worktrees(self) -> list[str]:
        return [line for line in git(self.repo, "worktree", "list").splitlines() if line]

    def branches(self) -> list[str]:
        return git(self.repo, "branch", "--format=%(refname:short)").split()


@pytest.fixture
def source(tmp_path, home) -> Source:
    return Source(tmp_path)


def test_a_duration_of_thousands_of_digits_is_one_line_everywhere(source, global_config):
    doc = fleet_doc({"slow": {"implementer": "codex", "timeout": HUGE}})
    write_json(global_config, doc)
    project = write_json(source.repo.parent / "lanes.json", doc)
    env = source.env
    for args in (
        ["config", "load"],
        ["config", "validate", str(project)],
        ["lane", "list"],
        ["doctor"],
        ["runs", "wait", str(source.bench.out), "--timeout", HUGE],
        ["fanout", "--brief", str(source.bench.brief), "--implementer", "codex", "--timeout", HUGE],
    ):
        done = delegate(*args, env=env, cwd=source.repo)
        assert "Traceback" not in done.stderr, (args, done.stderr)
        assert done.returncode in (0, 1, 2), (args, done)
    run = subprocess.run(
        relay_argv("codex", *source.bench.args("--lane", "slow", "--worktree")),
        capture_output=True, text=True, env=env, stdin=subprocess.DEVNULL, timeout=120,
    )  # fmt: skip
    assert run.returncode == 2
    assert run.stderr == (
        f"relay: {global_config}: lane slow.timeout must be a positive h/m/s duration no "
        "longer than about 24 days (e.g. 30m)\n"
    )
    assert len(source.worktrees()) == 1 and source.branches() == ["main"]


def test_malformed_run_records_do_not_stop_runs_list(tmp_path, home):
    root = tmp_path / "runs"
    good, zoneless, numeric, garbage = (root / n for n in ("good", "zoneless", "numeric", "bad"))
    for folder in (good, zoneless, numeric, garbage):
        folder.mkdir(parents=True)
    marker = {"schema": "delegate-run.v1", "implementer": "codex", "pid": 1}
    write_json(good / "run.json", {**marker, "startedAt": "2026-01-01T00:00:00.000Z"})
    write_json(
        good / "result.json", {"status": "completed", "finishedAt": "2026-01-01T00:00:05.000Z"}
    )
    write_json(zoneless / "run.json", {**marker, "startedAt": "2026-01-01T00:00:00"})
    write_json(
        zoneless / "result.json", {"status": "failed", "finishedAt": "2026-01-01T00:00:02.000Z"}
    )
    write_json(numeric / "run.json", {**marker, "startedAt": 1234, "implementer": ["x"]})
    write_json(numeric / "result.json", {"status": "completed", "finishedAt": 99, "exitCode": "0"})
    (garbage / "run.json").write_text("[" * 100000)
    (garbage / "result.json").write_text('{"status": ')
    done = delegate("runs", "list", "--root", str(root), "--json")
    assert done.returncode == 0, done.stderr
    runs = json.loads(done.stdout)["runs"]
    listed = {Path(r["outDir"]).name: r for r in runs if Path(r["outDir"]).parent == root}
    # No relay recorded any of them: each is listed as foreign, nothing read from its files.
    assert {name: r["status"] for name, r in listed.items()} == {
        "good": "foreign", "zoneless": "foreign", "numeric": "foreign", "bad": "foreign"
    }  # fmt: skip
    assert {r["implementer"] for r in listed.values()} == {None}
    assert {r["elapsedSeconds"] for r in listed.values()} == {None}


def slow_git(tmp_path: Path, verb: str) -> tuple[Path, Path]:
    """A `git` first on PATH that stops in `git <verb>` until released; (shim dir, gate)."""
    shim = tmp_path / "shim"
    shim.mkdir()
    gate = tmp_path / "gate"
    real = shutil.which("git")
    (shim / "git").write_text(
        "#!/bin/sh\n"
        f'case " $* " in *" {verb} "*) touch {gate}.reached; '
        f"while [ ! -e {gate} ]; do sleep 0.05; done;; esac\n"
        f'exec {real} "$@"\n'
    )
    (shim / "git").chmod(0o755)
    return shim, gate


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_during_worktree_creation_ends_in_an_aborted_result(source, tmp_path, signum):
    shim, gate = slow_git(tmp_path, "worktree add")
    source.bench.script({})
    env = {**source.env, "PATH": f"{shim}{os.pathsep}{source.env['PATH']}"}
    proc = subprocess.Popen(
        relay_argv("codex", *source.bench.args("--worktree")),
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env,
    )  # fmt: skip
    try:
        wait_for(lambda: Path(f"{gate}.reached").exists())
        proc.send_signal(signum)
        gate.touch()
        code, _out, err = finish(proc)
    finally:
        gate.touch()
        proc.kill()
        proc.communicate()
    assert code == 128 + signum, err
    assert "Traceback" not in err
    result = source.bench.result
    assert result["status"] == "aborted"
    assert result["worktree"]["removed"] is True
    assert len(source.worktrees()) == 1 and source.branches() == ["main"]
    assert source.bench.fake.calls("run") == []


def test_discard_clears_what_a_killed_relay_left(source, tmp_path):
    source.bench.script({"actions": [{"pid_file": str(tmp_path / "child.pid")}, {"wait": "x"}]})
    proc = subprocess.Popen(
        relay_argv("codex", *source.bench.args("--worktree")),
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=source.env,
    )  # fmt: skip
    try:
        read_pid(tmp_path / "child.pid")
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    finally:
        proc.kill()
        proc.communicate()
    assert len(source.worktrees()) == 2
    done = delegate("runs", "discard", str(source.bench.out), "--json", env=source.env)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["deletedBranch"].startswith("delegate/")
    assert len(source.worktrees()) == 1 and source.branches() == ["main"]


def test_fanout_with_a_missing_implementer_leaves_no_worktree(source):
    env = {**source.env, "PATH": f"{Path(shutil.which('git')).parent}"}
    done = delegate(
        "fanout", "--brief", str(source.bench.brief), "--cd", str(source.repo),
        "--implementer", "codex", "--implementer", "claude", "--json", env=env,
    )  # fmt: skip
    rows = json.loads(done.stdout)["runs"]
    assert [r["status"] for r in rows] == ["codex_unavailable", "claude_unavailable"]
    assert len(source.worktrees()) == 1 and source.branches() == ["main"]


def test_an_mcp_argument_that_looks_like_help_is_an_error(tmp_path, home):
    pytest.importorskip("mcp")
    from delegate_skills.commands.mcp_server import CommandFailed, run_cli

    for args in (["runs", "show", "--json", "--", "--help"], ["config", "validate", "--", "-h"]):
        with pytest.raises(CommandFailed):
            run_cli(*args)
    from delegate_skills.commands import mcp_server

    with pytest.raises(CommandFailed, match="not a lane name"):
        mcp_server.start_relay("codex", "brief", str(tmp_path), "--help", [])
    with pytest.raises(CommandFailed, match="unknown implementer"):
        mcp_server.start_relay("--help", "brief", str(tmp_path), None, [])
