"""A run's life after dispatch: behaviours that each get a test of their own here.

The change record (binary patches, unreadable files, the untracked budget),
undo of a discarded run, the repeated-answer flag, prune's orphan worktrees,
`delegate review`, `runs logs`, `runs watch` and the discover cache, driven
as a user would: the relay scripts and the `delegate` command. Expected
values are written out here, never computed by the code under test.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import PYTHON, Result, commit_all, git, run
from discoverkit import ANSWERS, recording
from fakes import Fake, RelayRun, relay, relay_argv, wait_for
from relaykit import DETECT_ONLY, Bench, read_pid


def delegate_cmd(*args: str) -> list[str]:
    return [PYTHON, "-m", "delegate_skills", *args]


class Repo:
    """A committed repository, a fake codex, and a state dir and temp dir of its own."""

    def __init__(self, tmp_path: Path) -> None:
        self.tmp = tmp_path
        self.bench = Bench(tmp_path, "codex")
        self.work = self.bench.work
        (self.work / "a.txt").write_text("first\n")
        commit_all(self.work, "start")
        self.env = self.bench.fake.env(XDG_STATE_HOME=str(tmp_path / "state"), TMPDIR=str(tmp_path))
        self.count = 0

    def next_out(self) -> Path:
        self.count += 1
        return self.tmp / f"run{self.count}"

    def args(self, out: Path, *flags: str) -> list[str]:
        return ["--brief", str(self.bench.brief), "--cd", str(self.work), "--out-dir", str(out),
                *flags]  # fmt: skip

    def relay(
        self, actions: list, *flags: str, out: Path | None = None, env: dict | None = None
    ) -> RelayRun:
        """A codex relay run of these fake actions, which must succeed."""
        out = out or self.next_out()
        self.bench.script({"actions": actions})
        done = relay("codex", *self.args(out, *flags), env=env or self.env, out_dir=out)
        assert done.code == 0, done
        return done

    def delegate(self, *args: str, env: dict | None = None) -> Result:
        return run(delegate_cmd(*args), env=env or self.env)


@pytest.fixture
def repo(tmp_path, home) -> Repo:
    return Repo(tmp_path)


# ---------------------------------------------------------------- the change record


def test_runs_diff_of_a_binary_change_is_a_patch_git_apply_takes(repo, tmp_path):
    (repo.work / "logo.bin").write_bytes(b"\x00\x01old\x00")
    commit_all(repo.work, "logo")
    done = repo.relay([{"write": ["logo.bin", "\x00\x02new\x00"]},
                       {"write": ["icon.bin", "\x00\x03\x04"]}])  # fmt: skip
    shown = subprocess.run(delegate_cmd("runs", "diff", str(done.out_dir)), capture_output=True,
                           env=repo.env, timeout=120)  # fmt: skip
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.count(b"GIT binary patch") == 2
    check = tmp_path / "check"
    subprocess.run(["git", "clone", "-q", str(repo.work), str(check)], check=True)
    applied = subprocess.run(["git", "-C", str(check), "apply", "--index", "-"],
                             input=shown.stdout, capture_output=True)  # fmt: skip
    assert applied.returncode == 0, applied.stderr
    assert (check / "logo.bin").read_bytes() == b"\x00\x02new\x00"
    assert (check / "icon.bin").read_bytes() == b"\x00\x03\x04"


def test_undo_of_a_discarded_run_says_it_was_discarded(repo):
    done = repo.relay([{"write": ["made.txt", "one\n"]}], "--worktree")
    tree = Path(done.result["worktree"]["path"])
    discarded = repo.delegate("runs", "discard", str(done.out_dir))
    assert discarded.code == 0, discarded
    assert not tree.exists()
    undone = repo.delegate("runs", "undo", str(done.out_dir))
    assert (undone.code, undone.out, undone.err) == (
        2,
        "",
        f"delegate: {done.result['relayRunId']}: the run was already discarded; nothing to undo\n",
    )
    assert not (repo.work / "made.txt").exists()
    assert git(repo.work, "status", "--porcelain") == ""


def _without_root_file_access():
    """For root, a child that cannot read what its mode bits refuse (as any other user)."""
    if os.geteuid() != 0:
        return None
    if not sys.platform.startswith("linux"):
        pytest.skip("dropping root's file access needs Linux capabilities")
    libc = ctypes.CDLL(None, use_errno=True)

    def drop() -> None:
        for capability in (1, 2):  # CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH
            if libc.prctl(24, capability, 0, 0, 0) != 0:  # PR_CAPBSET_DROP
                os._exit(126)

    return drop


def _relay_unprivileged(repo: Repo, actions: list, *flags: str) -> dict:
    out = repo.next_out()
    repo.bench.script({"actions": actions})
    done = subprocess.run(relay_argv("codex", *repo.args(out, *flags)), capture_output=True,
                          text=True, env={**repo.env, **DETECT_ONLY}, stdin=subprocess.DEVNULL,
                          preexec_fn=_without_root_file_access(), timeout=120)  # fmt: skip
    assert done.returncode == 0, done
    return json.loads((out / "result.json").read_text())


def test_a_file_git_cannot_read_leaves_an_incomplete_record_not_none(repo):
    secret = repo.work / "secret.txt"
    secret.write_text("nobody reads this\n")
    secret.chmod(0)
    try:
        result = _relay_unprivileged(repo, [{"append": ["a.txt", "run\n"]}])
        assert "changesUnavailable" not in result
        assert result["changes"]["files"] == [
            {"path": "a.txt", "status": "modified", "linesAdded": 1, "linesRemoved": 0,
             "binary": False},
        ]  # fmt: skip
        # A read-only run says which part its verdict could not see, rather than no record.
        looked = _relay_unprivileged(repo, [], "--read-only")
        assert looked["changes"]["files"] == []
        assert looked["readOnlyViolation"] is None
        assert looked["readOnlyUnverified"] == (
            "part of the work tree could not be read (unable to index file 'secret.txt')"
        )
    finally:
        secret.chmod(0o600)


BUDGET = {"DELEGATE_RELAY_SNAPSHOT_BUDGET": f"3:{2 * 1024 * 1024}"}


def test_ignored_files_do_not_count_against_the_untracked_budget(repo):
    (repo.work / ".gitignore").write_text("node_modules/\n")
    commit_all(repo.work, "ignore")
    modules = repo.work / "node_modules"
    modules.mkdir()
    for n in range(5):
        (modules / f"m{n}.js").write_text("module\n")
    (repo.work / "notes.txt").write_text("mine\n")  # one untracked file the budget counts
    env = {**repo.env, **BUDGET}
    result = repo.relay([{"append": ["a.txt", "run\n"]}], env=env).result
    assert "changesUnavailable" not in result
    assert result["changes"]["files"] == [
        {"path": "a.txt", "status": "modified", "linesAdded": 1, "linesRemoved": 0,
         "binary": False},
    ]  # fmt: skip
    # The same files, not ignored, are over that budget: the record says so.
    modules.rename(repo.work / "vendor")
    result = repo.relay([{"append": ["a.txt", "again\n"]}], env=env).result
    assert result["changes"] is None
    assert result["changesUnavailable"] == (
        f"the untracked files in {repo.work} are more than a change record holds "
        "(3 files or 2 MiB); ignore or commit them"
    )


# ---------------------------------------------------------------- the repeated answer
#
# Claude Code's final message is its result event's text, kept as the CLI gave it
# (surrounding blanks included), so these runs go through the claude relay.


class Session:
    """Claude relay runs one after another in one repository, with a state dir of their own."""

    def __init__(self, tmp_path: Path) -> None:
        self.tmp = tmp_path
        self.bench = Bench(tmp_path, "claude")
        (self.bench.work / "a.txt").write_text("first\n")
        commit_all(self.bench.work, "start")
        self.env = self.bench.fake.env(XDG_STATE_HOME=str(tmp_path / "state"))
        self.count = 0

    def answer(self, session: str, final: str, change: str, *flags: str) -> dict:
        """A run that answers `final` in `session` after writing the file `change`."""
        self.count += 1
        out = self.tmp / f"run{self.count}"
        init = {"type": "system", "subtype": "init", "session_id": session}
        done = {"type": "result", "subtype": "success", "is_error": False, "result": final,
                "session_id": session}  # fmt: skip
        self.bench.script({"actions": [{"stdout": json.dumps(init) + "\n"},
                                       {"write": [change, f"{change}\n"]},
                                       {"stdout": json.dumps(done) + "\n"}]})  # fmt: skip
        args = ["--brief", str(self.bench.brief), "--cd", str(self.bench.work), "--out-dir",
                str(out), "--skip-preflight", *flags]  # fmt: skip
        ran = relay("claude", *args, env=self.env, out_dir=out)
        assert ran.code == 0, ran
        result = ran.result
        assert result["finalMessage"] == final
        assert [f["path"] for f in result["changes"]["files"]] == [change]
        return result


S1 = "11111111-1111-4111-8111-111111111111"
S2 = "22222222-2222-4222-8222-222222222222"


def test_the_same_answer_in_other_surrounding_blanks_is_flagged(tmp_path, home):
    session = Session(tmp_path)
    assert session.answer(S1, "I fixed it.", "one.txt")["sessionId"] == S1
    result = session.answer(S1, "\n  I fixed it.  \n\n", "two.txt", "--session", S1)
    assert (result["sessionRequested"], result["sessionChanged"]) == (S1, False)
    assert result["repeatedFinal"] is True


def test_two_empty_answers_are_not_a_repeat(tmp_path, home):
    session = Session(tmp_path)
    session.answer(S1, "", "one.txt")
    result = session.answer(S1, "", "two.txt", "--session", S1)
    assert (result["sessionRequested"], result["sessionChanged"]) == (S1, False)
    assert result["repeatedFinal"] is False


def test_a_resume_answered_in_a_new_session_that_repeats_is_flagged(tmp_path, home):
    session = Session(tmp_path)
    session.answer(S2, "Same answer.", "one.txt")
    result = session.answer(S2, "Same answer.", "two.txt", "--session", S1)
    assert (result["sessionId"], result["sessionRequested"], result["sessionChanged"]) == (
        S2,
        S1,
        True,
    )
    assert result["repeatedFinal"] is True


# ---------------------------------------------------------------- prune


def test_prune_keeps_an_orphan_worktree_whose_branch_holds_commits_of_its_own(repo):
    done = repo.relay([{"write": ["made.txt", "one\n"]}], "--worktree")
    tree = done.result["worktree"]
    path, branch = Path(tree["path"]), tree["branch"]
    git(path, "add", "made.txt")
    git(path, "commit", "-q", "-m", "work nobody landed")
    commit = git(path, "rev-parse", "HEAD")
    assert git(path, "status", "--porcelain") == ""
    # No record names the worktree any more.
    shutil.rmtree(repo.tmp / "state" / "delegate-skills" / "runs" / done.result["relayRunId"])
    pruned = repo.delegate("runs", "prune", "--json", "--older-than", "0", "--cwd", str(repo.work))
    assert pruned.code == 0, pruned
    assert pruned.json() == {
        "dryRun": False,
        "removed": [],
        "kept": [],
        "orphans": [{"path": str(path), "branch": branch, "prunable": False, "removed": False,
                     "reason": "holds changes or commits no other branch has"}],
    }  # fmt: skip
    assert (path / "made.txt").read_text() == "one\n"
    assert git(repo.work, "rev-parse", f"refs/heads/{branch}") == commit
    assert str(path) in git(repo.work, "worktree", "list", "--porcelain")


# ---------------------------------------------------------------- delegate review


def _claude_says(text: str) -> str:
    result = {"type": "result", "subtype": "success", "is_error": False,
              "session_id": "11111111-1111-4111-8111-111111111111", "result": text}  # fmt: skip
    return json.dumps(result) + "\n"


@pytest.fixture
def reviewed(repo, tmp_path):
    """A finished codex run that added made.txt, and a fake claude on PATH to review it."""
    done = repo.relay([{"write": ["made.txt", "one\n"]}])
    claude = Fake(tmp_path / "fake-claude")
    claude.install("claude")
    repo.env = {**repo.env, **DETECT_ONLY,
                "PATH": f"{claude.bin}{os.pathsep}{repo.env['PATH']}"}  # fmt: skip
    return repo, claude, done.result


TWO_BLOCKS = (
    "First thoughts:\n```json\n"
    '{"verdict": "approve", "findings": []}\n```\n'
    "On a second look:\n```json\n"
    '{"verdict": "request-changes", "findings": [{"file": "made.txt", "line": 1, '
    '"severity": "medium", "text": "one is not enough"}]}\n```\n'
)


def test_with_two_verdict_blocks_the_last_one_is_the_verdict(reviewed, tmp_path):
    repo, claude, original = reviewed
    claude.script({"run": {"actions": [{"stdout": _claude_says(TWO_BLOCKS)}]}})
    out = tmp_path / "review"
    done = repo.delegate("review", original["relayRunId"], "--implementer", "claude",
                         "--out-dir", str(out), "--json")  # fmt: skip
    assert done.code == 0, done
    result = done.json()
    assert result["review"] == {
        "verdict": "request-changes",
        "findings": [{"file": "made.txt", "line": 1, "severity": "medium",
                      "text": "one is not enough"}],
        "raw": TWO_BLOCKS,
    }  # fmt: skip
    assert json.loads((out / "result.json").read_text())["review"]["verdict"] == "request-changes"


def test_the_reviewer_runs_with_its_read_only_command_line(reviewed, tmp_path):
    repo, claude, original = reviewed
    claude.script({"run": {"actions": [{"stdout": _claude_says(TWO_BLOCKS)}]}})
    out = tmp_path / "review"
    done = repo.delegate("review", original["relayRunId"], "--implementer", "claude",
                         "--out-dir", str(out), "--json")  # fmt: skip
    assert done.code == 0, done
    assert claude.run_call()["argv"] == [
        "-p", "--output-format", "stream-json", "--verbose",
        "--tools", "Read,Glob,Grep",
        "--strict-mcp-config", "--disallowedTools", "mcp__*", "--disable-slash-commands",
        "--settings", str(out / "profile.json"),
        "--permission-mode", "plan",
    ]  # fmt: skip
    result = done.json()
    assert result["readOnlyViolation"] is False and "readOnlyChanges" not in result


def test_allow_self_lets_an_implementer_review_its_own_run(repo, tmp_path):
    done = repo.relay([{"write": ["made.txt", "one\n"]}])
    run_id = done.result["relayRunId"]
    out = tmp_path / "self-review"
    answer = 'Fine.\n```json\n{"verdict": "approve", "findings": []}\n```'
    repo.bench.script({"actions": [{"write": [str(out / "final.txt"), answer + "\n"]}]})
    env = {**repo.env, **DETECT_ONLY}
    refused = repo.delegate("review", run_id, "--implementer", "codex", "--json", env=env)
    assert refused.code == 2, refused
    reviewed = repo.delegate("review", run_id, "--implementer", "codex", "--allow-self",
                             "--out-dir", str(out), "--json", env=env)  # fmt: skip
    assert reviewed.code == 0, reviewed
    result = reviewed.json()
    assert (result["reviewOf"], result["implementerArgv"][0]) == (run_id, "codex")
    assert result["review"] == {"verdict": "approve", "findings": [], "raw": answer}
    assert repo.bench.fake.calls("run")[-1]["argv"] == [
        "exec", "--json", "-o", str(out / "final.txt"), "-s", "read-only", "-"
    ]  # fmt: skip


# ---------------------------------------------------------------- runs logs


@contextlib.contextmanager
def _started(argv: list[str], env: dict, **kw):
    """A process, killed and reaped on leaving however the test went."""
    proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, env=env, **kw)
    try:
        yield proc
    finally:
        proc.kill()
        proc.wait()


def _follow_lines(tmp_path: Path, before: str, after: str) -> tuple[str, str]:
    """`runs logs -f` of a run that writes `before`, waits for a go-ahead, writes `after`, ends.

    Returns the first line the follower showed (read before the go-ahead) and the rest.
    """
    bench = Bench(tmp_path, "codex")
    go = tmp_path / "go"
    bench.script({"actions": [{"stdout": before}, {"pid_file": str(tmp_path / "child.pid")},
                              {"wait_for_file": str(go)}, {"stdout": after}]})  # fmt: skip
    env = bench.fake.env(XDG_STATE_HOME=str(tmp_path / "state"), TMPDIR=str(tmp_path))
    with _started(relay_argv("codex", *bench.args()), env, stdout=subprocess.DEVNULL,
                  stderr=subprocess.DEVNULL) as relay_proc:  # fmt: skip
        child = read_pid(tmp_path / "child.pid")
        try:
            follow = delegate_cmd("runs", "logs", "-f", str(bench.out))
            with _started(follow, env, stdout=subprocess.PIPE, text=True) as follower:
                first = follower.stdout.readline()
                go.write_text("")
                rest, _ = follower.communicate(timeout=60)
                assert follower.returncode == 0
            assert relay_proc.wait(timeout=60) == 0
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.kill(child, signal.SIGKILL)
    return first, rest


def test_logs_follow_waits_for_the_end_of_a_line(tmp_path, home):
    first, rest = _follow_lines(
        tmp_path,
        '{"type":"turn.started","text":"first"}\n{"type":"turn.completed",',
        '"text":"second"}\n',
    )
    assert first == "turn.started: first\n"
    assert rest == "turn.completed: second\n"


def test_logs_follow_shows_a_last_line_without_a_newline(tmp_path, home):
    first, rest = _follow_lines(
        tmp_path,
        '{"type":"turn.started","text":"first"}\n',
        '{"type":"turn.completed","text":"last words"}',
    )
    assert first == "turn.started: first\n"
    assert rest == "turn.completed: last words\n"


def test_logs_read_only_the_runs_own_events_whatever_its_result_names(tmp_path, home):
    bench = Bench(tmp_path, "codex")
    bench.script({"actions": [{"stdout": '{"type":"turn.started","text":"own event"}\n'}]})
    env = bench.fake.env(XDG_STATE_HOME=str(tmp_path / "state"), TMPDIR=str(tmp_path))
    done = relay("codex", *bench.args(), env=env, out_dir=bench.out)
    assert done.code == 0, done
    elsewhere = tmp_path / "elsewhere" / "events.jsonl"
    elsewhere.parent.mkdir()
    elsewhere.write_text('{"type":"planted","text":"not this run"}\n')
    result = done.result
    assert result["eventsPath"] == str(bench.out / "events.jsonl")
    result["eventsPath"] = str(elsewhere)
    (bench.out / "result.json").write_text(json.dumps(result, indent=2) + "\n")
    shown = run(delegate_cmd("runs", "logs", str(bench.out)), env=env)
    assert (shown.code, shown.out, shown.err) == (0, "turn.started: own event\n", "")


# ---------------------------------------------------------------- runs watch


class Flight:
    """Runs held open until told to finish, on one state dir, and `runs watch` over them."""

    def __init__(self, tmp_path: Path) -> None:
        self.tmp = tmp_path
        self.env_extra = {"XDG_STATE_HOME": str(tmp_path / "state"), "TMPDIR": str(tmp_path)}
        self.stack = contextlib.ExitStack()
        self.children: list[int] = []

    def start(self, name: str) -> tuple[Path, str]:
        """Start run `name`; (its go-ahead file, its run id) once its implementer runs."""
        bench = Bench(self.tmp / name, "codex")
        go = self.tmp / name / "go"
        pid_file = self.tmp / name / "child.pid"
        bench.script({"actions": [{"pid_file": str(pid_file)}, {"wait_for_file": str(go)}]})
        quiet = {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL}
        argv = relay_argv("codex", *bench.args())
        self.stack.enter_context(_started(argv, bench.fake.env(**self.env_extra), **quiet))
        self.children.append(read_pid(pid_file))
        marker = bench.out / "run.json"
        wait_for(lambda: marker.exists())
        return go, json.loads(marker.read_text())["id"]

    def watch(self) -> subprocess.Popen:
        env = {**os.environ, **self.env_extra}
        return self.stack.enter_context(
            _started(delegate_cmd("runs", "watch"), env, stdout=subprocess.PIPE, text=True)
        )

    def close(self) -> None:
        for pid in self.children:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        self.stack.close()


@pytest.fixture
def flight(tmp_path, home):
    found = Flight(tmp_path)
    try:
        yield found
    finally:
        found.close()


def test_runs_watch_goes_on_until_every_run_has_ended(flight):
    go_a, run_a = flight.start("a")
    go_b, run_b = flight.start("b")
    watcher = flight.watch()
    started = {watcher.stdout.readline(), watcher.stdout.readline()}
    assert started == {f"started {run_a} (codex)\n", f"started {run_b} (codex)\n"}
    go_a.write_text("")
    assert watcher.stdout.readline() == f"{run_a} ended: completed\n"
    go_b.write_text("")
    assert watcher.stdout.readline() == f"{run_b} ended: completed\n"
    assert watcher.wait(timeout=60) == 0
    assert watcher.stdout.read() == ""


def test_runs_watch_announces_an_ended_run_once(flight):
    go_a, run_a = flight.start("a")
    go_b, run_b = flight.start("b")
    watcher = flight.watch()
    watcher.stdout.readline()
    watcher.stdout.readline()
    go_a.write_text("")
    assert watcher.stdout.readline() == f"{run_a} ended: completed\n"
    # A run started now is seen on a later round, after the one that said run a ended.
    go_c, run_c = flight.start("c")
    assert watcher.stdout.readline() == f"started {run_c} (codex)\n"
    go_b.write_text("")
    assert watcher.stdout.readline() == f"{run_b} ended: completed\n"
    go_c.write_text("")
    assert watcher.stdout.readline() == f"{run_c} ended: completed\n"
    assert watcher.wait(timeout=60) == 0
    assert watcher.stdout.read() == ""


# ---------------------------------------------------------------- the discover cache

CACHED_CLIS = ("codex", "aider", "copilot")


def _discover_env(tmp_path: Path) -> dict[str, str]:
    bindir, home = tmp_path / "bin", tmp_path / "home"
    home.mkdir(exist_ok=True)
    for binary in CACHED_CLIS:
        recording(bindir, binary, tmp_path / "log", ANSWERS[binary])
    return {**os.environ, "PATH": f"{bindir}{os.pathsep}{os.environ['PATH']}",
            "HOME": str(home), "XDG_CACHE_HOME": str(tmp_path / "cache")}  # fmt: skip


def _discover(env: dict[str, str], *args: str) -> tuple[list[str], list[str]]:
    """(probed, cached) of `delegate discover --json ARGS`."""
    done = run(delegate_cmd("discover", "--json", *args), env=env)
    assert done.code == 0, done
    document = done.json()
    return document["probed"], document["cached"]


def _cached_keys(tmp_path: Path) -> list[str]:
    cache = tmp_path / "cache" / "delegate-skills" / "discover.json"
    return sorted(json.loads(cache.read_text())["entries"])


def test_probing_one_cli_again_keeps_the_others_in_the_cache(tmp_path):
    env = _discover_env(tmp_path)
    assert _discover(env) == (["aider", "codex", "copilot"], [])
    assert _discover(env, "--fresh", "aider") == (["aider"], [])
    assert _cached_keys(tmp_path) == ["aider", "codex", "copilot"]
    assert _discover(env) == ([], ["aider", "codex", "copilot"])


def test_a_new_lower_case_key_variable_is_a_sign_in_change(tmp_path):
    env = _discover_env(tmp_path)
    assert _discover(env) == (["aider", "codex", "copilot"], [])
    assert _discover(env) == ([], ["aider", "codex", "copilot"])
    signed = {**env, "openai_api_key": "sk-lower-case"}
    assert _discover(signed) == (["aider", "codex", "copilot"], [])
    cache_text = (tmp_path / "cache" / "delegate-skills" / "discover.json").read_text()
    assert "openai_api_key" in cache_text and "sk-lower-case" not in cache_text
