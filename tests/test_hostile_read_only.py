"""A read-only run is read-only: enforced by bubblewrap where it is here, proven where not.

The detection half runs with enforcement off (DETECT_ONLY), so the fake can
do what a hostile implementer would; every case must come out `true` and
name what changed, or `null` with the reason. The enforcement half runs with
bwrap (installed by .ci/run): the same writes fail and the verdict is
`false`, proven by the sandbox.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from conftest import commit_all, fleet_doc, git, make_repo, write_json
from relaykit import DETECT_ONLY, Bench

#: Every test here runs with the Linux mechanisms and without them (conftest).
pytestmark = pytest.mark.usefixtures("mechanisms")

HAS_BWRAP = shutil.which("bwrap") is not None
#: A relay whose CLI starts no sandbox of its own: ours applies to it as root too.
UNSANDBOXED = "pi"
needs_bwrap = pytest.mark.skipif(not HAS_BWRAP, reason="bwrap is not installed here")


def prepared(tmp_path: Path, name: str = "work", key: str = "codex") -> Bench:
    bench = Bench(tmp_path, key, repo=False)
    bench.work = make_repo(tmp_path / name)
    (bench.work / "tracked.txt").write_text("original\n")
    commit_all(bench.work)
    return bench


def detect(bench: Bench, actions: list, *flags: str) -> dict:
    bench.script({"actions": actions})
    run = bench.relay("--read-only", *flags, env=bench.fake.env(**DETECT_ONLY))
    assert run.code == 0, run
    result = run.result
    assert result["readOnlyEnforced"] is None
    assert result["readOnlyUnenforced"] == "DELEGATE_RELAY_ENFORCE=0 turned enforcement off"
    return result


def loose_object(repo: Path, oid: str) -> str:
    return f".git/objects/{oid[:2]}/{oid[2:]}"


# ---------------------------------------------------------------- proven


def test_an_edit_hidden_behind_assume_unchanged_is_true(tmp_path):
    bench = prepared(tmp_path)
    result = detect(
        bench,
        [{"write": ["tracked.txt", "changed!\n"]},
         {"git": ["update-index", "--assume-unchanged", "tracked.txt"]}],
    )  # fmt: skip
    assert git(bench.work, "status", "--porcelain") == ""  # git itself sees nothing
    assert result["readOnlyViolation"] is True
    assert result["readOnlyChanges"] == ["tracked.txt", "index"]


def test_an_edit_hidden_behind_skip_worktree_is_true(tmp_path):
    bench = prepared(tmp_path)
    result = detect(
        bench,
        [{"write": ["tracked.txt", "changed!\n"]},
         {"git": ["update-index", "--skip-worktree", "tracked.txt"]}],
    )  # fmt: skip
    assert result["readOnlyViolation"] is True
    assert result["readOnlyChanges"] == ["tracked.txt", "index"]


def test_a_same_size_edit_with_its_mtime_put_back_is_true_under_trustctime_off(tmp_path):
    bench = prepared(tmp_path)
    git(bench.work, "config", "core.trustctime", "false")
    result = detect(bench, [{"rewrite_keep_mtime": ["tracked.txt", "ORIGINAL\n"]}])
    assert result["readOnlyViolation"] is True
    assert result["readOnlyChanges"] == ["tracked.txt"]


def test_a_chmod_is_true_under_filemode_off(tmp_path):
    bench = prepared(tmp_path)
    git(bench.work, "config", "core.fileMode", "false")
    result = detect(bench, [{"chmod": ["tracked.txt", "755"]}])
    assert result["readOnlyViolation"] is True
    assert result["readOnlyChanges"] == ["tracked.txt"]
    assert result["changes"]["files"] == [
        {"path": "tracked.txt", "status": "modified", "linesAdded": 0, "linesRemoved": 0,
         "binary": False, "oldMode": "100644", "newMode": "100755"},
    ]  # fmt: skip


def test_approving_the_project_config_is_true(tmp_path):
    bench = prepared(tmp_path)
    result = detect(
        bench,
        [{"mkdir": ".git/delegate-skills"},
         {"write": [".git/delegate-skills/project-config.sha256", "0" * 64 + "\n"]}],
    )  # fmt: skip
    assert result["readOnlyViolation"] is True
    assert ".git/delegate-skills/project-config.sha256" in result["readOnlyChanges"]


def test_deleting_an_object_is_true(tmp_path):
    bench = prepared(tmp_path)
    oid = git(bench.work, "rev-parse", "HEAD:tracked.txt")
    result = detect(bench, [{"unlink": loose_object(bench.work, oid)}])
    assert result["readOnlyViolation"] is True
    assert loose_object(bench.work, oid) in result["readOnlyChanges"]


def test_gc_prune_and_reflog_expire_are_true(tmp_path):
    bench = prepared(tmp_path)
    oid = git(bench.work, "rev-parse", "HEAD")
    result = detect(
        bench,
        [{"git": ["reflog", "expire", "--expire=now", "--all"]},
         {"git": ["gc", "-q", "--prune=now"]}],
    )  # fmt: skip
    assert result["readOnlyViolation"] is True
    changes = result["readOnlyChanges"]
    assert loose_object(bench.work, oid) in changes
    assert ".git/logs/HEAD" in changes


@pytest.mark.parametrize(
    "name",
    ["info/attributes", "shallow", "info/grafts", "objects/info/alternates", "MERGE_HEAD"],
)
def test_a_git_dir_file_is_true(tmp_path, name):
    bench = prepared(tmp_path)
    head = git(bench.work, "rev-parse", "HEAD")
    result = detect(bench, [{"write": [f".git/{name}", f"{head}\n"]}])
    assert result["readOnlyViolation"] is True
    assert f".git/{name}" in result["readOnlyChanges"]


def test_a_worktree_added_behind_the_users_back_is_true(tmp_path):
    bench = prepared(tmp_path)
    result = detect(bench, [{"git": ["worktree", "add", "--detach", str(tmp_path / "hidden")]}])
    assert result["readOnlyViolation"] is True
    assert ".git/worktrees/hidden/HEAD" in result["readOnlyChanges"]


def test_an_included_config_file_is_true(tmp_path):
    bench = prepared(tmp_path)
    extra = tmp_path / "extra.gitconfig"
    extra.write_text("[user]\n\tname = x\n")
    git(bench.work, "config", "include.path", str(extra))
    result = detect(bench, [{"append": [str(extra), "[core]\n\thooksPath = /tmp/evil\n"]}])
    assert result["readOnlyViolation"] is True
    assert result["readOnlyChanges"] == [f"included config {extra}"]


def test_a_write_through_a_symlink_that_leaves_the_repo_is_true(tmp_path):
    bench = prepared(tmp_path)
    outside = tmp_path / "outside.txt"
    outside.write_text("elsewhere\n")
    os.symlink(str(outside), bench.work / "link")
    commit_all(bench.work, "a link")
    result = detect(bench, [{"append": ["link", "written through the link\n"]}])
    assert result["readOnlyViolation"] is True
    assert result["readOnlyChanges"] == [f"symlink link -> {outside}"]


def test_an_edit_in_an_ignored_nested_repository_is_true(tmp_path):
    bench = prepared(tmp_path)
    (bench.work / ".gitignore").write_text("vendor/\n")
    commit_all(bench.work, "ignore vendor")
    nested = make_repo(bench.work / "vendor" / "lib")
    (nested / "f.txt").write_text("vendored\n")
    commit_all(nested, "nested")
    result = detect(bench, [{"append": ["vendor/lib/f.txt", "patched\n"]}])
    assert result["readOnlyViolation"] is True
    assert "ignored: vendor/lib/f.txt" in result["readOnlyChanges"]


def test_a_repository_whose_path_holds_a_newline(tmp_path):
    bench = prepared(tmp_path, "line\nbreak")
    clean = detect(bench, [])
    assert clean["readOnlyViolation"] is False, clean
    result = detect(bench, [{"append": ["tracked.txt", "more\n"]}])
    assert result["readOnlyViolation"] is True
    assert result["readOnlyChanges"] == ["tracked.txt"]


# ---------------------------------------------------------------- unproven: null


def submodule(bench: Bench, tmp_path: Path) -> None:
    inner = make_repo(tmp_path / "inner")
    (inner / "f.txt").write_text("x\n")
    commit_all(inner)
    git(bench.work, "-c", "protocol.file.allow=always", "submodule", "add", "-q", str(inner), "sub")
    commit_all(bench.work, "submodule")


def test_a_clean_submodule_makes_it_null(tmp_path):
    bench = prepared(tmp_path)
    submodule(bench, tmp_path)
    result = detect(bench, [])
    assert result["readOnlyViolation"] is None
    assert result["readOnlyUnverified"] == (
        "submodules or nested repositories (sub) are not fingerprinted inside"
    )


def test_a_write_in_a_submodules_git_dir_is_true(tmp_path):
    bench = prepared(tmp_path)
    submodule(bench, tmp_path)
    result = detect(bench, [{"write": [".git/modules/sub/hooks/pre-commit", "#!/bin/sh\n"]}])
    assert result["readOnlyViolation"] is True
    assert ".git/modules/sub/hooks/pre-commit" in result["readOnlyChanges"]


# ---------------------------------------------------------------- enforced


#: Why a run with the Linux mechanisms switched off (conftest's `mechanisms`) has no sandbox.
NO_LINUX = "bubblewrap enforcement needs Linux"


def enforced(bench: Bench, actions: list, mechanisms: str, *flags: str) -> dict:
    """A read-only run: sandboxed by bwrap, or, without the Linux mechanisms, detected only."""
    bench.script({"actions": actions})
    run = bench.relay("--read-only", *flags)
    result = run.result
    if mechanisms == "posix":
        assert result["readOnlyEnforced"] is None, result
        assert result["readOnlyUnenforced"] == NO_LINUX
        return result
    assert result["readOnlyEnforced"] == "bwrap", result
    assert "readOnlyUnenforced" not in result
    return result


@needs_bwrap
def test_bwrap_stops_a_write_to_the_work_tree(tmp_path, mechanisms):
    bench = prepared(tmp_path, key=UNSANDBOXED)
    result = enforced(bench, [{"append": ["tracked.txt", "sneaky\n"]}], mechanisms)
    if mechanisms == "posix":  # the write lands, and is caught
        assert result["readOnlyViolation"] is True
        assert result["readOnlyChanges"] == ["tracked.txt"]
        return
    assert (bench.work / "tracked.txt").read_text() == "original\n"
    assert result["exitCode"] != 0  # the fake died on its write
    assert result["readOnlyViolation"] is False
    assert "readOnlyChanges" not in result


@needs_bwrap
def test_bwrap_stops_an_approval_and_a_commit(tmp_path, mechanisms):
    bench = prepared(tmp_path, key=UNSANDBOXED)
    approval = bench.work / ".git" / "delegate-skills" / "project-config.sha256"
    made = enforced(bench, [{"mkdir": ".git/delegate-skills"}], mechanisms)
    committed = enforced(
        bench, [{"git": ["commit", "-q", "--allow-empty", "-m", "sneaky"]}], mechanisms
    )
    if mechanisms == "posix":  # both land, and both are caught
        assert (made["readOnlyViolation"], committed["readOnlyViolation"]) == (True, True)
        assert git(bench.work, "rev-list", "--count", "HEAD") == "2"
        return
    assert not approval.exists()
    assert git(bench.work, "rev-list", "--count", "HEAD") == "1"


@needs_bwrap
def test_bwrap_stops_a_write_to_the_private_records(tmp_path, mechanisms):
    bench = prepared(tmp_path, key=UNSANDBOXED)
    state = tmp_path / "state"
    bench.script({"actions": [{"write": [str(state / "delegate-skills" / "planted"), "x"]}]})
    run = bench.relay("--read-only", env=bench.fake.env(XDG_STATE_HOME=str(state)))
    if mechanisms == "posix":  # outside the work tree: not enforced, and not seen (README)
        assert run.result["readOnlyEnforced"] is None
        assert (state / "delegate-skills" / "planted").exists()
        return
    assert run.result["readOnlyEnforced"] == "bwrap"
    assert not (state / "delegate-skills" / "planted").exists()


@needs_bwrap
def test_a_write_runs_dir_inside_the_repo_stays_out_of_its_change(tmp_path, mechanisms):
    """A write run may keep its run directory in its work tree: the relay's own files are
    not the run's change; a file the relay did not write there is."""
    bench = prepared(tmp_path, key=UNSANDBOXED)
    bench.out = bench.work / "runs" / "one"
    bench.script({"actions": [{"write": [str(bench.out / "notes.txt"), "the cli's own\n"]}]})
    result = bench.relay("--confine").result
    assert result["status"] == "completed", result
    assert (bench.out / "notes.txt").read_text() == "the cli's own\n"
    assert [entry["path"] for entry in result["changes"]["files"]] == ["runs/one/notes.txt"]


