"""Relay and fanout behaviours an audit found unpinned: each test kills one surviving mutation.

Relays run from their skill folders (the bundled core); `delegate fanout` runs
the installed package. Expected values are written out here, or read from the
repositories and files the test made itself.
"""

from __future__ import annotations

import json
import os
import pty
import re
import signal
import subprocess
from pathlib import Path

import pytest
from conftest import PYTHON, commit_all, git, make_repo, tagged
from fakes import Fake, relay, wait_for
from relaykit import Bench, finish

# ---------------------------------------------------------------- shared


class Source:
    """A source repository with one commit (a.txt), a fake implementer, a state dir of its own."""

    def __init__(self, tmp_path: Path, key: str = "codex", repo: Path | None = None) -> None:
        self.tmp = tmp_path
        self.bench = Bench(tmp_path, key)
        self.repo = self.bench.work if repo is None else make_repo(repo)
        (self.repo / "a.txt").write_text("first\n")
        commit_all(self.repo, "start")
        self.head = git(self.repo, "rev-parse", "HEAD")
        self.state = tmp_path / "state"
        self.env = self.bench.fake.env(XDG_STATE_HOME=str(self.state), TMPDIR=str(tmp_path))

    def relay(self, *extra: str, cd: Path | None = None):
        out = self.bench.out
        args = [
            "--brief",
            str(self.bench.brief),
            "--cd",
            str(cd or self.repo),
            "--out-dir",
            str(out),
        ]
        return relay(self.bench.key, *args, *extra, env=self.env, out_dir=out)

    def branches(self) -> list[str]:
        return git(self.repo, "branch", "--format=%(refname:short)").split()

    def worktrees(self) -> list[str]:
        listed = git(self.repo, "worktree", "list", "--porcelain")
        return [
            line[len("worktree ") :] for line in listed.splitlines() if line.startswith("worktree ")
        ]

    @property
    def worktrees_root(self) -> Path:
        return self.state / "delegate-skills" / "worktrees"


def lines(*events: dict) -> str:
    return "".join(json.dumps(event) + "\n" for event in events)


# ---------------------------------------------------------------- 5. fanout: tokens, Ctrl-C

CLAUDE_SESSION = "11111111-1111-4111-8111-111111111111"
#: claude reports usage without a total: fanout adds input and output, 10 + 5.
CLAUDE_EVENTS = lines(
    {"type": "system", "subtype": "init", "session_id": CLAUDE_SESSION},
    {"type": "result", "subtype": "success", "is_error": False, "session_id": CLAUDE_SESSION,
     "result": "done", "num_turns": 1, "usage": {"input_tokens": 10, "output_tokens": 5}},
)  # fmt: skip
#: gemini's stats carry a total that is not input + output (thoughts count too): 20.
GEMINI_EVENTS = lines(
    {"type": "init", "session_id": "ef3f4d1a-d7cc-4b5d-afe7-d953382ee6b5", "model": "m"},
    {"type": "message", "role": "assistant", "content": "done", "delta": True},
    {"type": "result", "status": "success",
     "stats": {"total_tokens": 20, "input_tokens": 11, "output_tokens": 3, "cached": 0}},
)  # fmt: skip


@pytest.fixture
def two_implementers(tmp_path, home) -> Source:
    """A source whose PATH has a fake claude and a fake gemini that both report usage."""
    source = Source(tmp_path, "claude")
    source.bench.script({"actions": [{"stdout": CLAUDE_EVENTS}]})
    gemini = Fake(tmp_path / "fake-gemini")
    gemini.install("gemini")
    gemini.script({"run": {"actions": [{"stdout": GEMINI_EVENTS}]}})
    source.env["PATH"] = f"{gemini.bin}{os.pathsep}{source.env['PATH']}"
    return source


def _fanout_argv(source: Source, *args: str) -> list[str]:
    return [PYTHON, "-m", "delegate_skills", "fanout", "--brief", str(source.bench.brief),
            "--cd", str(source.repo), *args]  # fmt: skip


