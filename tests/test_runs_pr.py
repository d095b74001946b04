"""`delegate runs pr`: a worktree run's recorded change, committed, pushed and opened as a PR.

Each test has a source repository with a local bare remote (`origin`, main
pushed with its upstream), a fake codex and, where a PR is opened, a
stand-in `gh` first on the PATH the test builds: it appends its argv and
cwd to a file and prints a fixed URL. Expected files, messages and argv are
written out here.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import git
from fakes import relay_argv
from relaykit import read_pid
from test_worktree import Source

BRIEF = "Add made.txt and extend a.txt\n\nmade.txt holds two lines; a.txt gets one more.\n"
SUBJECT = "Add made.txt and extend a.txt"
FINAL = "Done: wrote made.txt and appended to a.txt.\n"
PR_URL = "https://github.com/o/r/pull/7"
GH = """#!{python} -S
import json, os, sys
with open({log!r}, "a") as handle:
    handle.write(json.dumps({{"argv": sys.argv[1:], "cwd": os.getcwd()}}) + "\\n")
print({url!r})
"""


def body(run_id: str) -> str:
    """The pull request text the run's record gives (no check run, no review, no tokens)."""
    return (
        f"The change of delegate run {run_id} (codex): 2 file(s), +3 -0.\n"
        "\n"
        "- `a.txt`: modified, +1 -0\n"
        "- `made.txt`: added, +2 -0\n"
        "\n"
        "Check: none was run\n"
        "Review: none recorded\n"
        "\n"
        f"delegate run {run_id}\n"
    )


def quiet_status(repo: Path) -> str:
    """`git status --porcelain` that never refreshes (writes) the index it reads."""
    return subprocess.run(
        ["git", "-C", str(repo), "status", "--porcelain", "-uall"],
        capture_output=True, text=True, check=True, env={**os.environ, "GIT_OPTIONAL_LOCKS": "0"},
    ).stdout  # fmt: skip


def without_gh(path: str) -> str:
    """`path` less every folder that holds a `gh`."""
    return os.pathsep.join(
        folder
        for folder in path.split(os.pathsep)
        if folder and not os.access(os.path.join(folder, "gh"), os.X_OK)
    )


class Remote:
    """A Source whose `origin` is a bare repository here, and a stand-in gh."""

    def __init__(self, tmp_path: Path) -> None:
        self.tmp = tmp_path
        self.source = Source(tmp_path)
        self.repo = self.source.repo
        self.out = self.source.bench.out
        self.source.bench.brief.write_text(BRIEF)
        self.bare = tmp_path / "remote.git"
        git(tmp_path, "init", "-q", "--bare", "-b", "main", str(self.bare))
        git(self.repo, "remote", "add", "origin", str(self.bare))
        git(self.repo, "push", "-q", "-u", "origin", "main")
        self.gh_log = tmp_path / "gh-calls.jsonl"
        gh_bin = tmp_path / "gh-bin"
        gh_bin.mkdir()
        gh = gh_bin / "gh"
        gh.write_text(GH.format(python=sys.executable, log=str(self.gh_log), url=PR_URL))
        gh.chmod(0o755)
        plain = without_gh(self.source.env["PATH"])
        self.env_gh = {**self.source.env, "PATH": f"{gh_bin}{os.pathsep}{plain}"}
        self.env_no_gh = {**self.source.env, "PATH": plain}

    def worktree_run(self, actions: list | None = None) -> tuple[str, dict]:
        """A finished --worktree run: (its id, its result)."""
        if actions is None:
            actions = [
                {"write": ["made.txt", "one\ntwo\n"]},
                {"append": ["a.txt", "run\n"]},
                {"write": [str(self.out / "final.txt"), FINAL]},
            ]
        self.source.bench.script({"actions": actions})
        run = self.source.relay("--worktree")
        assert run.code == 0, run
        return run.result["relayRunId"], run.result

    def pr(self, *args: str, gh: bool = True) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "-m", "delegate_skills", "runs", "pr", *args],
            capture_output=True, text=True, env=self.env_gh if gh else self.env_no_gh,
            timeout=120, stdin=subprocess.DEVNULL,
        )  # fmt: skip

    def remote_ref(self, branch: str) -> str | None:
        done = subprocess.run(
            ["git", "-C", str(self.bare), "rev-parse", "--verify", "--quiet", branch],
            capture_output=True, text=True,
        )  # fmt: skip
        return done.stdout.strip() if done.returncode == 0 else None

    def remote_branches(self) -> list[str]:
        return git(self.bare, "for-each-ref", "--format=%(refname)", "refs/heads").split()

    def gh_calls(self) -> list[dict]:
        if not self.gh_log.exists():
            return []
        return [json.loads(line) for line in self.gh_log.read_text().splitlines()]

    def record(self, run_id: str) -> dict:
        path = self.source.state / "delegate-skills" / "runs" / run_id / "record.json"
        return json.loads(path.read_text())


