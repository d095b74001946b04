"""`--worktree`, `delegate fanout`, `runs apply` and `runs discard`, with the fake CLI.

Each test has its own state dir (where worktrees go) and its own source
repository; expected branches, files and statuses are written out here.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
from pathlib import Path

import pytest
from conftest import PYTHON, commit_all, delegate, fleet_doc, git, tagged, write_json
from fakes import wait_for
from relaykit import Bench, finish

from delegate_skills.approval import approval_path, digest

BRIEF_EDIT = {"actions": [{"write": ["made.txt", "one\ntwo\n"]}, {"append": ["a.txt", "run\n"]}]}


def porcelain(repo: Path) -> str:
    """`git status --porcelain` as git prints it (conftest's git() strips the ends)."""
    done = subprocess.run(
        ["git", "-C", str(repo), "status", "--porcelain"],
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout


class Source:
    """A source repository with one commit, a fake codex, and a state dir of its own."""

    def __init__(self, tmp_path: Path) -> None:
        self.bench = Bench(tmp_path, "codex")
        self.repo = self.bench.work
        (self.repo / "a.txt").write_text("first\n")
        commit_all(self.repo, "start")
        self.head = git(self.repo, "rev-parse", "HEAD").strip()
        self.state = tmp_path / "state"
        self.env = self.bench.fake.env(XDG_STATE_HOME=str(self.state), TMPDIR=str(tmp_path))

    def relay(self, *extra: str, out: Path | None = None):
        from fakes import relay

        out = out or self.bench.out
        args = ["--brief", str(self.bench.brief), "--cd", str(self.repo), "--out-dir", str(out)]
        return relay("codex", *args, *extra, env=self.env, out_dir=out)

    def delegate(self, *args: str):
        return delegate(*args, env=self.env)

    def worktrees(self) -> list[str]:
        listed = git(self.repo, "worktree", "list", "--porcelain")
        return [
            line[len("worktree ") :] for line in listed.splitlines() if line.startswith("worktree ")
        ]

    def branches(self) -> list[str]:
        return git(self.repo, "branch", "--format=%(refname:short)").split()

    def status(self) -> str:
        return porcelain(self.repo)


@pytest.fixture
def source(tmp_path, home) -> Source:
    return Source(tmp_path)


# ---------------------------------------------------------------- --worktree


def test_worktree_run_edits_the_worktree_and_leaves_the_source_alone(source):
    source.bench.script(BRIEF_EDIT)
    run = source.relay("--worktree")
    assert run.code == 0, run
    result = run.result
    assert result["status"] == "completed"
    tree = result["worktree"]
    assert tree["branch"].startswith("delegate/")
    assert tree["base"] == source.head
    assert tree["source"] == str(source.repo)
    assert tree["sourceUncommitted"] == 0
    path = Path(tree["path"])
    assert path.parent == source.state / "delegate-skills" / "worktrees"
    assert not str(path).startswith(str(source.repo) + os.sep)
    assert (path / "made.txt").read_text() == "one\ntwo\n"
    assert (path / "a.txt").read_text() == "first\nrun\n"
    assert result["workdir"] == str(path)
    assert result["touchedFiles"] == [" M a.txt", "?? made.txt"]
    assert result["diffstat"] == {
        "filesChanged": 2,
        "linesAdded": 3,
        "linesRemoved": 0,
        "files": [
            {"path": "a.txt", "added": 1, "removed": 0},
            {"path": "made.txt", "added": 2, "removed": 0},
        ],
    }
    assert source.status() == ""
    assert (source.repo / "a.txt").read_text() == "first\n"
    assert not (source.repo / "made.txt").exists()
    assert source.bench.fake.run_call()["cwd"] == str(path)
    assert source.branches() == sorted(["main", tree["branch"]])
    assert source.worktrees() == [str(source.repo), str(path)]
    # The worktree's own index is untouched: the new file is still untracked there.
    assert porcelain(path) == " M a.txt\n?? made.txt\n"


def test_worktree_run_from_a_subfolder_runs_in_the_same_subfolder(source):
    (source.repo / "pkg").mkdir()
    (source.repo / "pkg" / "m.py").write_text("x = 1\n")
    commit_all(source.repo, "pkg")
    source.bench.script({})
    from fakes import relay

    out = source.bench.out
    args = ["--brief", str(source.bench.brief), "--cd", str(source.repo / "pkg")]
    run = relay("codex", *args, "--out-dir", str(out), "--worktree", env=source.env, out_dir=out)
    assert run.code == 0, run
    path = Path(run.result["worktree"]["path"])
    assert run.result["workdir"] == str(path / "pkg")
    assert source.bench.fake.run_call()["cwd"] == str(path / "pkg")


def test_uncommitted_source_changes_are_named_and_left_out(source):
    (source.repo / "a.txt").write_text("first\nlocal edit\n")
    (source.repo / "new.txt").write_text("local\n")
    source.bench.script({})
    run = source.relay("--worktree")
    assert run.code == 0, run
    assert run.result["worktree"]["sourceUncommitted"] == 2
    assert "has 2 uncommitted change(s); they are not in the worktree" in run.err
    path = Path(run.result["worktree"]["path"])
    assert (path / "a.txt").read_text() == "first\n"
    assert not (path / "new.txt").exists()
    assert source.status() == " M a.txt\n?? new.txt\n"
    assert "2 uncommitted change(s)" in run.out


def test_usage_error_after_the_worktree_is_made_leaves_none_behind(source):
    source.bench.script({})
    run = source.relay("--worktree", "--timeout", "soon")
    assert run.code == 2
    assert run.err.startswith("relay: --timeout")
    assert source.worktrees() == [str(source.repo)]
    assert source.branches() == ["main"]
    assert not source.bench.out.exists()


def test_worktree_needs_a_repository_and_a_commit(tmp_path, home):
    bench = Bench(tmp_path, "codex", repo=False)
    from fakes import relay

    args = ["--brief", str(bench.brief), "--cd", str(bench.work), "--out-dir", str(bench.out)]
    run = relay("codex", *args, "--worktree", env=bench.fake.env(), out_dir=bench.out)
    assert run.code == 2
    assert run.err == (
        f"relay: --worktree needs --cd inside a git work tree; {bench.work} is not in one\n"
    )
    empty = Bench(tmp_path / "b", "codex")
    args = ["--brief", str(empty.brief), "--cd", str(empty.work), "--out-dir", str(empty.out)]
    run = relay("codex", *args, "--worktree", env=empty.fake.env(), out_dir=empty.out)
    assert run.code == 2
    assert "has none yet; commit first" in run.err


# ---------------------------------------------------------------- approval


def _approved_lanes(source: Source, lanes: dict) -> None:
    doc = write_json(source.repo.parent / "lanes.json", fleet_doc(lanes))
    done = source.delegate(
        "config", "write", "--scope", "project", "--cwd", str(source.repo), str(doc)
    )
    assert done.code == 0, done.err
    commit_all(source.repo, "lanes")


def test_approval_carries_over_when_the_bytes_are_the_approved_ones(source):
    _approved_lanes(source, {"quick": {"implementer": "codex", "timeout": "7m"}})
    source.bench.script({})
    run = source.relay("--worktree", "--lane", "quick")
    assert run.code == 0, run
    assert (run.result["lane"], run.result["laneSource"]) == ("quick", "project")
    path = Path(run.result["worktree"]["path"])
    raw = (path / ".delegate" / "config.json").read_bytes()
    git_dir = git(path, "rev-parse", "--absolute-git-dir").strip()
    assert Path(approval_path(git_dir)).read_bytes() == f"{digest(raw)}\n".encode()


#: A relay run in this process, with site-packages (filelock importable);
#: prints whether filelock was imported. argv[1:] are the relay's flags.
RELAY_IN_PROCESS = """
import sys
from delegate_skills.skillscripts.relay import main
code = main("codex", sys.argv[1:])
print(code, "filelock" in sys.modules)
"""


def test_a_relay_takes_its_write_locks_without_filelock(source):
    """The run's record and the carried approval are written under the flock taken by hand.

    So an installed relay runs what a skill folder runs, and parallel relays
    stay small; the lock is the one filelock takes (tests/test_write_queue.py).
    """
    import importlib.util

    assert importlib.util.find_spec("filelock") is not None
    _approved_lanes(source, {"quick": {"implementer": "codex", "timeout": "7m"}})
    source.bench.script({})
    out = source.bench.out
    args = ["--brief", str(source.bench.brief), "--cd", str(source.repo), "--out-dir", str(out)]
    done = subprocess.run(
        [PYTHON, "-c", RELAY_IN_PROCESS, *args, "--worktree", "--lane", "quick"],
        capture_output=True,
        text=True,
        env=source.env,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )
    assert done.stdout.splitlines()[-1] == "0 False", done
    result = json.loads((out / "result.json").read_text())
    assert (result["status"], result["laneSource"]) == ("completed", "project")
    records = source.state / "delegate-skills" / "runs"
    record = json.loads((records / result["relayRunId"] / "record.json").read_text())
    assert record["outDir"] == str(out) and record["ended"]["status"] == "completed"
    assert (records / result["relayRunId"] / "record.json.lock").exists()


def test_a_config_edited_after_approval_is_not_carried_over(source):
    _approved_lanes(source, {"quick": {"implementer": "codex", "timeout": "7m"}})
    config = source.repo / ".delegate" / "config.json"
    config.write_bytes(config.read_bytes().replace(b'"7m"', b'"8m"'))
    commit_all(source.repo, "edited, not approved")
    source.bench.script({})
    run = source.relay("--worktree", "--lane", "quick")
    assert run.code == 2
    assert "project fleet config is not trusted" in run.err
    assert source.worktrees() == [str(source.repo)]
    assert source.branches() == ["main"]


# ---------------------------------------------------------------- fanout


def _fanout(source: Source, *args: str) -> tuple[int, dict, str]:
    done = source.delegate(
        "fanout", "--brief", str(source.bench.brief), "--cd", str(source.repo), *args, "--json"
    )
    return done.code, json.loads(done.out) if done.out.strip() else {}, done.err


def test_fanout_over_two_lanes_gives_two_completed_runs_in_two_worktrees(source):
    _approved_lanes(
        source,
        {"fast": {"implementer": "codex", "timeout": "5m"}, "slow": {"implementer": "codex"}},
    )
    source.bench.script(BRIEF_EDIT)
    code, report, err = _fanout(source, "--lane", "fast", "--lane", "slow")
    assert code == 0, (err, [r.get("error") for r in report.get("runs", [])])
    runs = report["runs"]
    assert [(r["lane"], r["implementer"], r["status"]) for r in runs] == [
        ("fast", "codex", "completed"),
        ("slow", "codex", "completed"),
    ]
    paths = [r["worktree"]["path"] for r in runs]
    assert len(set(paths)) == 2
    for row in runs:
        assert set(row) >= {"outDir", "lane", "implementer", "status", "worktree", "diffstat"}
        assert row["diffstat"]["filesChanged"] == 2
        assert row["exitCode"] == 0
        result = json.loads(Path(row["outDir"], "result.json").read_text())
        assert (result["lane"], result["laneSource"]) == (row["lane"], "project")
        assert result["worktree"] == row["worktree"]
        assert Path(row["worktree"]["path"], "made.txt").read_text() == "one\ntwo\n"
    assert source.status() == ""
    assert sorted(source.worktrees()) == sorted([str(source.repo), *paths])


def test_fanout_reports_a_refused_lane_and_leaves_no_worktree_for_it(source):
    _approved_lanes(source, {"fast": {"implementer": "codex"}})
    config = source.repo / ".delegate" / "config.json"
    config.write_bytes(config.read_bytes().replace(b"}\n  }", b', "timeout": "9m"}\n  }'))
    commit_all(source.repo, "edited, not approved")
    source.bench.script({})
    code, report, _err = _fanout(source, "--lane", "fast", "--implementer", "codex")
    assert code == 1
    refused, plain = report["runs"]
    assert refused["status"] == "refused"
    assert "project fleet config is not trusted" in refused["error"]
    assert refused["worktree"] is None
    assert plain["status"] == "completed", plain
    assert source.worktrees() == [str(source.repo), plain["worktree"]["path"]]


def test_fanout_refuses_an_unknown_lane_before_starting_anything(source):
    code, report, err = _fanout(source, "--lane", "nope")
    assert (code, report) == (2, {})
    assert err == "delegate: --lane nope: fleet lane not found (see `delegate lane list`)\n"
    assert source.worktrees() == [str(source.repo)]


def test_sigint_to_fanout_aborts_every_run_and_leaves_nothing_running(source):
    source.bench.script({"actions": [{"wait": "forever"}]})
    proc = subprocess.Popen(
        [PYTHON, "-m", "delegate_skills", "fanout", "--brief", str(source.bench.brief),
         "--cd", str(source.repo), "--implementer", "codex", "--implementer", "codex", "--json"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=source.env,
    )  # fmt: skip
    try:
        wait_for(lambda: len(source.bench.fake.calls("run")) == 2)
        proc.send_signal(signal.SIGINT)
        code, out, err = finish(proc)
    finally:
        proc.kill()
        proc.wait()
    assert code == 130, err
    runs = json.loads(out)["runs"]
    assert [r["status"] for r in runs] == ["aborted", "aborted"]
    for row in runs:
        result = json.loads(Path(row["outDir"], "result.json").read_text())
        assert (result["status"], result["signal"], result["exitCode"]) == (
            "aborted",
            "SIGINT",
            130,
        )
    # Nothing this test started lives on (a confined implementer's pid is its sandbox's).
    wait_for(lambda: tagged() == [], timeout=10)


def test_fanout_jobs_one_runs_one_at_a_time(source):
    source.bench.script({"actions": [{"pid_file": "pid.txt"}]})
    code, report, err = _fanout(
        source, "--implementer", "codex", "--implementer", "codex", "--jobs", "1"
    )
    assert code == 0, err
    calls = source.bench.fake.calls("run")
    assert len(calls) == 2
    first, second = (
        json.loads(Path(r["outDir"], "result.json").read_text()) for r in report["runs"]
    )
    assert first["finishedAt"] <= second["startedAt"]


def test_fanout_usage_errors(source):
    assert _fanout(source)[0] == 2
    assert "give at least one --lane or --implementer" in _fanout(source)[2]
    code, _, err = _fanout(source, "--implementer", "codex", "--jobs", "0")
    assert code == 2 and "--jobs" in err
    code, _, err = _fanout(source, "--implementer", "nosuch")
    assert code == 2 and "--implementer nosuch: unknown implementer" in err


# ---------------------------------------------------------------- apply and discard


def _worktree_run(source: Source, scenario: dict | None = None, out: Path | None = None) -> dict:
    source.bench.script(scenario or BRIEF_EDIT)
    run = source.relay("--worktree", out=out)
    assert run.code == 0, run
    return run.result


def test_apply_brings_the_change_in_without_a_commit(source):
    result = _worktree_run(source)
    (source.repo / "other.txt").write_text("mine\n")  # an unrelated local change stays
    done = source.delegate("runs", "apply", str(source.bench.out), "--json")
    assert done.code == 0, done.err
    report = json.loads(done.out)
    assert report["applied"] == ["a.txt", "made.txt"]
    assert (report["added"], report["modified"], report["deleted"]) == (
        ["made.txt"],
        ["a.txt"],
        [],
    )
    assert git(source.repo, "rev-parse", "HEAD").strip() == source.head
    assert source.status() == " M a.txt\n?? made.txt\n?? other.txt\n"
    assert (source.repo / "a.txt").read_text() == "first\nrun\n"
    assert (source.repo / "made.txt").read_text() == "one\ntwo\n"
    assert git(source.repo, "diff", "--cached", "--name-only") == ""
    assert Path(result["worktree"]["path"]).is_dir()  # apply does not discard


def test_apply_merges_with_a_non_conflicting_local_edit(source):
    (source.repo / "a.txt").write_text("top\nfirst\n")
    commit_all(source.repo, "more lines")
    _worktree_run(source, {"actions": [{"append": ["a.txt", "bottom\n"]}]})
    (source.repo / "a.txt").write_text("TOP\nfirst\n")
    done = source.delegate("runs", "apply", str(source.bench.out))
    assert done.code == 0, done.err
    assert (source.repo / "a.txt").read_text() == "TOP\nfirst\nbottom\n"


def test_apply_refuses_a_conflicting_change_and_names_the_file(source):
    _worktree_run(source)
    (source.repo / "a.txt").write_text("first\nmine\n")
    done = source.delegate("runs", "apply", str(source.bench.out))
    assert done.code == 2
    assert "conflict with the run's in a.txt; nothing was changed" in done.err
    assert done.err.count("\n") == 1
    assert (source.repo / "a.txt").read_text() == "first\nmine\n"
    assert not (source.repo / "made.txt").exists()
    assert source.status() == " M a.txt\n"


def test_apply_never_replaces_an_ignored_file(source):
    (source.repo / ".gitignore").write_text("made.txt\n")
    commit_all(source.repo, "ignore")
    forced_in = [{"git": ["add", "-f", "made.txt"]}]  # tracked in the run despite the ignore
    _worktree_run(source, {"actions": [*BRIEF_EDIT["actions"], *forced_in]})
    (source.repo / "made.txt").write_text("local, ignored\n")
    done = source.delegate("runs", "apply", str(source.bench.out))
    assert done.code == 2
    assert "has files git ignores or does not track where the run writes: made.txt" in done.err
    assert (source.repo / "made.txt").read_text() == "local, ignored\n"
    assert (source.repo / "a.txt").read_text() == "first\n"


def test_apply_includes_the_runs_commits_and_deletions(source):
    (source.repo / "gone.txt").write_text("bye\n")
    commit_all(source.repo, "to delete")
    _worktree_run(
        source,
        {
            "actions": [
                {"write": ["c.txt", "committed\n"]},
                {"git": ["add", "c.txt"]},
                {"git": ["commit", "-q", "-m", "by the run"]},
                {"unlink": "gone.txt"},
            ]
        },
    )
    done = source.delegate("runs", "apply", str(source.bench.out), "--json")
    assert done.code == 0, done.err
    assert json.loads(done.out)["applied"] == ["c.txt", "gone.txt"]
    assert (source.repo / "c.txt").read_text() == "committed\n"
    assert not (source.repo / "gone.txt").exists()
    assert source.status() == " D gone.txt\n?? c.txt\n"


def test_discard_leaves_worktrees_and_branches_as_before(source):
    before = (source.worktrees(), source.branches())
    result = _worktree_run(source)
    assert source.worktrees() != before[0]
    done = source.delegate("runs", "discard", str(source.bench.out), "--json")
    assert done.code == 0, done.err
    assert json.loads(done.out)["deletedBranch"] == result["worktree"]["branch"]
    assert (source.worktrees(), source.branches()) == before
    assert not Path(result["worktree"]["path"]).exists()


def test_discard_refuses_unlanded_commits_without_force(source):
    before = (source.worktrees(), source.branches())
    result = _worktree_run(
        source,
        {"actions": [{"write": ["c.txt", "x\n"]}, {"git": ["add", "c.txt"]},
                     {"git": ["commit", "-q", "-m", "run"]}]},
    )  # fmt: skip
    done = source.delegate("runs", "discard", str(source.bench.out))
    assert done.code == 2
    assert f"{result['worktree']['branch']} has 1 commit(s)" in done.err
    assert Path(result["worktree"]["path"]).is_dir()
    forced = source.delegate("runs", "discard", str(source.bench.out), "--force", "--json")
    assert forced.code == 0, forced.err
    assert json.loads(forced.out)["droppedCommits"] == 1
    assert (source.worktrees(), source.branches()) == before


def test_apply_and_discard_refuse_a_plain_run(source):
    source.bench.script({})
    assert source.relay().code == 0
    for verb in ("apply", "discard"):
        done = source.delegate("runs", verb, str(source.bench.out))
        assert done.code == 2
        assert "not a --worktree run" in done.err


def test_skill_folder_runs_script_applies_and_discards(source):
    _worktree_run(source)
    script = (
        Path(__file__).resolve().parent.parent / "skills" / "codex-delegate" / "scripts" / "runs.py"
    )
    applied = subprocess.run(
        ["python3", str(script), "apply", str(source.bench.out)],
        capture_output=True, text=True, env=source.env, timeout=60,
    )  # fmt: skip
    assert applied.returncode == 0, applied.stderr
    assert json.loads(applied.stdout)["applied"] == ["a.txt", "made.txt"]
    discarded = subprocess.run(
        ["python3", str(script), "discard", str(source.bench.out)],
        capture_output=True, text=True, env=source.env, timeout=60,
    )  # fmt: skip
    assert discarded.returncode == 0, discarded.stderr
    assert source.branches() == ["main"]
    assert source.status() == " M a.txt\n?? made.txt\n"
