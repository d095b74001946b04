"""The read-only tripwire lives in the engine: every relay's read-only run reports it.

Which relays have a read-only route, and the flag that asks for it, is the
written table relaykit.READ_ONLY_FLAG: a relay whose read-only route breaks
fails here rather than dropping out of the matrix.
"""

from __future__ import annotations

import os
import subprocess

import pytest
from conftest import commit_all, git, make_repo
from relaykit import (
    ALL_RELAYS,
    DETECT_ONLY,
    NO_READ_ONLY,
    READ_ONLY_FLAG,
    RELAYS,
    Bench,
    adapter,
    read_only_flag,
)

READ_ONLY_RELAYS = list(READ_ONLY_FLAG)


def test_every_relay_is_written_down_with_or_without_a_read_only_route():
    assert sorted(RELAYS) == sorted(ALL_RELAYS)
    assert sorted([*READ_ONLY_FLAG, *NO_READ_ONLY]) == sorted(ALL_RELAYS)


def configured(tmp_path, key: str, *flags: str) -> dict:
    """The options a relay settles on for `flags`, parsed and checked as a run would."""
    from delegate_skills.relay.engine import Relay

    bench = Bench(tmp_path, key)
    relay = Relay(adapter(key))
    relay.configure(bench.args(*flags))
    return relay.opts


@pytest.mark.parametrize("key", READ_ONLY_RELAYS)
def test_the_written_flag_asks_for_a_read_only_run(tmp_path, key):
    relay_adapter = adapter(key)
    assert relay_adapter.read_only(configured(tmp_path, key, READ_ONLY_FLAG[key])) is True
    assert relay_adapter.read_only(configured(tmp_path, key)) is False


def test_warp_has_no_read_only_flag(tmp_path, capfd):
    bench = Bench(tmp_path, "warp")
    assert bench.in_process(capfd, "--read-only") == (
        2,
        "",
        "relay: unknown option: --read-only\n",
    )


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
    assert result["readOnlyViolation"] is False, result


#: The relays whose write runs still carry `"readOnlyViolation": null` ("the question
#: does not apply"), as the Node agy, commandcode and zcode relays write it.
WRITE_RUNS_SAY_NULL = ["agy", "commandcode", "zcode"]
#: Where ours differs from the Node relay: a strict xfail, so a fix makes it fail loudly.
DIFFERS_FROM_NODE = {
    "agy": "ours leaves readOnlyViolation out of agy's write runs; Node writes null"
}


@pytest.mark.parametrize(
    "key",
    [
        pytest.param(k, marks=pytest.mark.xfail(strict=True, reason=DIFFERS_FROM_NODE[k]))
        if k in DIFFERS_FROM_NODE
        else k
        for k in READ_ONLY_RELAYS
    ],
)
def test_write_runs_do_not_report_it(tmp_path, key):
    bench = prepared(tmp_path, key)
    bench.script({})
    result = bench.relay().result
    if key in WRITE_RUNS_SAY_NULL:
        assert "readOnlyViolation" in result and result["readOnlyViolation"] is None
    else:
        assert "readOnlyViolation" not in result


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
    run = bench.relay(read_only_flag(key), env=bench.fake.env(**DETECT_ONLY))
    assert run.result["readOnlyViolation"] is True, run
    assert "git-visible change was detected" in run.out


@pytest.mark.parametrize("key", READ_ONLY_RELAYS)
def test_edit_to_an_already_dirty_file_is_true(tmp_path, key):
    bench = prepared(tmp_path, key)
    (bench.work / "tracked.txt").write_text("dirty before the run\n")
    (bench.work / "untracked.txt").write_text("also dirty\n")
    bench.script({"actions": [{"append": ["untracked.txt", "more\n"]}]})
    run = bench.relay(read_only_flag(key), env=bench.fake.env(**DETECT_ONLY))
    assert run.result["readOnlyViolation"] is True


@pytest.mark.parametrize("key", READ_ONLY_RELAYS)
def test_a_read_only_run_keeps_its_run_dir_out_of_its_work_tree(tmp_path, key):
    """Its run directory is writable to the implementer: in the work tree it would make that
    part of the tree writable, so it is refused before anything is written."""
    bench = prepared(tmp_path, key)
    bench.out = bench.work / "runs" / "one"
    bench.script({"actions": [{"stdout": '{"type":"text"}\n'}]})
    run = bench.relay(read_only_flag(key))
    assert (run.code, run.out) == (2, "")
    assert run.err == (
        f"relay: --out-dir {bench.out} is in or around the work tree of a read-only run "
        f"({bench.work}); choose a folder outside it\n"
    )
    assert bench.fake.calls() == [] and not bench.out.exists()


@pytest.mark.parametrize("key", READ_ONLY_RELAYS)
def test_outside_git_is_null(tmp_path, key):
    bench = Bench(tmp_path, key, repo=False)
    bench.script({})
    run = bench.relay(read_only_flag(key), env=bench.fake.env(**DETECT_ONLY))
    assert run.result["readOnlyViolation"] is None
    assert "could not be verified" in run.out


@pytest.mark.parametrize("key", READ_ONLY_RELAYS)
def test_without_git_on_path_it_is_null(tmp_path, key):
    bench = prepared(tmp_path, key)
    bench.script({})
    env = {**bench.fake.env(), "PATH": str(bench.fake.bin)}  # no git, and no bwrap either
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
    run = bench.relay("--read-only", env=bench.fake.env(**DETECT_ONLY))
    assert run.result["readOnlyViolation"] is None
    assert run.result["readOnlyUnverified"] == (
        "submodules or nested repositories (sub) are not fingerprinted inside"
    )