def test_without_bwrap_the_run_says_why_and_detection_still_works(tmp_path, mechanisms):
    bench = prepared(tmp_path, key=UNSANDBOXED)
    bench.script({"actions": [{"append": ["tracked.txt", "x\n"]}]})
    git_dir = os.path.dirname(shutil.which("git"))
    path = f"{bench.fake.bin}{os.pathsep}{tmp_path / 'bin'}"
    (tmp_path / "bin").mkdir()
    os.symlink(os.path.join(git_dir, "git"), tmp_path / "bin" / "git")
    run = bench.relay("--read-only", env={**bench.fake.env(), "PATH": path})
    result = run.result
    assert result["readOnlyEnforced"] is None
    assert result["readOnlyUnenforced"] == (
        NO_LINUX
        if mechanisms == "posix"
        else "bwrap is not on PATH (install Debian's or Ubuntu's bubblewrap package)"
    )
    assert result["readOnlyViolation"] is True
    assert result["readOnlyChanges"] == ["tracked.txt"]


@needs_bwrap
@pytest.mark.skipif(os.geteuid() != 0, reason="the uid a confined run of root's runs as")
def test_as_root_a_cli_with_its_own_sandbox_is_enforced_too(tmp_path, mechanisms):
    """codex's read-only sandbox is a bubblewrap of its own: inside ours it runs as a
    non-root uid, where an inner bubblewrap can make its namespaces."""
    bench = prepared(tmp_path)
    bench.script({"actions": [{"git": ["-c", "alias.uid=!id -u > uid.txt", "uid"]}]})
    result = bench.relay("--read-only").result
    if mechanisms == "posix":
        assert (result["readOnlyEnforced"], result["readOnlyUnenforced"]) == (None, NO_LINUX)
        return
    assert (result["readOnlyEnforced"], result.get("readOnlyUnenforced")) == ("bwrap", None)
    assert result["confined"] == "bwrap"
    assert not (bench.work / "uid.txt").exists()  # the work tree is read-only to it
    assert result["readOnlyViolation"] is False


