"""`--setup` before the implementer in a new worktree, `--check` after it; fanout --attempts."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import delegate
from test_worktree import BRIEF_EDIT, Source

from delegate_skills.commands.fanout import table


@pytest.fixture
def source(tmp_path, home) -> Source:
    return Source(tmp_path)


def test_setup_prepares_the_worktree_and_is_not_part_of_the_change(source):
    (source.repo / ".env").write_text("TOKEN=local\n")  # untracked, so not in a new worktree
    source.bench.script(BRIEF_EDIT)
    setup = f"cp {source.repo}/.env .env && echo prepared"
    run = source.relay("--worktree", "--setup", setup)
    assert run.code == 0, run
    result = run.result
    assert (result["setup"]["command"], result["setup"]["exitCode"]) == (setup, 0)
    assert result["setup"]["tail"] == ["prepared"]
    worktree = Path(result["worktree"]["path"])
    assert (worktree / ".env").read_text() == "TOKEN=local\n"
    assert sorted(f["path"] for f in result["changes"]["files"]) == ["a.txt", "made.txt"]
    assert (source.bench.out / "setup.log").read_text() == "prepared\n"
    assert f"setup: {setup} passed (exit 0, " in run.out


def test_a_failing_setup_fails_the_run_and_keeps_the_worktree(source):
    source.bench.script(BRIEF_EDIT)
    run = source.relay("--worktree", "--setup", "echo no network >&2; exit 7")
    assert run.code == 1, run
    result = run.result
    path = result["worktree"]["path"]
    assert result["status"] == "failed"
    assert result["error"] == (
        f"--setup 'echo no network >&2; exit 7' exited 7; its output is in "
        f"{source.bench.out / 'setup.log'}; the worktree is kept for inspection at {path}"
    )
    assert result["setup"]["tail"] == ["no network"]
    assert Path(path).is_dir() and path in source.worktrees()
    assert source.bench.fake.calls("run") == []  # the implementer never started


def test_check_runs_after_the_implementer_and_reports_pass_or_fail(source):
    source.bench.script(BRIEF_EDIT)
    passing = source.relay("--worktree", "--check", "test -f made.txt && echo ok")
    assert passing.code == 0, passing
    check = passing.result["check"]
    assert (check["exitCode"], check["tail"]) == (0, ["ok"])
    assert isinstance(check["seconds"], float)
    failing = source.relay("--check", "echo 2 failed; exit 3", out=source.bench.tmp / "in-place")
    assert failing.code == 0, failing  # the check informs; the run itself completed
    assert failing.result["status"] == "completed"
    assert (failing.result["check"]["exitCode"], failing.result["check"]["tail"]) == (
        3,
        ["2 failed"],
    )
    assert "check: echo 2 failed; exit 3 FAILED (exit 3, " in failing.out


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--setup", "true"], "--setup runs in the run's new worktree; add --worktree"),
        (["--read-only", "--check", "true"],
         "--check runs a command that may write; a read-only run takes none"),
        (["--worktree", "--setup", " "], "--setup needs a command"),
    ],
)  # fmt: skip
def test_hooks_refused_where_they_do_not_belong(source, args, message):
    source.bench.script({})
    run = source.relay(*args)
    assert run.code == 2, run
    assert run.err.strip().splitlines()[-1] == f"relay: {message}"
    assert source.worktrees() == [str(source.repo)]


def test_fanout_attempts_with_setup_and_check(source):
    source.bench.script(BRIEF_EDIT)
    done = delegate(
        "fanout", "--brief", str(source.bench.brief), "--cd", str(source.repo),
        "--implementer", "codex", "--attempts", "2", "--setup", "echo ready",
        "--check", "test -f made.txt", "--json", env=source.env,
    )  # fmt: skip
    assert done.code == 0, done.err
    rows = json.loads(done.out)["runs"]
    assert [(r["task"], r["implementer"], r["status"], r["check"]["exitCode"]) for r in rows] == [
        ("#1", "codex", "completed", 0),
        ("#2", "codex", "completed", 0),
    ]
    assert len({r["worktree"]["path"] for r in rows}) == 2
    lines = table(rows).splitlines()
    assert lines[0].split()[:6] == ["task", "lane", "implementer", "status", "read-only", "check"]
    assert [line.split()[:6] for line in lines[1:3]] == [
        ["#1", "-", "codex", "completed", "-", "pass"],
        ["#2", "-", "codex", "completed", "-", "pass"],
    ]