@pytest.fixture
def remote(tmp_path, home) -> Remote:
    return Remote(tmp_path)


def test_pr_commits_the_recorded_change_on_its_base_pushes_it_and_opens_it(remote):
    run_id, result = remote.worktree_run()
    branch = f"delegate/{run_id}"
    # The user's own uncommitted work in the source: an edit, a staged file, an untracked one.
    (remote.repo / "a.txt").write_text("first\nmine\n")
    (remote.repo / "staged.txt").write_text("staged\n")
    git(remote.repo, "add", "staged.txt")
    (remote.repo / "notes.txt").write_text("notes\n")
    status_before = quiet_status(remote.repo)
    index_before = (remote.repo / ".git" / "index").read_bytes()
    assert status_before == " M a.txt\nA  staged.txt\n?? notes.txt\n"

    done = remote.pr(run_id)

    assert done.returncode == 0, done
    assert (remote.repo / ".git" / "index").read_bytes() == index_before
    assert quiet_status(remote.repo) == status_before
    assert (remote.repo / "a.txt").read_text() == "first\nmine\n"
    commit = remote.remote_ref(f"refs/heads/{branch}")
    assert commit is not None
    assert git(remote.bare, "rev-parse", f"{commit}^@") == remote.source.head
    changed = git(remote.bare, "diff-tree", "-r", "--name-status", remote.source.head, commit)
    assert changed.splitlines() == ["M\ta.txt", "A\tmade.txt"]
    assert git(remote.bare, "show", f"{commit}:made.txt") == "one\ntwo"
    assert git(remote.bare, "show", f"{commit}:a.txt") == "first\nrun"
    assert git(remote.bare, "log", "-1", "--format=%s", commit) == SUBJECT
    assert git(remote.bare, "log", "-1", "--format=%B", commit) == (
        f"{SUBJECT}\n\nDone: wrote made.txt and appended to a.txt.\n\ndelegate run {run_id}"
    )
    assert remote.gh_calls() == [
        {
            "argv": ["pr", "create", "--head", branch, "--base", "main", "--title", SUBJECT,
                     "--body", body(run_id)],
            "cwd": str(remote.repo),
        }
    ]  # fmt: skip
    report = json.loads(done.stdout)
    assert report == {
        "id": run_id, "branch": branch, "commit": commit, "remote": "origin", "base": "main",
        "pushed": "new", "url": PR_URL, "compareUrl": None, "existing": False, "gh": True,
    }  # fmt: skip
    entry = remote.record(run_id)["pr"]
    assert {k: v for k, v in entry.items() if k != "at"} == {
        "branch": branch, "commit": commit, "remote": "origin", "base": "main", "url": PR_URL,
    }  # fmt: skip
    # The source has the branch too; the run's worktree, where it is checked out, follows it.
    assert git(remote.repo, "rev-parse", f"refs/heads/{branch}") == commit
    worktree = Path(result["worktree"]["path"])
    assert git(worktree, "rev-parse", "HEAD") == commit
    assert quiet_status(worktree) == ""


