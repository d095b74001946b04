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