# ---------------------------------------------------------------- a read-only lane is a policy


@pytest.mark.parametrize(
    ("key", "lane", "flags", "display"),
    [
        ("claude", {"readOnly": True}, ["--dangerously-skip-permissions"], "Claude Code"),
        ("codex", {"readOnly": True}, ["--sandbox", "workspace-write"], "Codex"),
        ("codex", {"sandbox": "read-only"}, ["--sandbox", "danger-full-access"], "Codex"),
        ("opencode", {"readOnly": True, "model": "fake/model"}, ["--agent", "build"], "OpenCode"),
        ("grok", {"readOnly": True}, ["--full-access"], "Grok"),
        ("gemini", {"readOnly": True}, ["--approval-mode", "yolo"], "Gemini CLI"),
    ],
)
def test_a_read_only_lane_refuses_a_widening_flag(
    tmp_path, global_config, key, lane, flags, display
):
    bench = Bench(tmp_path, key)
    write_json(global_config, fleet_doc({"review": {"implementer": key, **lane}}))
    run = bench.relay("--lane", "review", *flags, plain=True)
    assert run.code == 2, run
    assert run.err == (
        f"relay: lane review is read-only, and {flags[0]} would let {display} write; a "
        "read-only lane is a policy: drop the flag, or dispatch through a lane that may write\n"
    )
    assert bench.fake.calls() == []
    assert not bench.out.exists()