def test_pr_again_pushes_the_same_commit_and_prints_the_url_it_recorded(remote):
    run_id, _ = remote.worktree_run()
    branch = f"delegate/{run_id}"
    first = remote.pr(run_id, "--title", "Two small files", "--draft")
    assert first.returncode == 0, first
    commit = json.loads(first.stdout)["commit"]

    again = remote.pr(run_id)

    assert again.returncode == 0, again
    assert json.loads(again.stdout) == {
        "id": run_id, "branch": branch, "commit": commit, "remote": "origin", "base": "main",
        "pushed": "up to date", "url": PR_URL, "compareUrl": None, "existing": True, "gh": True,
    }  # fmt: skip
    assert remote.remote_ref(f"refs/heads/{branch}") == commit
    assert [call["argv"] for call in remote.gh_calls()] == [
        ["pr", "create", "--head", branch, "--base", "main", "--title", "Two small files",
         "--body", body(run_id), "--draft"],
    ]  # fmt: skip
    # The commit's subject stays the brief's first line; --title names the pull request.
    assert git(remote.bare, "log", "-1", "--format=%s", commit) == SUBJECT


def test_without_gh_the_branch_is_pushed_and_the_compare_page_printed(remote):
    git(remote.repo, "config", "remote.origin.url", "git@github.com:o/r.git")
    git(remote.repo, "config", f"url.{remote.bare}.insteadOf", "git@github.com:o/r.git")
    run_id, _ = remote.worktree_run()
    branch = f"delegate/{run_id}"

    done = remote.pr(run_id, gh=False)

    assert done.returncode == 0, done
    compare = f"https://github.com/o/r/compare/main...{branch}?expand=1"
    report = json.loads(done.stdout)
    commit = report["commit"]
    assert report == {
        "id": run_id, "branch": branch, "commit": commit, "remote": "origin", "base": "main",
        "pushed": "new", "url": None, "compareUrl": compare, "existing": False, "gh": False,
    }  # fmt: skip
    assert remote.remote_ref(f"refs/heads/{branch}") == commit
    assert remote.gh_calls() == []
    entry = remote.record(run_id)["pr"]
    assert {k: v for k, v in entry.items() if k != "at"} == {
        "branch": branch, "commit": commit, "remote": "origin", "base": "main", "url": None,
        "compareUrl": compare,
    }  # fmt: skip


def test_a_running_run_and_an_unknown_run_are_refused(remote):
    remote.source.bench.script(
        {
            "actions": [
                {"write": ["made.txt", "half done\n"]},
                {"pid_file": str(remote.tmp / "child.pid")},
                {"wait": "forever"},
            ],
            "on_term": {"exit": 0},
        }
    )
    args = ["--brief", str(remote.source.bench.brief), "--cd", str(remote.repo),
            "--out-dir", str(remote.out), "--worktree"]  # fmt: skip
    proc = subprocess.Popen(
        relay_argv("codex", *args),
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        env=remote.source.env,
    )  # fmt: skip
    try:
        read_pid(remote.tmp / "child.pid")
        run_id = json.loads((remote.out / "run.json").read_text())["id"]
        done = remote.pr(run_id)
        assert (done.returncode, done.stdout) == (2, "")
        assert done.stderr == (
            f"delegate: {run_id}: the run is still running; wait for it (runs wait {run_id}) "
            "before you open a pull request for it\n"
        )
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.communicate(timeout=60)
        finally:
            proc.kill()
            proc.communicate()
    unknown = remote.pr("zzzzzzzz")
    assert (unknown.returncode, unknown.stdout) == (2, "")
    assert unknown.stderr == (
        "delegate: zzzzzzzz: no run with this id on this machine; `delegate runs list` lists "
        "the runs there are\n"
    )
    assert remote.remote_branches() == ["refs/heads/main"]
    assert remote.gh_calls() == []


def test_a_run_that_changed_nothing_is_refused(remote):
    run_id, _ = remote.worktree_run([])
    done = remote.pr(run_id)
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == (
        f"delegate: {run_id}: the run changed nothing; there is no pull request to open\n"
    )
    assert remote.remote_branches() == ["refs/heads/main"]
    assert remote.gh_calls() == []


