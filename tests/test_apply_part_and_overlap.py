"""Landing part of a run (`runs apply --only/--exclude`), and the run's overlap with the
user's own uncommitted work (result.json `overlap`, the summary, `runs apply`).

Each test has its own source repository, fake codex and state dir (test_worktree.Source);
the files, their bytes and the paths each command must name are written out here.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from conftest import PYTHON, commit_all, git
from test_first_contact import terminal_output
from test_worktree import Source

ROOT = Path(__file__).resolve().parent.parent
RUNS_SCRIPT = ROOT / "skills" / "codex-delegate" / "scripts" / "runs.py"
SKILL = ROOT / "skills" / "codex-delegate" / "SKILL.md"
NOTES = "line 1\nline 2\nline 3\n"
#: The user's own uncommitted edit to NOTES.md: its first line.
NOTES_MINE = "LINE ONE, mine\nline 2\nline 3\n"
TWO_FILES = {"actions": [{"append": ["a.txt", "run\n"]}, {"write": ["made.txt", "one\ntwo\n"]}]}
WITH_DOCS = {
    "actions": [
        {"append": ["a.txt", "run\n"]},
        {"write": ["docs/x.md", "x\n"]},
        {"write": ["docs/y.md", "y\n"]},
    ]
}


@pytest.fixture
def source(tmp_path, home) -> Source:
    made = Source(tmp_path)
    (made.repo / "NOTES.md").write_text(NOTES)
    (made.repo / "b.txt").write_text("b\n")
    (made.repo / "docs").mkdir()
    (made.repo / "docs" / "index.md").write_text("docs\n")
    commit_all(made.repo, "more files")
    return made


def _worktree_run(source: Source, scenario: dict) -> dict:
    source.bench.script(scenario)
    run = source.relay("--worktree")
    assert run.code == 0, run
    return run.result


def _runs_script(source: Source, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [PYTHON, str(RUNS_SCRIPT), *args],
        capture_output=True, text=True, env=source.env, timeout=120,
    )  # fmt: skip


def _record(source: Source, run_id: str) -> dict:
    path = source.state / "delegate-skills" / "runs" / run_id / "record.json"
    return json.loads(path.read_text())


def _user_work(source: Source) -> None:
    """Uncommitted work of the user's in files the runs here never touch."""
    (source.repo / "b.txt").write_text("b, edited by me\n")
    (source.repo / "mine.txt").write_text("untracked, mine\n")


# ---------------------------------------------------------------- landing part of a run


def test_apply_only_one_of_two_files_then_undo_restores_exactly_the_prior_state(source):
    _worktree_run(source, TWO_FILES)
    _user_work(source)
    status_before = source.status()
    done = source.delegate("runs", "apply", str(source.bench.out), "--only", "a.txt", "--json")
    assert done.code == 0, done.err
    report = json.loads(done.out)
    assert report["applied"] == ["a.txt"]
    assert (report["added"], report["modified"], report["deleted"]) == ([], ["a.txt"], [])
    assert report["leftOut"] == ["made.txt"]
    assert report["overlap"] == []
    assert (source.repo / "a.txt").read_text() == "first\nrun\n"
    assert not (source.repo / "made.txt").exists()
    assert source.status() == " M a.txt\n M b.txt\n?? mine.txt\n"
    undone = source.delegate("runs", "undo", str(source.bench.out), "--json")
    assert undone.code == 0, undone.err
    assert json.loads(undone.out)["restored"] == ["a.txt"]
    assert (source.repo / "a.txt").read_text() == "first\n"
    assert not (source.repo / "made.txt").exists()
    assert (source.repo / "b.txt").read_bytes() == b"b, edited by me\n"
    assert (source.repo / "mine.txt").read_bytes() == b"untracked, mine\n"
    assert source.status() == status_before == " M b.txt\n?? mine.txt\n"


