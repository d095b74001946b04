"""`runs list`: a table for a person, filters by repository and status, and the new fields."""

from __future__ import annotations

import json
import os

import pytest
from conftest import commit_all, git
from test_worktree import BRIEF_EDIT, Source

from delegate_skills.commands.runs_cli import runs_table


@pytest.fixture
def source(tmp_path, home) -> Source:
    return Source(tmp_path)


def _listed(source: Source, *args: str) -> list[dict]:
    done = source.delegate("runs", "list", "--json", *args)
    assert done.code == 0, done
    return json.loads(done.out)["runs"]


def test_list_filters_by_repository_and_status_and_carries_the_new_fields(source, tmp_path):
    other = tmp_path / "other"
    other.mkdir()
    git(other, "init", "-q", "-b", "main")
    (other / "x.txt").write_text("x\n")
    commit_all(other, "other")
    source.bench.script(BRIEF_EDIT)
    mine = source.relay("--worktree", out=tmp_path / "mine")
    assert mine.code == 0, mine
    source.bench.script({"exit": 1})
    args = [
        "--brief",
        str(source.bench.brief),
        "--cd",
        str(other),
        "--out-dir",
        str(tmp_path / "o"),
    ]
    from fakes import relay

    theirs = relay("codex", *args, env=source.env, out_dir=tmp_path / "o")
    assert theirs.code == 1, theirs
    in_repo = _listed(source, "--repo", str(source.repo))
    assert [(r["outDir"], r["status"], r["landing"], r["repository"]) for r in in_repo] == [
        (str(tmp_path / "mine"), "completed", "pending", str(source.repo)),
    ]
    assert in_repo[0]["changes"] == {"filesChanged": 2, "linesAdded": 3, "linesRemoved": 0}
    failed = _listed(source, "--status", "failed")
    assert [(r["outDir"], r["repository"], r["landing"]) for r in failed] == [
        (str(tmp_path / "o"), str(other), None)
    ]
    assert _listed(source, "--status", "aborted") == []
    (source.repo / "sub").mkdir()
    assert _listed(source, "--repo", str(source.repo / "sub")) == in_repo  # any folder of it
    not_a_repo = source.delegate("runs", "list", "--repo", str(tmp_path / "o"))
    assert not_a_repo.code == 2
    assert "is not in a git repository" in not_a_repo.err


def test_the_table_a_person_reads():
    home = os.path.expanduser("~")
    rows = [
        {"id": "ab12cd34", "startedAt": None, "implementer": "codex", "lane": "feature",
         "status": "completed", "landing": "pending", "repository": f"{home}/src/app",
         "changes": {"filesChanged": 2, "linesAdded": 3, "linesRemoved": 1}},
        {"id": None, "startedAt": "not a time", "implementer": "claude", "lane": None,
         "status": "running", "landing": None, "repository": "/srv/repo", "changes": None},
    ]  # fmt: skip
    assert runs_table(rows).splitlines() == [
        "id        age  implementer      status     landing  repository  changes",
        "ab12cd34  ?    codex (feature)  completed  pending  ~/src/app   2 file(s) +3 -1",
        "-         ?    claude           running    -        /srv/repo   -",
    ]
