"""The repository fingerprint (gitprint.RepoPrint) beyond the cases test_hostile_read_only runs.

- a git-dir file rewritten with its size and mtime put back still shows (ctime);
- an object replaced by another file of the same size shows (its inode);
- a walk past its budget is unverifiable, never a silent partial print.
"""

from __future__ import annotations

import os
import shutil

import pytest
from conftest import commit_all, git, make_repo
from relaykit import DETECT_ONLY, Bench

from delegate_skills.snapshots.gitprint import RepoPrint, RepoSpec, Unverifiable, Walker
from delegate_skills.snapshots.gitstate import Excluded


def test_a_git_dir_file_rewritten_with_its_mtime_put_back_is_true(tmp_path):
    bench = Bench(tmp_path, "codex")
    (bench.work / "tracked.txt").write_text("original\n")
    commit_all(bench.work)
    description = bench.work / ".git" / "description"
    same_size = description.read_text().swapcase()
    bench.script({"actions": [{"rewrite_keep_mtime": [".git/description", same_size]}]})
    run = bench.relay("--read-only", env=bench.fake.env(**DETECT_ONLY))
    assert run.code == 0, run
    assert description.read_text() == same_size
    assert run.result["readOnlyViolation"] is True, run.result
    assert run.result["readOnlyChanges"] == [".git/description"]


def test_an_object_replaced_by_a_same_size_file_is_a_change(tmp_path):
    repo = make_repo(tmp_path / "repo")
    (repo / "a.txt").write_text("a\n")
    commit_all(repo)
    git_dir = str(repo / ".git")
    spec = RepoSpec(str(repo), git_dir, git_dir)
    oid = git(repo, "rev-parse", "HEAD:a.txt")
    loose = repo / ".git" / "objects" / oid[:2] / oid[2:]
    before = RepoPrint(spec, Excluded([]))
    staged = loose.with_name("staged")
    shutil.copyfile(loose, staged)  # the same bytes in a new file, then swapped in
    os.replace(staged, loose)
    after = RepoPrint(spec, Excluded([]))
    assert (before.problem, after.problem) == (None, None)
    assert before.changes(after) == [f".git/objects/{oid[:2]}/{oid[2:]}"]


def test_a_walk_past_its_budget_is_unverifiable(tmp_path):
    top = tmp_path / "top"
    top.mkdir()
    for name in ("a", "b", "c"):
        (top / name).write_text(name)
    assert sorted(Walker(budget=3).walk(str(top), "top")) == ["top", "top/a", "top/b", "top/c"]
    with pytest.raises(Unverifiable) as raised:
        Walker(budget=2).walk(str(top), "top")
    assert str(raised.value) == "more than 2 entries to fingerprint"


def test_ignored_files_past_the_budget_are_null_even_without_a_folder(tmp_path):
    bench = Bench(tmp_path, "codex")
    (bench.work / ".gitignore").write_text("*.log\n")
    commit_all(bench.work)
    (bench.work / "a.log").write_text("a\n")
    (bench.work / "b.log").write_text("b\n")
    bench.script({})
    env = bench.fake.env(DELEGATE_RELAY_IGNORED_BUDGET="1", **DETECT_ONLY)
    run = bench.relay("--read-only", env=env)
    assert run.code == 0, run
    assert run.result["readOnlyViolation"] is None, run.result
    assert run.result["readOnlyUnverified"] == "more than 1 ignored files to fingerprint"
