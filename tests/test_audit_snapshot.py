"""Snapshot guarantees (snapshot.py) that the relay tests leave unexercised.

- index flags set *before* the run (assume-unchanged, skip-worktree) hide nothing;
- stat data is compared strictly even where the user set `core.checkStat=minimal`;
- untracked files past the budget leave no record, and the verdict says why;
- snapshots never write into the repository's own object store.
"""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import pytest
from conftest import commit_all, git, make_repo
from relaykit import DETECT_ONLY, Bench


def prepared(tmp_path: Path) -> Bench:
    bench = Bench(tmp_path, "codex")
    (bench.work / "tracked.txt").write_text("original\n")
    commit_all(bench.work)
    return bench


# git applies only the first of two flag options `update-index --stdin` is given:
# both flags must be cleared, each on its own (snapshot.clear_flags).
@pytest.mark.parametrize("flag", ["--assume-unchanged", "--skip-worktree"])
def test_an_index_flag_set_before_the_run_hides_no_edit(tmp_path, flag):
    bench = prepared(tmp_path)
    git(bench.work, "update-index", flag, "tracked.txt")
    bench.script({"actions": [{"write": ["tracked.txt", "changed!\n"]}]})
    run = bench.relay("--read-only", env=bench.fake.env(**DETECT_ONLY))
    assert run.code == 0, run
    result = run.result
    assert result["readOnlyViolation"] is True, result
    assert result["readOnlyChanges"] == ["tracked.txt"]
    assert [f["path"] for f in result["changes"]["files"]] == ["tracked.txt"]


def test_a_replaced_file_is_seen_under_check_stat_minimal(tmp_path):
    """Same size, mtime put back, replaced by a rename within one second of the original.

    Under `core.checkStat=minimal` git would compare only whole seconds and the
    size; the snapshot's strict settings compare the inode too.
    """
    from delegate_skills.snapshots.snapshot import Snapshotter

    for attempt in range(20):
        repo = make_repo(tmp_path / f"repo{attempt}")
        git(repo, "config", "core.checkStat", "minimal")
        path = repo / "f.txt"
        path.write_text("aaaa\n")
        old = time.time_ns() - 100 * 10**9  # well before the index: never racily clean
        os.utime(path, ns=(old, old))
        second = os.stat(path).st_ctime_ns // 10**9
        commit_all(repo, "start")
        scratch = tmp_path / f"scratch{attempt}"
        scratch.mkdir()
        git_dir = str(repo / ".git")
        snapshots = Snapshotter(str(repo), git_dir, git_dir, str(scratch))
        before = snapshots.take(first=True)
        staged = repo / "f.new"
        staged.write_text("bbbb\n")
        os.utime(staged, ns=(old, old))
        os.replace(staged, path)
        after = snapshots.take(first=False)
        if os.stat(path).st_ctime_ns // 10**9 == second:
            break  # the case minimal cannot see: every whole second is as it was
    else:
        pytest.fail("no attempt stayed within one second")
    assert before != after
    listed = snapshots.git().out("diff-tree", "-r", "--name-only", before, after)
    assert listed == b"f.txt\n"


def test_untracked_files_past_the_budget_leave_the_verdict_null(tmp_path):
    bench = prepared(tmp_path)
    (bench.work / "one.txt").write_text("1\n")
    (bench.work / "two.txt").write_text("2\n")
    bench.script({})
    env = bench.fake.env(DELEGATE_RELAY_SNAPSHOT_BUDGET="1:1048576", **DETECT_ONLY)
    run = bench.relay("--read-only", env=env)
    assert run.code == 0, run
    result = run.result
    why = (
        f"the untracked files in {bench.work} are more than a change record holds "
        "(1 files or 1 MiB); ignore or commit them"
    )
    assert result["readOnlyViolation"] is None, result
    assert result["readOnlyUnverified"] == why
    assert result["changes"] is None


def _store_bytes(repo: Path) -> int:
    total = 0
    for here, _dirs, files in os.walk(repo / ".git" / "objects"):
        total += sum(os.path.getsize(os.path.join(here, name)) for name in files)
    return total


def test_snapshots_never_grow_the_repositorys_object_store(tmp_path):
    bench = prepared(tmp_path)
    (bench.work / "dataset.bin").write_bytes(os.urandom(2 << 20))  # untracked, not ignored
    payload = os.urandom(1 << 20).hex()
    bench.script({"actions": [{"write": ["made.txt", payload]}]})
    before = _store_bytes(bench.work)
    run = bench.relay()
    assert run.code == 0, run
    assert [f["path"] for f in run.result["changes"]["files"]] == ["made.txt"]
    assert _store_bytes(bench.work) - before < 64 * 1024
    listed = subprocess.run(
        ["git", "-C", str(bench.work), "status", "--porcelain"],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    assert listed == "?? dataset.bin\n?? made.txt\n"
