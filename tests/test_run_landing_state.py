"""Landing state of a run, and an --out-dir that still holds unlanded work.

A --worktree run's change lives in its worktree and branch until `runs apply`
or `runs discard`; its run directory is the way to land it. A new run may not
take that directory over (exit 2, naming the run and both ways out), and
`runs list/show` say where each run stands: pending, applied, discarded,
undone, or null for a run that worked in place.
"""

from __future__ import annotations

import json

import pytest
from conftest import git
from test_worktree import BRIEF_EDIT, Source


@pytest.fixture
def source(tmp_path, home) -> Source:
    return Source(tmp_path)


def _id(run) -> str:
    return run.result["relayRunId"]


def _show(repo: Source, out) -> dict:
    shown = repo.delegate("runs", "show", str(out), "--json")
    assert shown.code == 0, shown
    return json.loads(shown.out)


def test_a_second_run_may_not_take_over_an_unlanded_worktree_run(source):
    source.bench.script(BRIEF_EDIT)
    first = source.relay("--worktree")
    assert first.code == 0, first
    run_id, tree = _id(first), first.result["worktree"]
    before = (source.bench.out / "result.json").read_bytes()
    again = source.relay("--worktree")
    assert again.code == 2, again
    assert again.err.strip().splitlines()[-1] == (
        f"relay: --out-dir {source.bench.out} holds run {run_id}, a --worktree run whose change "
        f"is not landed; land it (runs apply {run_id}) or drop it (runs discard {run_id}), "
        "or choose a new --out-dir"
    )
    assert (source.bench.out / "result.json").read_bytes() == before  # the record is kept
    assert source.worktrees() == [str(source.repo), tree["path"]]  # no second worktree
    assert source.branches() == sorted(["main", tree["branch"]])
    in_place = source.relay()  # an in-place run into it is refused the same way
    assert in_place.code == 2, in_place
    assert f"holds run {run_id}, a --worktree run" in in_place.err


def test_once_applied_or_discarded_the_out_dir_may_be_used_again(source):
    source.bench.script(BRIEF_EDIT)
    first = source.relay("--worktree")
    assert first.code == 0, first
    first_id = _id(first)
    assert _show(source, source.bench.out)["landing"] == "pending"
    applied = source.delegate("runs", "apply", str(source.bench.out), "--json")
    assert applied.code == 0, applied
    assert _show(source, source.bench.out)["landing"] == "applied"
    second = source.relay("--worktree")
    assert second.code == 0, second
    assert _id(second) != first_id
    discarded = source.delegate("runs", "discard", str(source.bench.out), "--json")
    assert discarded.code == 0, discarded
    assert _show(source, source.bench.out)["landing"] == "discarded"
    third = source.relay()
    assert third.code == 0, third


def test_an_undone_apply_is_pending_again(source):
    source.bench.script(BRIEF_EDIT)
    first = source.relay("--worktree")
    assert first.code == 0, first
    assert source.delegate("runs", "apply", str(source.bench.out)).code == 0
    undone = source.delegate("runs", "undo", str(source.bench.out))
    assert undone.code == 0, undone
    assert _show(source, source.bench.out)["landing"] == "undone"
    again = source.relay("--worktree")
    assert again.code == 2, again  # the work is back in the worktree only


def test_a_worktree_gone_by_hand_frees_the_out_dir(source):
    source.bench.script(BRIEF_EDIT)
    first = source.relay("--worktree")
    assert first.code == 0, first
    tree = first.result["worktree"]
    git(source.repo, "worktree", "remove", "--force", tree["path"])
    git(source.repo, "branch", "-D", tree["branch"])
    assert _show(source, source.bench.out)["landing"] == "pending"  # nothing recorded it
    assert source.relay().code == 0  # but nothing is left to lose


def test_in_place_runs_have_no_landing_and_reuse_their_out_dir(source):
    source.bench.script({})
    first = source.relay()
    assert first.code == 0, first
    assert _show(source, source.bench.out)["landing"] is None
    listed = json.loads(source.delegate("runs", "list", "--json").out)
    assert [run["landing"] for run in listed["runs"] if run["id"] == _id(first)] == [None]
    assert source.relay().code == 0