def test_a_read_only_lane_still_takes_flags_that_keep_it_read_only(tmp_path, global_config):
    bench = Bench(tmp_path, "codex")
    write_json(global_config, fleet_doc({"review": {"implementer": "codex", "readOnly": True}}))
    bench.script({})
    run = bench.relay("--lane", "review", "--read-only", "--model", "gpt-5")
    assert run.code == 0, run
    assert json.loads((bench.out / "result.json").read_text())["sandbox"] == "read-only"


def test_a_write_lane_takes_any_flag(tmp_path, global_config):
    bench = Bench(tmp_path, "claude")
    write_json(global_config, fleet_doc({"w": {"implementer": "claude"}}))
    bench.script({})
    assert bench.relay("--lane", "w", "--dangerously-skip-permissions").code in (0, 1)
    assert subprocess.run(["true"]).returncode == 0


def test_opencodes_own_project_id_in_the_git_dir_is_not_a_change(tmp_path):
    bench = prepared(tmp_path, key="opencode")
    (bench.work / ".git" / "opencode").write_text("0" * 40)
    bench.script({"actions": [{"write": [".git/opencode", "1" * 40]}]})
    run = bench.relay("--read-only", "--model", "fake/model", env=bench.fake.env(**DETECT_ONLY))
    assert run.result["readOnlyViolation"] is False, run.result
    bench.script({"actions": [{"write": [".git/opencode-other", "x"]}]})
    run = bench.relay("--read-only", "--model", "fake/model", env=bench.fake.env(**DETECT_ONLY))
    assert run.result["readOnlyChanges"] == [".git/opencode-other"]


def test_an_unproven_verdict_says_the_coverage_is_incomplete(tmp_path):
    """The Node bundle's check: outside any repository, with no git, the summary says so."""
    bench = Bench(tmp_path, "grok", repo=False)
    bench.script({"exit": 1})
    run = bench.relay("--read-only", env={**bench.fake.env(), "PATH": str(bench.fake.bin)})
    assert run.code == 1
    assert run.result["readOnlyViolation"] is None
    assert "coverage is incomplete" in run.out
    assert run.out.count("relay: failed") == 1
