"""`delegate batch FILE`: several tasks, each with its own brief, in parallel worktrees."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import fleet_doc, write_json
from test_worktree import Source

from delegate_skills.commands.fanout import table


@pytest.fixture
def source(tmp_path, home) -> Source:
    return Source(tmp_path)


def _batch(source: Source, tmp_path: Path, tasks) -> tuple[int, dict, str]:
    plan = write_json(tmp_path / "plan" / "batch.json", {"tasks": tasks})
    done = source.delegate("batch", str(plan), "--cd", str(source.repo), "--json")
    return done.code, json.loads(done.out) if done.out.strip() else {}, done.err


def test_each_task_runs_its_own_brief_in_its_own_worktree(source, tmp_path):
    doc = write_json(tmp_path / "lanes.json", fleet_doc({"feature": {"implementer": "codex"}}))
    assert source.delegate("config", "write", "--scope", "project", "--cwd", str(source.repo),
                           str(doc)).code == 0  # fmt: skip
    (tmp_path / "plan").mkdir()
    (tmp_path / "plan" / "login.md").write_text("add the login page\n")
    (tmp_path / "plan" / "docs.md").write_text("write the docs\n")
    source.bench.script({"actions": [{"write": ["made.txt", "x\n"]}]})
    code, report, err = _batch(source, tmp_path, [
        {"brief": "login.md", "lane": "feature"},
        {"brief": "docs.md", "implementer": "codex", "timeout": "5m", "args": ["--model", "m1"]},
    ])  # fmt: skip
    assert code == 0, err
    rows = report["runs"]
    assert [(r["task"], r["lane"], r["implementer"], r["status"]) for r in rows] == [
        ("login", "feature", "codex", "completed"),
        ("docs", None, "codex", "completed"),
    ]
    briefs = [Path(r["outDir"], "brief.txt").read_text() for r in rows]
    assert briefs == ["add the login page\n", "write the docs\n"]
    docs_argv = json.loads(Path(rows[1]["outDir"], "result.json").read_text())["implementerArgv"]
    assert "m1" in docs_argv
    assert len({r["worktree"]["path"] for r in rows}) == 2
    assert source.status() == "?? .delegate/\n"  # the source is untouched
    lines = table(rows).splitlines()
    assert lines[0].split()[:4] == ["task", "lane", "implementer", "status"]
    assert [line.split()[:4] for line in lines[1:3]] == [
        ["login", "feature", "codex", "completed"],
        ["docs", "-", "codex", "completed"],
    ]


@pytest.mark.parametrize(
    ("tasks", "message"),
    [
        ([], 'needs "tasks", a non-empty list'),
        ([{"brief": "a.md"}], 'task 1: give "lane" or "implementer", one of them'),
        ([{"brief": "a.md", "implementer": "codex", "lane": "x"}],
         'task 1: give "lane" or "implementer", one of them'),
        ([{"brief": "nope.md", "implementer": "codex"}], "task 1: brief file not found: "),
        ([{"brief": "a.md", "implementer": "codx"}], "task 1: --implementer codx: unknown"),
        ([{"brief": "a.md", "implementer": "codex"}, {"brief": "a.md", "lane": "nope"}],
         "task 2: --lane nope: fleet lane not found"),
        ([{"brief": "a.md", "implementer": "codex", "args": ["--worktree"]}],
         "task 1: --worktree is set by the batch; leave it out of args"),
        ([{"brief": "a.md", "implementer": "codex", "timeout": "soon"}],
         'task 1: "timeout" must be an h/m/s duration such as 30m'),
        ([{"brief": "a.md", "implementer": "codex", "model": "x"}], "task 1: unknown field model"),
    ],
)  # fmt: skip
def test_a_bad_task_stops_the_batch_before_any_run(source, tmp_path, tasks, message):
    (tmp_path / "plan").mkdir()
    (tmp_path / "plan" / "a.md").write_text("a\n")
    source.bench.script({})
    code, _report, err = _batch(source, tmp_path, tasks)
    assert code == 2, err
    assert message in err, err
    assert err.count("\n") == 1  # one line
    assert source.worktrees() == [str(source.repo)]
    assert source.bench.fake.calls() == []


@pytest.mark.parametrize(
    ("second", "message"),
    [
        ({"args": ["--frobnicate"]}, "unknown option: --frobnicate"),
        ({"args": ["--model"]}, "--model requires a value"),
        ({"args": ["--timeout", "soon"]},
         '--timeout "soon" is invalid or too long; use a positive h/m/s duration no longer '
         "than about 24 days"),
        ({"args": ["--sandbox", "everything"]},
         'invalid --sandbox "everything" (expected: read-only, workspace-write, '
         "danger-full-access)"),
        ({"args": ["--setup", " "]}, "--setup needs a command"),
        ({"args": ["--help"]}, "--help prints the relay's help; leave it out of args"),
        ({"args": ["--out-dir", "elsewhere"]}, "--out-dir is set by the batch; leave it out of args"),
        ({"args": ["--cd", "elsewhere"]}, "--cd is set by the batch; leave it out of args"),
        ({"host": "-oProxyCommand=touch pwned"},
         "--host '-oProxyCommand=touch pwned' is not a host ssh can reach; give an alias from "
         "your ssh config or user@host"),
        ({"implementer": None, "lane": "unapproved"},
         "project fleet config is not trusted: <repo>/.delegate/config.json has not been "
         'approved yet; review it, then approve it: delegate config approve --cwd "<repo>"'),
    ],
)  # fmt: skip
def test_each_task_is_checked_as_its_relay_checks_it_before_any_run(
    source, tmp_path, second, message
):
    # A project lane nobody approved: listed, but no run may take it.
    write_json(source.repo / ".delegate" / "config.json",
               fleet_doc({"unapproved": {"implementer": "codex"}}))  # fmt: skip
    (tmp_path / "plan").mkdir()
    (tmp_path / "plan" / "a.md").write_text("a\n")
    (tmp_path / "plan" / "b.md").write_text("b\n")
    source.bench.script({})
    task = {"brief": "b.md", "implementer": "codex", **second}
    code, report, err = _batch(source, tmp_path, [
        {"brief": "a.md", "implementer": "codex"},
        {key: value for key, value in task.items() if value is not None},
    ])  # fmt: skip
    plan = tmp_path / "plan" / "batch.json"
    assert (code, report) == (2, {})
    message = message.replace("<repo>", str(source.repo))
    assert err == f"delegate: {plan}: task 2: {message} (brief b.md)\n"
    assert source.worktrees() == [str(source.repo)]
    assert source.bench.fake.calls() == []
    assert not (tmp_path / "delegate-relay").exists()


def test_the_batchs_own_check_is_checked_against_every_task(source, tmp_path):
    (tmp_path / "plan").mkdir()
    (tmp_path / "plan" / "a.md").write_text("a\n")
    (tmp_path / "plan" / "b.md").write_text("b\n")
    source.bench.script({})
    marker = tmp_path / "checked"
    plan = write_json(tmp_path / "plan" / "batch.json", {"tasks": [
        {"brief": "a.md", "implementer": "codex"},
        {"brief": "b.md", "implementer": "codex", "args": ["--read-only"]},
    ]})  # fmt: skip
    done = source.delegate(
        "batch", str(plan), "--cd", str(source.repo), "--check", f"touch {marker}", "--json"
    )
    assert done.code == 2, done
    assert done.err == (
        f"delegate: {plan}: task 2: --check runs a command that may write; a read-only run "
        "takes none (brief b.md)\n"
    )
    assert not marker.exists()
    assert source.bench.fake.calls() == []
    assert source.worktrees() == [str(source.repo)]


def test_a_tasks_check_in_the_file_runs_as_a_shell_command_and_help_says_so(source, tmp_path):
    (tmp_path / "plan").mkdir()
    (tmp_path / "plan" / "a.md").write_text("a\n")
    source.bench.script({"actions": [{"write": ["made.txt", "x\n"]}]})
    marker = tmp_path / "checked"
    code, report, err = _batch(source, tmp_path, [
        {"brief": "a.md", "implementer": "codex", "args": ["--check", f"echo ran > {marker}"]},
    ])  # fmt: skip
    assert code == 0, err
    assert marker.read_text() == "ran\n"
    assert [(row["status"], row["check"]["exitCode"]) for row in report["runs"]] == [
        ("completed", 0)
    ]
    shown = " ".join(source.delegate("batch", "--help").out.split())
    assert (
        "FILE is code: a task's --setup and --check in args run as shell commands, as this "
        "command's own do; run only a file you would run as a script." in shown
    )