def test_apply_exclude_leaves_a_folder_out_and_says_so(source):
    result = _worktree_run(source, WITH_DOCS)
    argv = [PYTHON, "-m", "delegate_skills", "runs", "apply", str(source.bench.out)]
    code, seen = terminal_output([*argv, "--exclude", "docs/"], source.env, "stdout")
    assert code == 0, seen
    assert seen.decode().replace("\r\n", "\n").splitlines()[:5] == [
        f"applied 1 file(s) from {result['worktree']['branch']} into {source.repo}, not committed:",
        "  modified a.txt",
        "left out 2 file(s) the run changed:",
        "  docs/x.md",
        "  docs/y.md",
    ]
    assert (source.repo / "a.txt").read_text() == "first\nrun\n"
    assert sorted(p.name for p in (source.repo / "docs").iterdir()) == ["index.md"]
    record = _record(source, json.loads((source.bench.out / "run.json").read_text())["id"])
    assert record["landing"]["leftOut"] == ["docs/x.md", "docs/y.md"]


def test_only_and_exclude_together_exclude_wins(source):
    _worktree_run(source, WITH_DOCS)
    done = _runs_script(source, "apply", str(source.bench.out), "--only", "docs",
                        "--exclude", "docs/y.md")  # fmt: skip
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert (report["applied"], report["leftOut"]) == (["docs/x.md"], ["a.txt", "docs/y.md"])
    assert (source.repo / "docs" / "x.md").read_text() == "x\n"
    assert not (source.repo / "docs" / "y.md").exists()
    assert (source.repo / "a.txt").read_text() == "first\n"


def test_a_path_the_run_did_not_change_is_a_one_line_error_and_nothing_lands(source):
    _worktree_run(source, TWO_FILES)
    status = source.status()
    done = source.delegate("runs", "apply", str(source.bench.out), "--only", "a.txt",
                           "--only", "nope.txt")  # fmt: skip
    assert done.code == 2
    assert done.err.count("\n") == 1
    assert "--only nope.txt: the run did not change that path" in done.err
    assert "nothing was applied" in done.err
    by_script = _runs_script(source, "apply", str(source.bench.out), "--exclude", "b.txt")
    assert by_script.returncode == 2
    assert by_script.stderr.startswith("runs.py: --exclude b.txt: the run did not change")
    assert by_script.stderr.count("\n") == 1
    prefix = source.delegate("runs", "apply", str(source.bench.out), "--only", "made")
    assert (prefix.code, prefix.err.count("\n")) == (2, 1)  # a name's start is not a folder
    assert "--only made: the run did not change that path" in prefix.err
    outside = source.delegate("runs", "apply", str(source.bench.out), "--only", "../a.txt")
    assert outside.code == 2
    assert "--only ../a.txt: give a path relative to the repository root" in outside.err
    nothing = source.delegate("runs", "apply", str(source.bench.out), "--only", "a.txt",
                              "--exclude", "a.txt")  # fmt: skip
    assert nothing.code == 2
    assert "leave nothing of the run's change to apply" in nothing.err
    no_value = _runs_script(source, "apply", str(source.bench.out), "--only")
    assert (no_value.returncode, no_value.stderr) == (2, "runs.py: --only requires a value\n")
    assert source.status() == status == ""
    shown = json.loads(source.delegate("runs", "show", str(source.bench.out), "--json").out)
    assert shown["landing"] == "pending"


def test_help_and_skill_text_say_what_apply_lands_and_how_to_land_part(source):
    helped = source.delegate("runs", "apply", "--help")
    assert helped.code == 0
    text = " ".join(helped.out.split())
    assert "--only PATH" in text and "--exclude PATH" in text
    assert "lands the run's recorded change" in text
    scripted = _runs_script(source, "--help")
    assert "python3 runs.py apply <out-dir> [--only <path>]... [--exclude <path>]..." in (
        scripted.stdout
    )
    skill = " ".join(SKILL.read_text().split())
    assert "`runs.py apply` lands the run's recorded change" in skill
    assert "`runs.py apply <run id> --only PATH` (repeatable) lands only those files" in skill


