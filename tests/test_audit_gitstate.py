"""The read-only verdict (gitstate.Tripwire) from the change record alone.

When the change record has two trees but no file list (its patch was too
large to keep), a difference of the trees is still a proven change; when it
has no trees, the verdict is null with the record's reason, never false.
"""

from __future__ import annotations

from conftest import commit_all, make_repo

from delegate_skills.snapshots.gitprint import RepoSpec
from delegate_skills.snapshots.gitstate import Excluded, Tripwire


class Record:
    """A change record as the Tripwire reads it: its trees' verdict and why it has none."""

    def __init__(self, same: bool | None, problem: str | None = None) -> None:
        self.before = None  # no tree to list symlinks and gitlinks from
        self.problem = problem
        self.incomplete = None
        self._same = same

    def same(self) -> bool | None:
        return self._same


def tripwire(tmp_path, record: Record) -> Tripwire:
    repo = make_repo(tmp_path / "repo")
    (repo / "a.txt").write_text("a\n")
    commit_all(repo)
    git_dir = str(repo / ".git")
    return Tripwire(RepoSpec(str(repo), git_dir, git_dir), record, Excluded([]), enforced=False)


def test_trees_that_differ_without_a_file_list_are_a_change(tmp_path):
    wire = tripwire(tmp_path, Record(same=False))
    assert wire.verdict(files=None) is True
    assert wire.changes == ["(the work tree's files)"]
    assert wire.unverified is None


def test_trees_that_match_without_a_file_list_are_no_change(tmp_path):
    wire = tripwire(tmp_path, Record(same=True))
    assert wire.verdict(files=None) is False
    assert wire.changes == []


def test_no_trees_is_null_with_the_records_reason(tmp_path):
    wire = tripwire(tmp_path, Record(same=None, problem="git add could not read the work tree"))
    assert wire.verdict(files=None) is None
    assert wire.unverified == "git add could not read the work tree"
    assert wire.changes == []


def test_an_unsettled_run_is_never_false(tmp_path):
    wire = tripwire(tmp_path, Record(same=True))
    assert wire.verdict(files=[], settled=False) is None
    assert wire.unverified == "processes of the run were still being stopped"