def test_an_unreadable_dirty_path_makes_it_null(tmp_path):
    bench = prepared(tmp_path, "codex")
    if os.geteuid() == 0:
        # root reads everything: a nested repository with no commit cannot be snapshotted.
        make_repo(bench.work / "empty-nested")
        (bench.work / "empty-nested" / "f.txt").write_text("x")
        why = "'empty-nested/' does not have a commit checked out"
    else:
        secret = bench.work / "secret.txt"
        secret.write_text("x")
        secret.chmod(0)
        why = "secret.txt"
    bench.script({})
    result = bench.relay("--read-only", env=bench.fake.env(**DETECT_ONLY)).result
    assert result["readOnlyViolation"] is None
    assert result["readOnlyUnverified"].startswith("part of the work tree could not be read (")
    assert why in result["readOnlyUnverified"]


def test_a_file_whose_name_is_not_utf8_is_covered(tmp_path):
    bench = prepared(tmp_path, "codex")
    name = os.fsdecode(b"bad-\xff.txt")
    (bench.work / name).write_text("x")
    bench.script({"actions": [{"append_hex_name": [b"bad-\xff.txt".hex(), "more"]}]})
    result = bench.relay("--read-only", env=bench.fake.env(**DETECT_ONLY)).result
    assert result["readOnlyViolation"] is True
    assert result["readOnlyChanges"] == [name]


# ---------------------------------------------------------------- what the tripwire sees
# One relay is enough: the tripwire is the engine's, the same for every relay.


def dirty(tmp_path) -> Bench:
    """A codex bench whose tracked.txt is modified (` M`) before the run."""
    bench = prepared(tmp_path, "codex")
    (bench.work / "tracked.txt").write_text("dirty before the run\n")
    return bench


def porcelain(bench: Bench) -> str:
    return subprocess.run(
        ["git", "status", "--porcelain"], cwd=bench.work, capture_output=True, text=True
    ).stdout


def read_only_run(bench: Bench, actions: list) -> dict:
    bench.script({"actions": actions})
    run = bench.relay("--read-only", env=bench.fake.env(**DETECT_ONLY))
    assert run.code == 0, run
    return run.result


def test_a_mode_change_on_an_already_dirty_file_is_true(tmp_path):
    bench = dirty(tmp_path)
    result = read_only_run(bench, [{"chmod": ["tracked.txt", "755"]}])
    assert porcelain(bench) == " M tracked.txt\n"
    assert result["readOnlyViolation"] is True
    assert result["readOnlyChanges"] == ["tracked.txt"]


def test_staging_an_already_dirty_file_is_true(tmp_path):
    bench = dirty(tmp_path)
    result = read_only_run(bench, [{"git": ["add", "tracked.txt"]}])
    assert result["readOnlyViolation"] is True
    assert result["readOnlyChanges"] == ["index"]  # the work tree's bytes are as they were


def test_restaging_a_file_whose_status_and_bytes_come_back_the_same_is_true(tmp_path):
    """`MM` before and after, the same work-tree bytes: only the index entry differs."""
    bench = prepared(tmp_path, "codex")
    (bench.work / "tracked.txt").write_text("staged\n")
    git(bench.work, "add", "tracked.txt")
    (bench.work / "tracked.txt").write_text("in the work tree\n")
    result = read_only_run(
        bench,
        [
            {"write": ["tracked.txt", "staged behind your back\n"]},
            {"git": ["add", "tracked.txt"]},
            {"write": ["tracked.txt", "in the work tree\n"]},
        ],
    )
    assert porcelain(bench) == "MM tracked.txt\n"
    assert result["readOnlyViolation"] is True
    assert result["readOnlyChanges"] == ["index"]


def test_a_rename_whose_origin_changes_is_true(tmp_path):
    """`R  b.txt` before and after; only the file it was renamed from differs."""
    bench = prepared(tmp_path, "codex")
    for name in ("a.txt", "c.txt"):
        (bench.work / name).write_text("the same bytes\n")
    commit_all(bench.work)
    git(bench.work, "mv", "a.txt", "b.txt")
    result = read_only_run(
        bench,
        [
            {"git": ["reset", "-q", "--", "a.txt"]},
            {"git": ["checkout", "--", "a.txt"]},
            {"git": ["rm", "-q", "c.txt"]},
        ],
    )
    assert porcelain(bench) == "R  c.txt -> b.txt\n"
    assert result["readOnlyViolation"] is True
    assert result["readOnlyChanges"] == ["a.txt", "c.txt", "index"]


def test_a_new_file_in_a_new_untracked_directory_is_named_by_its_path(tmp_path):
    bench = prepared(tmp_path, "codex")
    result = read_only_run(
        bench, [{"mkdir": "fresh/deeper"}, {"write": ["fresh/deeper/new.txt", "x"]}]
    )
    assert porcelain(bench) == "?? fresh/\n"
    assert result["readOnlyViolation"] is True
    assert result["readOnlyChanges"] == ["fresh/deeper/new.txt"]


def test_a_new_file_in_an_already_untracked_directory_is_true(tmp_path):
    """Without -uall both listings would read `?? scratch/` and see nothing."""
    bench = prepared(tmp_path, "codex")
    (bench.work / "scratch").mkdir()
    (bench.work / "scratch" / "a.txt").write_text("there before\n")
    result = read_only_run(bench, [{"write": ["scratch/b.txt", "x"]}])
    assert result["readOnlyViolation"] is True
    assert result["readOnlyChanges"] == ["scratch/b.txt"]