# ---------------------------------------------------------------- overlap with the user's work


def test_in_place_overlap_names_the_file_the_user_had_edited(source):
    (source.repo / "NOTES.md").write_text(NOTES_MINE)
    (source.repo / "scratch.txt").write_text("mine\n")  # untracked, the run leaves it alone
    source.bench.script({"actions": [{"append": ["NOTES.md", "by the run\n"]},
                                     {"write": ["other.txt", "new\n"]}]})  # fmt: skip
    run = source.relay()
    assert run.code == 0, run
    result = run.result
    assert result["overlap"] == ["NOTES.md"]
    keys = list(result)
    assert keys[keys.index("changes") : keys.index("changes") + 3] == [
        "changes", "overlap", "relayRunId",
    ]  # fmt: skip
    assert (
        "overlap: 1 path(s) this run changed held your uncommitted changes from before it: "
        "NOTES.md" in run.out.splitlines()
    )
    assert _record(source, result["relayRunId"])["overlap"] == ["NOTES.md"]
    listed = source.delegate("runs", "list", "--json")
    assert listed.code == 0, listed.err
    [row] = json.loads(listed.out)["runs"]
    assert (row["id"], row["overlap"]) == (result["relayRunId"], ["NOTES.md"])


def test_in_place_overlap_counts_staged_and_untracked_work(source):
    (source.repo / "b.txt").write_text("b, staged\n")
    git(source.repo, "add", "b.txt")
    (source.repo / "draft.md").write_text("draft\n")
    source.bench.script({"actions": [{"append": ["draft.md", "more\n"]},
                                     {"append": ["b.txt", "more\n"]},
                                     {"append": ["a.txt", "more\n"]}]})  # fmt: skip
    run = source.relay()
    assert run.code == 0, run
    assert run.result["overlap"] == ["b.txt", "draft.md"]


def test_in_place_overlap_is_empty_when_the_run_touches_other_files(source):
    (source.repo / "NOTES.md").write_text(NOTES_MINE)
    source.bench.script({"actions": [{"write": ["other.txt", "new\n"]}]})
    run = source.relay()
    assert run.code == 0, run
    assert run.result["overlap"] == []
    assert not [line for line in run.out.splitlines() if line.startswith("overlap:")]
    assert _record(source, run.result["relayRunId"])["overlap"] == []


def test_in_place_overlap_before_the_first_commit_is_every_file_the_run_changed(tmp_path, home):
    from fakes import relay
    from relaykit import Bench

    bench = Bench(tmp_path, "codex")  # a repository with no commit yet
    (bench.work / "NOTES.md").write_text(NOTES)
    bench.script({"actions": [{"append": ["NOTES.md", "more\n"]}, {"write": ["x.txt", "x\n"]}]})
    args = ["--brief", str(bench.brief), "--cd", str(bench.work), "--out-dir", str(bench.out)]
    run = relay("codex", *args, env=bench.fake.env(), out_dir=bench.out)
    assert run.code == 0, run
    assert run.result["overlap"] == ["NOTES.md"]


def test_overlap_is_null_without_a_change_record(tmp_path, home):
    from fakes import relay
    from relaykit import Bench

    bench = Bench(tmp_path, "codex", repo=False)
    bench.script({"actions": [{"write": ["x.txt", "x\n"]}]})
    args = ["--brief", str(bench.brief), "--cd", str(bench.work), "--out-dir", str(bench.out)]
    run = relay("codex", *args, env=bench.fake.env(), out_dir=bench.out)
    assert run.code == 0, run
    assert (run.result["changes"], run.result["overlap"]) == (None, None)


