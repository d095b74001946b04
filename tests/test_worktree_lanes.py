"""Approved project lanes work in --worktree runs and fanout, committed or not.

The approved bytes in the source are what count: a config written and
approved but never committed is not in the worktree, yet its lanes dispatch;
an edit after approval is refused whether or not it is committed.
"""

from __future__ import annotations

import json

import pytest
from conftest import delegate, fleet_doc, write_json
from test_worktree import BRIEF_EDIT, Source


@pytest.fixture
def source(tmp_path, home) -> Source:
    return Source(tmp_path)


def _approve_uncommitted(source: Source, lanes: dict) -> None:
    doc = write_json(source.repo.parent / "lanes.json", fleet_doc(lanes))
    done = source.delegate(
        "config", "write", "--scope", "project", "--cwd", str(source.repo), str(doc)
    )
    assert done.code == 0, done.err
    assert source.status() == "?? .delegate/\n"  # written and approved, not committed


def test_an_uncommitted_approved_lane_dispatches_in_a_worktree(source):
    _approve_uncommitted(source, {"quick": {"implementer": "codex", "timeout": "7m"}})
    source.bench.script({})
    run = source.relay("--worktree", "--lane", "quick")
    assert run.code == 0, run
    assert (run.result["status"], run.result["lane"], run.result["laneSource"]) == (
        "completed", "quick", "project"
    )  # fmt: skip
    assert source.bench.fake.run_call()["argv"][-1] == "-"  # it ran


def test_an_uncommitted_approved_lane_dispatches_in_fanout(source):
    _approve_uncommitted(
        source, {"fast": {"implementer": "codex"}, "slow": {"implementer": "codex"}}
    )
    source.bench.script(BRIEF_EDIT)
    done = source.delegate("fanout", "--brief", str(source.bench.brief), "--cd", str(source.repo),
                           "--lane", "fast", "--lane", "slow", "--json")  # fmt: skip
    assert done.code == 0, done.out + done.err  # the rows say why a run failed
    rows = json.loads(done.out)["runs"]
    assert [(r["lane"], r["status"]) for r in rows] == [
        ("fast", "completed"),
        ("slow", "completed"),
    ]


def test_an_uncommitted_edit_after_approval_is_refused_and_makes_no_worktree(source):
    _approve_uncommitted(source, {"quick": {"implementer": "codex", "timeout": "7m"}})
    config = source.repo / ".delegate" / "config.json"
    config.write_bytes(config.read_bytes().replace(b'"7m"', b'"8m"'))
    source.bench.script({})
    run = source.relay("--worktree", "--lane", "quick")
    assert run.code == 2, run
    assert "project fleet config is not trusted" in run.err
    assert source.worktrees() == [str(source.repo)]
    assert source.branches() == ["main"]


def test_fanout_shows_a_read_only_lane_that_wrote(source):
    from relaykit import DETECT_ONLY

    from delegate_skills.commands.fanout import table

    _approve_uncommitted(
        source,
        {"review": {"implementer": "codex", "readOnly": True}, "fix": {"implementer": "codex"}},
    )
    source.bench.script({"actions": [{"write": ["made.txt", "x\n"]}]})
    done = delegate("fanout", "--brief", str(source.bench.brief), "--cd", str(source.repo),
                    "--lane", "review", "--lane", "fix", "--json",
                    env={**source.env, **DETECT_ONLY})  # fmt: skip
    assert done.code == 1, done.err  # a read-only run wrote: the fanout is not clean
    rows = json.loads(done.out)["runs"]
    assert [(r["lane"], r["status"], r.get("readOnlyViolation", "absent")) for r in rows] == [
        ("review", "completed", True),
        ("fix", "completed", "absent"),
    ]
    lines = table(rows).splitlines()
    assert lines[0].split()[:4] == ["lane", "implementer", "status", "read-only"]
    assert [line.split()[:4] for line in lines[1:3]] == [
        ["review", "codex", "completed", "WROTE"],
        ["fix", "codex", "completed", "-"],
    ]
    assert "  a read-only run that changed files: see readOnlyChanges in its result" in lines
