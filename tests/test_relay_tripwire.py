"""The read-only tripwire lives in the engine: every relay's read-only run reports it."""

from __future__ import annotations

import os

import pytest
from conftest import commit_all, git, make_repo
from relaykit import Bench, read_only_flag, read_only_relays

READ_ONLY_RELAYS = read_only_relays()


def prepared(tmp_path, key) -> Bench:
    bench = Bench(tmp_path, key)
    (bench.work / "tracked.txt").write_text("original\n")
    commit_all(bench.work)
    return bench


@pytest.mark.parametrize("key", READ_ONLY_RELAYS)
def test_clean_read_only_run_is_false(tmp_path, key):
    bench = prepared(tmp_path, key)
    bench.script({})
    result = bench.relay(read_only_flag(key)).result
    assert result["readOnlyViolation"] is False


@pytest.mark.parametrize("key", READ_ONLY_RELAYS)
def test_write_runs_do_not_report_it(tmp_path, key):
    bench = prepared(tmp_path, key)
    bench.script({})
    assert "readOnlyViolation" not in bench.relay().result


@pytest.mark.parametrize(
    "action",
    [
        {"append": ["tracked.txt", "edited\n"]},
        {"write": ["new-file.txt", "x"]},
        {"git": ["mv", "tracked.txt", "moved.txt"]},
    ],
    ids=["edit-tracked", "add-untracked", "rename"],
)
@pytest.mark.parametrize("key", READ_ONLY_RELAYS)
def test_a_change_is_true(tmp_path, key, action):
    bench = prepared(tmp_path, key)
    bench.script({"actions": [action]})
    run = bench.relay(read_only_flag(key))
    assert run.result["readOnlyViolation"] is True, run
    assert "git-visible change was detected" in run.out


@pytest.mark.parametrize("key", READ_ONLY_RELAYS)
def test_edit_to_an_already_dirty_file_is_true(tmp_path, key):
    bench = prepared(tmp_path, key)
    (bench.work / "tracked.txt").write_text("dirty before the run\n")
    (bench.work / "untracked.txt").write_text("also dirty\n")
    bench.script({"actions": [{"append": ["untracked.txt", "more\n"]}]})
    assert bench.relay(read_only_flag(key)).result["readOnlyViolation"] is True


@pytest.mark.parametrize("key", READ_ONLY_RELAYS)
def test_artifacts_inside_the_repo_do_not_trip_it(tmp_path, key):
    bench = prepared(tmp_path, key)
    bench.out = bench.work
    bench.script({"actions": [{"stdout": '{"type":"text"}\n'}, {"stderr": "noise\n"}]})
    assert bench.relay(read_only_flag(key)).result["readOnlyViolation"] is False


@pytest.mark.parametrize("key", READ_ONLY_RELAYS)
def test_outside_git_is_null(tmp_path, key):
    bench = Bench(tmp_path, key, repo=False)
    bench.script({})
    run = bench.relay(read_only_flag(key))
    assert run.result["readOnlyViolation"] is None
    assert "could not be verified" in run.out


@pytest.mark.parametrize("key", READ_ONLY_RELAYS)
def test_without_git_on_path_it_is_null(tmp_path, key):
    bench = prepared(tmp_path, key)
    bench.script({})
    env = {**bench.fake.env(), "PATH": str(bench.fake.bin)}
    assert bench.relay(read_only_flag(key), env=env).result["readOnlyViolation"] is None


def test_a_dirty_submodule_makes_it_null(tmp_path):
    bench = prepared(tmp_path, "codex")
    inner = make_repo(tmp_path / "inner")
    (inner / "f.txt").write_text("x\n")
    commit_all(inner)
    git(bench.work, "-c", "protocol.file.allow=always", "submodule", "add", "-q", str(inner), "sub")
    commit_all(bench.work)
    (bench.work / "sub" / "f.txt").write_text("dirty inside the submodule\n")
    bench.script({})
    assert bench.relay("--read-only").result["readOnlyViolation"] is None


def test_an_unreadable_dirty_path_makes_it_null(tmp_path):
    if os.geteuid() == 0:
        # root reads everything; use an invalid UTF-8 name git reports but we cannot key on.
        bench = prepared(tmp_path, "codex")
        (bench.work / os.fsdecode(b"bad-\xff.txt")).write_text("x")
        bench.script({})
        assert bench.relay("--read-only").result["readOnlyViolation"] is None
        return
    bench = prepared(tmp_path, "codex")
    secret = bench.work / "secret.txt"
    secret.write_text("x")
    secret.chmod(0)
    bench.script({})
    assert bench.relay("--read-only").result["readOnlyViolation"] is None