def test_worktree_run_overlap_is_named_at_apply_and_nothing_of_the_user_is_lost(source):
    result = _worktree_run(
        source, {"actions": [{"append": ["NOTES.md", "by the run\n"]},
                             {"write": ["made.txt", "one\n"]}]},
    )  # fmt: skip
    assert result["overlap"] is None  # known only against the source, when it lands
    (source.repo / "NOTES.md").write_text(NOTES_MINE)
    done = source.delegate("runs", "apply", str(source.bench.out), "--json")
    assert done.code == 0, done.err
    assert done.err == (
        "note: NOTES.md hold(s) uncommitted changes of yours: the run's change is merged "
        "into them, never over them (runs undo puts back what they hold now)\n"
    )
    report = json.loads(done.out)
    assert (report["applied"], report["overlap"]) == (["NOTES.md", "made.txt"], ["NOTES.md"])
    assert (source.repo / "NOTES.md").read_text() == NOTES_MINE + "by the run\n"
    record = _record(source, result["relayRunId"])
    assert (record["overlap"], record["landing"]["overlap"]) == (["NOTES.md"], ["NOTES.md"])
    undone = source.delegate("runs", "undo", str(source.bench.out))
    assert undone.code == 0, undone.err
    assert (source.repo / "NOTES.md").read_bytes() == NOTES_MINE.encode()
    assert not (source.repo / "made.txt").exists()


def test_a_conflicting_overlap_is_still_refused_in_one_line_with_nothing_lost(source):
    _worktree_run(source, {"actions": [{"write": ["NOTES.md", "LINE ONE, the run's\n"]}]})
    (source.repo / "NOTES.md").write_text(NOTES_MINE)
    done = source.delegate("runs", "apply", str(source.bench.out))
    assert done.code == 2
    assert done.err.count("\n") == 1  # the refusal names the file; no note of a merge
    assert "conflict with the run's in NOTES.md; nothing was changed" in done.err
    assert (source.repo / "NOTES.md").read_bytes() == NOTES_MINE.encode()


def test_overlap_at_apply_counts_only_what_lands(source):
    _worktree_run(source, {"actions": [{"append": ["NOTES.md", "by the run\n"]},
                                       {"write": ["made.txt", "one\n"]}]})  # fmt: skip
    (source.repo / "NOTES.md").write_text(NOTES_MINE)
    done = source.delegate("runs", "apply", str(source.bench.out), "--only", "made.txt", "--json")
    assert done.code == 0, done.err
    assert done.err == ""
    report = json.loads(done.out)
    assert (report["applied"], report["leftOut"], report["overlap"]) == (
        ["made.txt"], ["NOTES.md"], [],
    )  # fmt: skip
    assert (source.repo / "NOTES.md").read_bytes() == NOTES_MINE.encode()


def test_a_second_part_lands_beside_the_first_and_undo_takes_back_both(source):
    _worktree_run(source, WITH_DOCS)
    _user_work(source)
    (source.repo / "docs" / "index.md").write_text("docs, edited by me\n")
    status_before = source.status()
    out = str(source.bench.out)
    assert source.delegate("runs", "apply", out, "--only", "docs/x.md").code == 0
    second = source.delegate("runs", "apply", out, "--exclude", "docs/x.md", "--json")
    assert second.code == 0, second.err
    assert json.loads(second.out)["applied"] == ["a.txt", "docs/y.md"]
    assert (source.repo / "docs" / "x.md").read_text() == "x\n"
    undone = source.delegate("runs", "undo", out, "--json")
    assert undone.code == 0, undone.err
    assert json.loads(undone.out)["restored"] == ["a.txt", "docs/x.md", "docs/y.md"]
    assert source.status() == status_before
    assert (source.repo / "a.txt").read_text() == "first\n"
    assert (source.repo / "docs" / "index.md").read_bytes() == b"docs, edited by me\n"
    assert (source.repo / "b.txt").read_bytes() == b"b, edited by me\n"
