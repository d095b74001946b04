"""A read-only verdict of `false` means nothing changed: not only what `git status` lists.

Each case is a change a read-only run could make without leaving a dirty
file behind; the verdict must be `true` and name it in `readOnlyChanges`.
"""

from __future__ import annotations

import pytest
from conftest import commit_all
from relaykit import DETECT_ONLY, Bench

#: Every test here runs with the Linux mechanisms and without them (conftest).
pytestmark = pytest.mark.usefixtures("mechanisms")

#: Relays with a read-only route, written out here (vibe's flag differs).
RELAYS = {"codex": "--read-only", "claude": "--read-only", "vibe": "--plan-only"}

#: (case, the run's actions, what readOnlyChanges must name)
CHANGES = [
    (
        "commit",
        [
            {"append": ["tracked.txt", "edited\n"]},
            {"git": ["commit", "-q", "-am", "sneaky"]},
        ],
        "ref refs/heads/main",
    ),
    (
        "stash",
        [{"append": ["tracked.txt", "edited\n"]}, {"git": ["stash", "-q"]}],
        "ref refs/stash",
    ),
    ("branch", [{"git": ["branch", "elsewhere"]}], "ref refs/heads/elsewhere"),
    (
        "pre-commit hook",
        [{"write": [".git/hooks/pre-commit", "#!/bin/sh\n"]}],
        ".git/hooks/pre-commit",
    ),
    ("hooksPath", [{"git": ["config", "core.hooksPath", "/tmp/evil"]}], ".git/config"),
    ("ignored .env", [{"write": [".env", "TOKEN=stolen\n"]}], "ignored: .env"),
    ("new ignored file", [{"write": ["build/out.bin", "x"]}], "ignored: build/out.bin"),
    ("ignored file removed", [{"unlink": "build/keep.o"}], "ignored: build/keep.o"),
    ("exclude file", [{"write": [".git/info/exclude", "tracked.txt\n"]}], ".git/info/exclude"),
]


def prepared(tmp_path, key: str) -> Bench:
    bench = Bench(tmp_path, key)
    (bench.work / "tracked.txt").write_text("original\n")
    (bench.work / ".gitignore").write_text(".env\nbuild/\n")
    commit_all(bench.work)
    (bench.work / ".env").write_text("TOKEN=mine\n")
    (bench.work / "build").mkdir()
    (bench.work / "build" / "keep.o").write_text("object\n")
    return bench


@pytest.mark.parametrize("case,actions,named", CHANGES, ids=[c[0] for c in CHANGES])
@pytest.mark.parametrize("key", sorted(RELAYS))
def test_a_change_outside_the_work_tree_listing_is_true(tmp_path, key, case, actions, named):
    bench = prepared(tmp_path, key)
    bench.script({"actions": actions})
    run = bench.relay(RELAYS[key], env=bench.fake.env(**DETECT_ONLY))
    assert run.result["readOnlyViolation"] is True, (case, run.result)
    assert named in run.result["readOnlyChanges"], run.result["readOnlyChanges"]
    assert "readOnlyUnverified" not in run.result
    assert "changed: " in run.out and named in run.out


@pytest.mark.parametrize("enforced", [False, True], ids=["detected", "enforced"])
@pytest.mark.parametrize("key", sorted(RELAYS))
def test_reading_and_git_status_leave_it_false(tmp_path, key, enforced):
    bench = prepared(tmp_path, key)
    (bench.work / ".git" / "hooks" / "pre-push").write_text("#!/bin/sh\n")
    bench.script(
        {"actions": [{"git": ["status"]}, {"git": ["log", "--oneline"]}, {"git": ["diff"]}]}
    )
    run = bench.relay(RELAYS[key], env=bench.fake.env(**({} if enforced else DETECT_ONLY)))
    assert run.result["readOnlyViolation"] is False, run.result
    assert "readOnlyChanges" not in run.result
    assert "readOnlyUnverified" not in run.result


def test_a_work_tree_change_is_named(tmp_path):
    bench = prepared(tmp_path, "codex")
    bench.script({"actions": [{"write": ["new.txt", "x"]}, {"append": ["tracked.txt", "y"]}]})
    run = bench.relay("--read-only", env=bench.fake.env(**DETECT_ONLY))
    assert run.result["readOnlyChanges"] == ["new.txt", "tracked.txt"]


def test_too_many_ignored_files_is_null_with_the_reason(tmp_path):
    bench = prepared(tmp_path, "codex")
    bench.script({})
    env = bench.fake.env(DELEGATE_RELAY_IGNORED_BUDGET="1", **DETECT_ONLY)
    run = bench.relay("--read-only", env=env)
    assert run.result["readOnlyViolation"] is None, run.result
    assert run.result["readOnlyUnverified"] == "more than 1 ignored files to fingerprint"
    assert "could not be verified (more than 1 ignored files" in run.out


def test_a_change_is_still_true_when_the_ignored_tree_is_over_budget(tmp_path):
    bench = prepared(tmp_path, "codex")
    bench.script({"actions": [{"git": ["branch", "elsewhere"]}]})
    env = bench.fake.env(DELEGATE_RELAY_IGNORED_BUDGET="1", **DETECT_ONLY)
    run = bench.relay("--read-only", env=env)
    assert run.result["readOnlyViolation"] is True
    assert run.result["readOnlyChanges"] == [
        "ref refs/heads/elsewhere",
        ".git/logs/refs/heads/elsewhere",
        ".git/refs/heads/elsewhere",
    ]


def test_a_linked_worktree_watches_the_shared_config_and_its_own_head(tmp_path):
    bench = prepared(tmp_path, "codex")
    from conftest import git

    linked = tmp_path / "linked"
    git(bench.work, "worktree", "add", "-q", str(linked), "-b", "side")
    bench.work = linked
    bench.script({"actions": [{"git": ["config", "core.hooksPath", "/tmp/evil"]}]})
    run = bench.relay("--read-only", env=bench.fake.env(**DETECT_ONLY))
    assert run.result["readOnlyViolation"] is True
    assert "../work/.git/config" in run.result["readOnlyChanges"], run.result
