"""`runs prune`: what holds no unlanded work goes; what holds work stays unless --force."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from conftest import PYTHON, ROOT, git, run
from test_worktree import BRIEF_EDIT, Source

RUNS_PY = str(ROOT / "skills" / "codex-delegate" / "scripts" / "runs.py")


@pytest.fixture
def source(tmp_path, home) -> Source:
    return Source(tmp_path)


def _prune(source: Source, *args: str) -> dict:
    """`runs prune` on the source's runs, with no minimum age unless `args` give one."""
    if "--older-than" not in args:
        args = ("--older-than", "0", *args)
    done = source.delegate("runs", "prune", "--json", "--cwd", str(source.repo), *args)
    assert done.code == 0, done
    return json.loads(done.out)


def _worktree_run(source: Source, out: Path, script: dict) -> dict:
    source.bench.script(script)
    done = source.relay("--worktree", out=out)
    assert done.code == 0, done
    return done.result


def test_prune_keeps_unlanded_work_and_removes_the_rest(source, tmp_path):
    kept = _worktree_run(source, tmp_path / "kept", BRIEF_EDIT)
    _worktree_run(source, tmp_path / "applied", {"actions": [{"write": ["b.txt", "b\n"]}]})
    assert source.delegate("runs", "apply", str(tmp_path / "applied")).code == 0
    empty = _worktree_run(source, tmp_path / "empty", {})
    source.bench.script({})
    in_place = source.relay(out=tmp_path / "in-place")
    assert in_place.code == 0
    (tmp_path / "in-place" / "mine.txt").write_text("the user's own file\n")

    planned = _prune(source, "--dry-run")
    assert planned["dryRun"] is True
    assert sorted((r["outDir"], r["reason"]) for r in planned["removed"]) == sorted([
        (str(tmp_path / "applied"), "applied"),
        (str(tmp_path / "empty"), "no change to land"),
        (str(tmp_path / "in-place"), "worked in place; its change is in the tree"),
    ])  # fmt: skip
    kept_id = kept["relayRunId"]
    assert [(r["outDir"], r["reason"]) for r in planned["kept"]] == [(
        str(tmp_path / "kept"),
        f"unlanded work in its worktree or branch: land it (runs apply {kept_id}) or drop it "
        f"(runs discard {kept_id}), or prune --force",
    )]  # fmt: skip
    assert (tmp_path / "applied" / "result.json").exists()  # a dry run removes nothing

    done = _prune(source)
    assert not (tmp_path / "applied").exists() and not (tmp_path / "empty").exists()
    assert sorted(p.name for p in (tmp_path / "in-place").iterdir()) == ["mine.txt"]
    left = [r["left"] for r in done["removed"] if r["outDir"] == str(tmp_path / "in-place")]
    assert left == [["mine.txt"]]
    assert (tmp_path / "kept" / "result.json").exists()
    assert source.worktrees() == [str(source.repo), kept["worktree"]["path"]]
    assert source.branches() == sorted(["main", kept["worktree"]["branch"]])
    assert (source.repo / "b.txt").read_text() == "b\n"  # the applied change stays applied
    assert empty["worktree"]["branch"] not in source.branches()

    forced = _prune(source, "--force")
    assert [(r["outDir"], r["reason"]) for r in forced["removed"]] == [
        (str(tmp_path / "kept"), "unlanded work in its worktree or branch (dropped: --force)")
    ]
    assert source.worktrees() == [str(source.repo)] and source.branches() == ["main"]


def test_an_orphan_worktree_is_removed_only_when_it_holds_nothing(source, tmp_path):
    clean = _worktree_run(source, tmp_path / "clean", {})
    busy = _worktree_run(source, tmp_path / "busy", BRIEF_EDIT)
    for result in (clean, busy):  # no record names the worktrees any more: orphans
        shutil.rmtree(source.state / "delegate-skills" / "runs" / result["relayRunId"])
    done = _prune(source)
    orphans = {Path(o["path"]).name: (o["prunable"], o["removed"]) for o in done["orphans"]}
    assert orphans == {
        Path(clean["worktree"]["path"]).name: (True, True),
        Path(busy["worktree"]["path"]).name: (False, False),
    }
    assert source.worktrees() == [str(source.repo), busy["worktree"]["path"]]
    assert clean["worktree"]["branch"] not in source.branches()


def test_older_than_spares_younger_runs_and_runs_py_prunes_the_same(source, tmp_path):
    source.bench.script({})
    assert source.relay(out=tmp_path / "young").code == 0
    spared = _prune(source, "--older-than", "1d")
    assert [(r["outDir"], r["reason"]) for r in spared["kept"]] == [
        (str(tmp_path / "young"), "ended less than 24h ago")
    ]
    assert spared["removed"] == []
    default = _prune(source, "--older-than", "15m")
    assert [r["reason"] for r in default["kept"]] == ["ended less than 15m ago"]
    bad = source.delegate("runs", "prune", "--older-than", "soon")
    assert bad.code == 2 and "7d, 12h, 90m" in bad.err
    script = run([PYTHON, RUNS_PY, "prune", "--older-than", "0"], env=source.env, cwd=source.repo)
    assert script.code == 0, script
    assert [r["outDir"] for r in json.loads(script.out)["removed"]] == [str(tmp_path / "young")]
    assert not (tmp_path / "young").exists()
    git(source.repo, "status")  # the repository is fine


def test_the_text_a_person_reads():
    from delegate_skills.commands.landing_cli import prune_text

    report = {
        "dryRun": True,
        "removed": [{"id": "ab12", "outDir": "/r/a", "reason": "applied"}],
        "kept": [{"id": None, "outDir": "/r/b", "reason": "younger than --older-than"}],
        "orphans": [
            {"path": "/w/x", "prunable": True, "removed": False, "reason": "no run names it"},
            {"path": "/w/y", "prunable": False, "removed": False, "reason": "holds changes"},
        ],
    }
    assert prune_text(report).splitlines() == [
        "would remove ab12 /r/a: applied",
        "would remove worktree /w/x: no run names it",
        "kept worktree /w/y: holds changes",
        "kept - /r/b: younger than --older-than",
    ]
    assert prune_text({"dryRun": False, "removed": [], "kept": [], "orphans": []}) == (
        "nothing to prune"
    )


def test_a_running_run_is_never_pruned_whatever_its_age(source, tmp_path):
    import signal

    from fakes import wait_for

    source.bench.script({"actions": [{"wait": "forever"}]})
    proc = source.bench.start(env=source.env)
    try:
        wait_for(lambda: len(source.bench.fake.calls("run")) == 1)
        report = _prune(source, "--force")  # no minimum age, unlanded work or not
        assert report["removed"] == [] and report["kept"] == []
        assert (source.bench.out / "run.json").exists()
        listed = json.loads(source.delegate("runs", "list", "--json").out)["runs"]
        assert [r["status"] for r in listed] == ["running"]
    finally:
        proc.send_signal(signal.SIGINT)
        proc.communicate(timeout=60)