def test_fanout_rows_carry_the_implementers_token_totals(two_implementers):
    source = two_implementers
    done = subprocess.run(
        _fanout_argv(source, "--implementer", "claude", "--implementer", "gemini", "--json"),
        capture_output=True, text=True, env=source.env, timeout=180, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    rows = json.loads(done.stdout)["runs"]
    assert [(r["implementer"], r["status"], r["exitCode"], r["tokens"]) for r in rows] == [
        ("claude", "completed", 0, 15),
        ("gemini", "completed", 0, 20),
    ]
    for row in rows:
        result = json.loads(Path(row["outDir"], "result.json").read_text())
        assert result["status"] == "completed"
    claude_result = json.loads(Path(rows[0]["outDir"], "result.json").read_text())
    assert claude_result["usage"] == {"input_tokens": 10, "output_tokens": 5}


def test_fanout_shows_the_tokens_in_its_table_on_a_terminal(two_implementers):
    source = two_implementers
    leader, follower = pty.openpty()
    try:
        proc = subprocess.Popen(
            _fanout_argv(source, "--implementer", "claude", "--implementer", "gemini"),
            stdin=subprocess.DEVNULL, stdout=follower, stderr=subprocess.PIPE, env=source.env,
        )  # fmt: skip
    finally:
        os.close(follower)
    shown = b""
    try:
        while True:
            try:
                chunk = os.read(leader, 4096)
            except OSError:  # EIO: the terminal's other end is closed
                break
            if not chunk:
                break
            shown += chunk
        proc.wait(timeout=180)
    finally:
        os.close(leader)
        proc.kill()
        proc.wait()
        proc.stderr.close()
    assert proc.returncode == 0
    table = shown.decode().replace("\r\n", "\n").splitlines()
    assert table[0].split() == [
        "lane", "implementer", "status", "read-only", "check", "time", "files", "+lines",
        "-lines", "tokens",
    ]  # fmt: skip
    rows = [row.split() for row in table[1:3]]
    assert [row[:5] + row[6:] for row in rows] == [
        ["-", "claude", "completed", "-", "-", "0", "0", "0", "15"],
        ["-", "gemini", "completed", "-", "-", "0", "0", "0", "20"],
    ]
    assert all(re.fullmatch(r"\d+s", row[5]) for row in rows), rows
    assert table[-1] == "drop the others: delegate runs discard <out-dir>. Nothing was committed."


def test_sigint_to_fanout_reports_every_run_aborted_as_json_on_a_pipe(tmp_path, home):
    source = Source(tmp_path, "codex")
    source.bench.script({"actions": [{"wait": "forever"}]})
    # No --json: on a pipe fanout prints the JSON report, never the table.
    proc = subprocess.Popen(
        _fanout_argv(source, "--implementer", "codex", "--implementer", "codex"),
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=source.env,
    )  # fmt: skip
    try:
        wait_for(lambda: len(source.bench.fake.calls("run")) == 2)
        proc.send_signal(signal.SIGINT)
        code, out, err = finish(proc, timeout=120)
    finally:
        proc.kill()
        proc.wait()
    assert code == 130, err
    rows = json.loads(out)["runs"]
    assert len(rows) == 2
    for number, row in enumerate(rows, start=1):
        assert set(row) == {
            "lane", "implementer", "outDir", "status", "exitCode", "durationSeconds",
            "worktree", "diffstat", "tokens", "error", "landing",
        }  # fmt: skip
        assert (row["lane"], row["implementer"], row["status"], row["exitCode"]) == (
            None, "codex", "aborted", 130,
        )  # fmt: skip
        assert row["landing"] == "pending"  # its worktree is kept until landed or dropped
        assert row["tokens"] is None
        seconds = row["durationSeconds"]
        assert isinstance(seconds, float) and 0 < seconds < 120, seconds
        assert row["error"] == (
            "the relay was killed by SIGINT; codex was terminated with it — "
            "inspect the working tree before re-dispatching"
        )
        assert f"-fanout{number}-codex-" in Path(row["outDir"]).name
        tree = row["worktree"]
        assert (tree["base"], tree["source"], tree["sourceUncommitted"]) == (
            source.head, str(source.repo), 0,
        )  # fmt: skip
        assert Path(tree["path"]).parent == source.worktrees_root
        assert row["diffstat"] == {
            "filesChanged": 0, "linesAdded": 0, "linesRemoved": 0, "files": [],
        }  # fmt: skip
    # Nothing this test started lives on (a confined implementer's pid is its sandbox's).
    wait_for(lambda: tagged() == [], timeout=10)


# ---------------------------------------------------------------- 8. an empty session id

SESSION = "0a1b2c3d-4444-4444-8444-444444444444"

EMPTY_SESSION_EVENTS = {
    # claude: the init names the session; the result's empty id must not erase it.
    "claude": lines(
        {"type": "system", "subtype": "init", "session_id": SESSION},
        {"type": "result", "subtype": "success", "is_error": False, "session_id": "",
         "result": "done", "num_turns": 1},
    ),
    # qwen: the same, with its stream-json shapes.
    "qwen": lines(
        {"type": "system", "subtype": "init", "session_id": SESSION, "model": "m"},
        {"type": "system", "subtype": "status", "session_id": ""},
        {"type": "result", "subtype": "success", "session_id": "", "is_error": False,
         "num_turns": 1, "result": "done"},
    ),
    # auggie reads result events only: a first one names the session, a second is empty.
    "auggie": lines(
        {"type": "result", "result": "", "is_error": False, "subtype": "success",
         "session_id": SESSION},
        {"type": "result", "result": "done", "is_error": False, "subtype": "success",
         "session_id": ""},
    ),
}  # fmt: skip


@pytest.mark.parametrize("key", ["claude", "qwen", "auggie"])
def test_an_empty_session_id_keeps_the_one_recorded_earlier(tmp_path, home, key):
    bench = Bench(tmp_path, key)
    bench.script({"actions": [{"stdout": EMPTY_SESSION_EVENTS[key]}]})
    run = bench.relay()
    assert run.code == 0, run
    result = run.result
    assert (result["status"], result["sessionId"], result["finalMessage"]) == (
        "completed",
        SESSION,
        "done",
    )
    assert f"(resume with: --session {SESSION}): {SESSION}" in run.out


# ---------------------------------------------------------------- 9. gemini's non-zero exit


def test_gemini_exiting_non_zero_without_a_result_event_has_no_made_up_error(tmp_path, home):
    """Exit 3 (no hint for it) and no result event: the exit code and stderr tell, no error text."""
    bench = Bench(tmp_path, "gemini")
    init = lines({"type": "init", "session_id": SESSION, "model": "m"})
    bench.script({"actions": [{"stderr": "boom\n"}, {"stdout": init}], "exit": 3})
    run = bench.relay()
    assert run.code == 3, run
    result = run.result
    assert (result["status"], result["exitCode"], result["signal"]) == ("failed", 3, None)
    assert "error" not in result
    assert result["stderrTail"] == ["boom"]
    assert (result["sessionId"], result["usage"], result["finalMessage"]) == (SESSION, None, "")
    assert "\nrelay: failed (exit 3)  ·  gemini fake-cli 0.0.0\n" in run.out, run.out
    assert "without a result event" not in run.out + run.err


def test_gemini_exiting_non_zero_after_a_success_result_has_no_error_text(tmp_path, home):
    bench = Bench(tmp_path, "gemini")
    events = lines(
        {"type": "init", "session_id": SESSION, "model": "m"},
        {"type": "result", "status": "success", "stats": {"total_tokens": 1}},
    )
    bench.script({"actions": [{"stdout": events}], "exit": 7})
    run = bench.relay()
    assert run.code == 7, run
    assert (run.result["status"], run.result["exitCode"]) == ("failed", 7)
    assert "error" not in run.result


# ---------------------------------------------------------------- 10. a binary file's diffstat


def test_a_binary_file_in_a_worktree_run_counts_no_lines(tmp_path, home):
    source = Source(tmp_path)
    source.bench.script(
        {"actions": [{"append": ["a.txt", "run\n"]}, {"write": ["blob.bin", "\x00\x01\x02\nx\n"]}]}
    )
    run = source.relay("--worktree")
    assert run.code == 0, run
    path = Path(run.result["worktree"]["path"])
    assert (path / "blob.bin").read_bytes() == b"\x00\x01\x02\nx\n"
    assert run.result["diffstat"] == {
        "filesChanged": 2,
        "linesAdded": 1,
        "linesRemoved": 0,
        "files": [
            {"path": "a.txt", "added": 1, "removed": 0},
            {"path": "blob.bin", "added": None, "removed": None},
        ],
    }


# ---------------------------------------------------------------- 11. a failed `git worktree add`


def test_a_failed_worktree_add_leaves_no_branch_behind(tmp_path, home):
    """git makes the branch, then cannot make the worktree: its name is too long for the disk.

    The worktree's folder is `<repo name>-<run id>` (9 characters more), so a
    repository named with 250 characters gives a name past NAME_MAX (255):
    `git worktree add -b` has made the branch by then, and the relay deletes it.
    """
    long_name = "r" * 250
    source = Source(tmp_path, "codex", repo=tmp_path / long_name)
    source.bench.script({})
    run = source.relay("--worktree")
    assert run.code == 2, run
    assert run.err.startswith(f"relay: git worktree add failed in {source.repo}: "), run.err
    assert run.err.count("\n") == 1 and run.err.endswith("\n"), run.err
    assert source.branches() == ["main"]
    assert source.worktrees() == [str(source.repo)]
    assert list(source.worktrees_root.iterdir()) == []
    assert source.bench.fake.calls("run") == []


# ---------------------------------------------------------------- 12. --cd at an untracked folder


def test_worktree_run_from_an_untracked_folder_runs_in_the_same_folder(tmp_path, home):
    source = Source(tmp_path)
    untracked = source.repo / "scratch" / "deep"
    untracked.mkdir(parents=True)
    (untracked / "notes.txt").write_text("local only\n")  # not in the commit
    source.bench.script({"actions": [{"write": ["made.txt", "here\n"]}]})
    run = source.relay("--worktree", cd=untracked)
    assert run.code == 0, run
    path = Path(run.result["worktree"]["path"])
    assert path.parent == source.worktrees_root
    assert run.result["workdir"] == str(path / "scratch" / "deep")
    assert source.bench.fake.run_call()["cwd"] == str(path / "scratch" / "deep")
    assert (path / "scratch" / "deep" / "made.txt").read_text() == "here\n"
    assert not (path / "scratch" / "deep" / "notes.txt").exists()  # the worktree has the commit
    assert run.result["worktree"]["sourceUncommitted"] == 1  # ?? scratch/
    assert run.result["diffstat"]["files"] == [
        {"path": "scratch/deep/made.txt", "added": 1, "removed": 0}
    ]
    assert not (untracked / "made.txt").exists()
