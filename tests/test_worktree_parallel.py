"""Many runs of one repository make and remove their worktrees at the same time.

git reads every registered worktree's admin files while it adds one, and a
`git worktree add` or `remove` running beside it can leave one half written
("fatal: failed to read .git/worktrees/<name>/commondir"). Seen as a fanout
lane refused on a busy machine; here twelve at once, three rounds.
"""

from __future__ import annotations

import os
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from conftest import commit_all, git, make_repo

from delegate_skills.relay import worktree

ROUNDS = 3
AT_ONCE = 12


@pytest.fixture
def source(tmp_path, home, monkeypatch) -> Path:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    repo = make_repo(tmp_path / "repo")
    for n in range(40):
        (repo / f"file{n}.txt").write_text(f"{n}\n")
    commit_all(repo, "forty files")
    return repo


def _together(calls: list) -> list:
    """Run each call in its own thread, all released at once; their answers or exceptions."""
    start = threading.Barrier(len(calls))

    def run(call):
        start.wait()
        try:
            return call()
        except Exception as problem:  # reported, not raised, so every thread finishes
            return problem

    with ThreadPoolExecutor(len(calls)) as pool:
        return list(pool.map(run, calls))


def test_twelve_worktrees_made_at_once_all_come_up_checked_out(source):
    made = []
    for _ in range(ROUNDS):
        answers = _together([lambda: worktree.create(str(source))] * AT_ONCE)
        failures = [str(a) for a in answers if isinstance(a, Exception)]
        assert failures == []
        made += answers
    assert len({tree.path for tree in made}) == ROUNDS * AT_ONCE
    for tree in made:
        assert (Path(tree.path) / "file39.txt").read_text() == "39\n"
        assert git(Path(tree.path), "status", "--porcelain") == ""
        assert git(Path(tree.path), "symbolic-ref", "--short", "HEAD") == tree.branch
    listed = git(source, "worktree", "list", "--porcelain").count("worktree ")
    assert listed == 1 + ROUNDS * AT_ONCE


def test_worktrees_removed_while_others_are_made(source):
    old = [worktree.create(str(source)) for _ in range(AT_ONCE // 2)]
    common = str(source / ".git")
    removals = [
        lambda tree=tree: worktree.remove(str(source), common, tree.path, tree.branch)
        for tree in old
    ]
    additions = [lambda: worktree.create(str(source))] * (AT_ONCE // 2)
    answers = _together(removals + additions)
    removed, added = answers[: len(removals)], answers[len(removals) :]
    assert [a for a in added if isinstance(a, Exception)] == []
    assert [(a.ok, a.reason()) for a in removed if a.ok is not True] == []
    assert not any(os.path.exists(tree.path) for tree in old)
    branches = git(source, "branch", "--list", "delegate/*", "--format=%(refname:short)")
    assert sorted(branches.split()) == sorted(tree.branch for tree in added)


def _waits_for_the_lock(source: Path, change) -> object:
    """Run `change` while the test holds the admin lock: it may not end before it is let go.

    Its answer, and how many worktrees git listed while the lock was held.
    """
    common = str(source / ".git")
    holding = worktree.admin_lock(common)
    holding.__enter__()
    done = threading.Event()
    answer: list = []

    def run():
        answer.append(change())
        done.set()

    changer = threading.Thread(target=run)
    try:
        changer.start()
        assert not done.wait(1.0)  # a second is ample for a 40-file worktree alone
        listed = git(source, "worktree", "list", "--porcelain").count("worktree ")
    finally:
        holding.__exit__(None, None, None)
        changer.join(60)
    assert done.is_set()
    assert os.path.isfile(os.path.join(common, "delegate-skills", "worktrees.lock"))
    return answer[0], listed


def test_a_worktree_is_made_only_while_no_other_change_holds_the_lock(source):
    tree, listed_while_held = _waits_for_the_lock(source, lambda: worktree.create(str(source)))
    assert listed_while_held == 1
    assert Path(tree.path, "file0.txt").is_file()


def test_a_worktree_is_removed_only_while_no_other_change_holds_the_lock(source):
    tree = worktree.create(str(source))
    common = str(source / ".git")
    removed, listed_while_held = _waits_for_the_lock(
        source, lambda: worktree.remove(str(source), common, tree.path, tree.branch)
    )
    assert listed_while_held == 2
    assert removed.ok
    assert not os.path.exists(tree.path)