def test_an_in_place_run_and_a_source_without_a_remote_are_refused(remote):
    remote.source.bench.script({"actions": [{"write": ["made.txt", "x\n"]}]})
    in_place = remote.source.relay()
    assert in_place.code == 0, in_place
    in_place_id = in_place.result["relayRunId"]
    done = remote.pr(in_place_id)
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == (
        f"delegate: {in_place_id}: runs pr needs a --worktree or --host run; {in_place_id} "
        f"worked in place in {remote.repo}, and its record names no branch or commit it "
        "started from\n"
    )
    (remote.repo / "made.txt").unlink()
    git(remote.repo, "remote", "remove", "origin")
    run_id, _ = remote.worktree_run()
    done = remote.pr(run_id)
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == (
        f"delegate: {remote.repo}: its current branch has no upstream remote and there is no "
        "remote named origin; name the remote to push to with --remote NAME\n"
    )
    # Nothing was committed or moved: the run's branch is where the run left it.
    assert git(remote.repo, "rev-parse", f"refs/heads/delegate/{run_id}") == remote.source.head
    assert remote.remote_branches() == ["refs/heads/main"]
    assert remote.gh_calls() == []


def test_a_rejected_push_is_one_line_and_exit_1(remote):
    """The remote's branch of that name holds other history: git refuses, nothing is forced."""
    run_id, _ = remote.worktree_run()
    branch = f"delegate/{run_id}"
    tree = git(remote.bare, "rev-parse", "main^{tree}")
    other = git(remote.bare, "commit-tree", tree, "-p", "main", "-m", "someone else's")
    git(remote.bare, "update-ref", f"refs/heads/{branch}", other)

    done = remote.pr(run_id)

    assert (done.returncode, done.stdout) == (1, "")
    assert done.stderr == (
        f"delegate: git push to origin was rejected: {branch} [rejected] (fetch first); the "
        "branch there holds other commits, and runs pr never forces a push\n"
    )
    assert remote.remote_ref(f"refs/heads/{branch}") == other
    assert remote.gh_calls() == []
    assert "pr" not in remote.record(run_id)


def test_a_result_json_rewritten_after_the_run_does_not_change_the_commit(remote):
    run_id, result = remote.worktree_run()
    worktree = Path(result["worktree"]["path"])
    # After the run: its result claims other files and another start, its worktree moved on.
    forged = {
        **result,
        "finalMessage": "Forged report",
        "changes": {**result["changes"], "files": [{"path": "evil.txt", "status": "added"}]},
        "worktree": {**result["worktree"], "base": "0" * 40, "branch": "main"},
    }
    (remote.out / "result.json").write_text(json.dumps(forged))
    (remote.out / "final.txt").write_text("Forged report\n")
    (worktree / "evil.txt").write_text("not the run's\n")
    (worktree / "made.txt").write_text("rewritten\n")

    done = remote.pr(run_id)

    assert done.returncode == 0, done
    commit = json.loads(done.stdout)["commit"]
    assert git(remote.bare, "rev-parse", f"{commit}^@") == remote.source.head
    changed = git(remote.bare, "diff-tree", "-r", "--name-only", remote.source.head, commit)
    assert changed.splitlines() == ["a.txt", "made.txt"]
    assert git(remote.bare, "show", f"{commit}:made.txt") == "one\ntwo"
    assert git(remote.bare, "log", "-1", "--format=%B", commit) == (
        f"{SUBJECT}\n\nDone: wrote made.txt and appended to a.txt.\n\ndelegate run {run_id}"
    )
    assert [call["argv"][-1] for call in remote.gh_calls()] == [body(run_id)]
    # The worktree keeps what was written there since; only its index follows the branch.
    assert (worktree / "made.txt").read_text() == "rewritten\n"
    assert quiet_status(worktree) == " M made.txt\n?? evil.txt\n"
