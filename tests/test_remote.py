"""`--host`: runs on another machine over a real OpenSSH server on 127.0.0.1.

The "other machine" is another HOME on this one, reached through the system
ssh with a throwaway host key, user key and ssh_config (sshkit.py); the fake
codex is on that side's PATH only. Expected files, branches and messages are
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
import sshkit
from conftest import commit_all, delegate, git, make_repo
from fakes import Fake, relay_argv, wait_for

ssh_world = pytest.fixture(sshkit.ssh_world)

EDIT = {"actions": [{"write": ["made.txt", "one\ntwo\n"]}, {"append": ["a.txt", "run\n"]}]}


class Remote:
    """A source repository here, and hosts whose PATH holds a fake codex."""

    def __init__(self, tmp_path: Path, world: sshkit.SshWorld) -> None:
        self.tmp = tmp_path
        self.world = world
        self.repo = make_repo(tmp_path / "work")
        (self.repo / "a.txt").write_text("first\n")
        commit_all(self.repo, "start")
        self.fake = Fake(tmp_path / "fake")
        self.fake.install("codex")
        self.brief = tmp_path / "brief.txt"
        self.brief.write_text("Do the thing.\n")
        self.state = tmp_path / "state"
        self.config = tmp_path / "config"
        self.env = world.env(XDG_STATE_HOME=str(self.state), XDG_CONFIG_HOME=str(self.config),
                             TMPDIR=str(tmp_path))  # fmt: skip

    def host(self, alias: str, path: str | None = None) -> sshkit.SshHost:
        path = path or f"{self.fake.bin}:/usr/bin:/bin"
        return self.world.add_host(alias, env={"PATH": path})

    def relay(self, *extra: str, out: str = "out", timeout: float = 120):
        argv = relay_argv("codex", "--brief", str(self.brief), "--cd", str(self.repo),
                          "--out-dir", str(self.tmp / out), *extra)  # fmt: skip
        return subprocess.run(argv, capture_output=True, text=True, env=self.env,
                              stdin=subprocess.DEVNULL, timeout=timeout)  # fmt: skip

    def result(self, out: str = "out") -> dict:
        return json.loads((self.tmp / out / "result.json").read_text())

    def hosts_json(self, document: dict) -> None:
        folder = self.config / "delegate-skills"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "hosts.json").write_text(json.dumps(document))


@pytest.fixture
def remote(tmp_path, home, ssh_world) -> Remote:
    return Remote(tmp_path, ssh_world)


def porcelain(repo: Path) -> str:
    return subprocess.run(["git", "-C", str(repo), "status", "--porcelain"], capture_output=True,
                          text=True, check=True).stdout  # fmt: skip


def test_a_remote_run_comes_back_as_a_branch_and_lands_with_runs_apply(remote):
    host = remote.host("devbox")
    remote.fake.script({"run": EDIT})
    done = remote.relay("--host", "devbox")
    assert done.returncode == 0, done.stderr
    result = remote.result()
    assert result["status"] == "completed"
    assert result["host"] == "devbox"
    branch = result["worktree"]["branch"]
    assert branch == f"delegate/{result['relayRunId']}"  # the run id every runs command takes
    assert git(remote.repo, "branch", "--list", branch).strip().endswith(branch)
    assert result["worktree"]["source"] == str(remote.repo)
    assert [(f["path"], f["status"]) for f in result["changes"]["files"]] == [
        ("a.txt", "modified"), ("made.txt", "added")]  # fmt: skip
    # The local worktree holds the run's files; the source is untouched until apply.
    assert (Path(result["worktree"]["path"]) / "made.txt").read_text() == "one\ntwo\n"
    assert porcelain(remote.repo) == ""
    # The implementer ran there: under that host's HOME, not here.
    call = remote.fake.run_call()
    assert call["cwd"].startswith(str(host.home))
    applied = delegate("runs", "apply", str(remote.tmp / "out"), "--json", env=remote.env)
    assert applied.code == 0, applied.err
    assert porcelain(remote.repo) == " M a.txt\n?? made.txt\n"
    assert (remote.repo / "a.txt").read_text() == "first\nrun\n"
    # The worktree there is removed once its branch is here.
    assert not any((host.home / ".cache/delegate-skills/remote/worktrees").iterdir())


def test_a_second_run_reuses_the_shipped_core_and_the_mirror(remote):
    host = remote.host("devbox")
    remote.fake.script({"run": EDIT})
    assert remote.relay("--host", "devbox", out="one").returncode == 0
    bundles = sorted((host.home / ".cache/delegate-skills/remote/bundles").iterdir())
    assert remote.relay("--host", "devbox", out="two").returncode == 0
    assert sorted((host.home / ".cache/delegate-skills/remote/bundles").iterdir()) == bundles
    assert len(bundles) == 1
    mirrors = list((host.home / ".cache/delegate-skills/remote/repos").iterdir())
    assert len(mirrors) == 1 and mirrors[0].name.startswith("work-")


def test_include_uncommitted_starts_from_the_work_tree_as_it_is(remote):
    remote.host("devbox")
    (remote.repo / "a.txt").write_text("first\nmine\n")
    (remote.repo / "new.txt").write_text("untracked\n")
    remote.fake.script({"run": {"actions": [{"append": ["a.txt", "run\n"]},
                                            {"write": ["made.txt", "x\n"]}]}})  # fmt: skip
    done = remote.relay("--host", "devbox", "--include-uncommitted")
    assert done.returncode == 0, done.stderr
    result = remote.result()
    # The run saw the uncommitted edit and the untracked file; its change is only its own.
    worktree = Path(result["worktree"]["path"])
    assert (worktree / "new.txt").read_text() == "untracked\n"
    assert (worktree / "a.txt").read_text() == "first\nmine\nrun\n"
    assert [(f["path"], f["status"]) for f in result["changes"]["files"]] == [
        ("a.txt", "modified"), ("made.txt", "added")]  # fmt: skip
    assert result["worktree"]["sourceUncommitted"] == 1
    applied = delegate("runs", "apply", str(remote.tmp / "out"), "--json", env=remote.env)
    assert applied.code == 0, applied.err
    assert (remote.repo / "a.txt").read_text() == "first\nmine\nrun\n"
    assert (remote.repo / "made.txt").read_text() == "x\n"
    assert (remote.repo / "new.txt").read_text() == "untracked\n"


def test_without_include_uncommitted_the_run_starts_from_head(remote):
    remote.host("devbox")
    (remote.repo / "a.txt").write_text("first\nmine\n")
    remote.fake.script({"run": {"actions": [{"write": ["seen.txt", "x\n"]}]}})
    assert remote.relay("--host", "devbox").returncode == 0
    worktree = Path(remote.result()["worktree"]["path"])
    assert (worktree / "a.txt").read_text() == "first\n"


def test_fanout_over_two_hosts(remote):
    remote.host("box-a")
    remote.host("box-b")
    remote.fake.script({"run": EDIT})
    # Unconfined: there, the fake's record folder is not one a confined run may write.
    done = delegate("fanout", "--brief", str(remote.brief), "--cd", str(remote.repo),
                    "--implementer", "codex", "--host", "box-a", "--host", "box-b", "--json",
                    "--no-confine", env=remote.env, timeout=180)  # fmt: skip
    assert done.code == 0, done.err
    runs = done.json()["runs"]
    assert sorted(run["host"] for run in runs) == ["box-a", "box-b"]
    assert [run["status"] for run in runs] == ["completed", "completed"]
    assert len({run["worktree"]["branch"] for run in runs}) == 2
    assert len(remote.fake.calls("run")) == 2


def kill_the_relay_here(remote: Remote) -> Path:
    """Start a --host run, and once the implementer runs there SIGKILL the relay here and its ssh."""
    out = remote.tmp / "out"
    argv = relay_argv("codex", "--brief", str(remote.brief), "--cd", str(remote.repo),
                      "--out-dir", str(out), "--host", "devbox")  # fmt: skip
    proc = subprocess.Popen(argv, env=remote.env, stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)  # fmt: skip
    try:
        wait_for(lambda: (out / "events.jsonl").exists() and remote.fake.calls("run"), 60)
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return out


def test_a_killed_connection_leaves_the_run_going_there_and_runs_wait_takes_it_up(remote):
    remote.host("devbox")
    go = remote.tmp / "go"
    remote.fake.script({"run": {"actions": [{"wait_for_file": str(go)},
                                            {"write": ["late.txt", "late\n"]}]}})  # fmt: skip
    out = kill_the_relay_here(remote)
    assert not (out / "result.json").exists()
    go.write_text("")
    waited = delegate("runs", "wait", str(out), "--json", env=remote.env, timeout=120)
    assert waited.code == 0, waited.err
    result = remote.result()
    assert result["status"] == "completed"
    assert [f["path"] for f in result["changes"]["files"]] == ["late.txt"]
    assert (Path(result["worktree"]["path"]) / "late.txt").read_text() == "late\n"


def test_sigint_is_passed_to_the_run_there(remote):
    remote.host("devbox")
    remote.fake.script({"run": {"actions": [{"wait": True}]}})
    out = remote.tmp / "out"
    argv = relay_argv("codex", "--brief", str(remote.brief), "--cd", str(remote.repo),
                      "--out-dir", str(out), "--host", "devbox")  # fmt: skip
    proc = subprocess.Popen(argv, env=remote.env, stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)  # fmt: skip
    try:
        wait_for(lambda: remote.fake.calls("run"), 60)
        proc.send_signal(signal.SIGINT)
        proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 130
    result = remote.result()
    assert (result["status"], result["signal"], result["host"]) == ("aborted", "SIGINT", "devbox")


# ---------------------------------------------------------------- one-line errors


def one_line(done: subprocess.CompletedProcess) -> str:
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, done.stderr
    assert "Traceback" not in done.stderr
    return lines[0]


def test_an_unreachable_host_is_one_line(remote):
    host = remote.host("devbox")
    host.stop()
    done = remote.relay("--host", "devbox")
    assert done.returncode == 2
    assert one_line(done).startswith("relay: --host devbox: unreachable (")
    assert not (remote.tmp / "out").exists()


def test_an_unknown_host_key_is_refused_never_accepted(remote):
    host = remote.host("devbox")
    remote.world.set_known(host, False)
    done = remote.relay("--host", "devbox")
    assert done.returncode == 2
    assert one_line(done) == (
        "relay: --host devbox: ssh does not know this host's key (never accepted for you); "
        "run `ssh devbox` once yourself and check the fingerprint"
    )
    assert "127.0.0.1" not in remote.world.known_hosts.read_text()


def test_a_missing_remote_python_is_one_line(remote):
    remote.host("devbox")
    remote.hosts_json({"hosts": {"devbox": {"python": "python-nowhere"}}})
    done = remote.relay("--host", "devbox")
    assert done.returncode == 2
    assert one_line(done).startswith("relay: --host devbox: python-nowhere is not installed there")


def test_a_remote_python_too_old_is_one_line(remote, tmp_path):
    old = tmp_path / "oldpy"
    old.mkdir()
    (old / "python3").write_text("#!/bin/sh\necho '{\"python\": [3, 8, 10]}'\n")
    (old / "python3").chmod(0o755)
    remote.host("devbox", path=f"{old}:/usr/bin:/bin")
    done = remote.relay("--host", "devbox")
    assert done.returncode == 2
    assert one_line(done).startswith(
        "relay: --host devbox: python3 there is 3.8.10; the relay needs 3.10 or newer"
    )


def test_a_remote_without_git_is_one_line(remote, tmp_path):
    only = tmp_path / "onlypython"
    only.mkdir()
    (only / "python3").symlink_to(sys.executable)
    remote.host("devbox", path=str(only))
    done = remote.relay("--host", "devbox")
    assert done.returncode == 2
    assert one_line(done) == (
        "relay: --host devbox: git is not installed there (or not on ssh's PATH)"
    )


def test_an_implementer_missing_there_is_reported_as_there(remote):
    remote.host("devbox", path="/usr/bin:/bin")
    done = remote.relay("--host", "devbox")
    assert done.returncode == 127, done.stderr
    result = remote.result()
    assert (result["status"], result["host"]) == ("codex_unavailable", "devbox")


def test_a_host_name_ssh_would_read_as_an_option_or_words_is_refused(remote):
    done = remote.relay("--host", "-oProxyCommand=touch /tmp/x")
    assert done.returncode == 2
    assert one_line(done).startswith("relay: --host requires a value; -oProxyCommand")
    done = remote.relay("--host", "dev box")
    assert done.returncode == 2
    assert one_line(done) == (
        "relay: --host 'dev box' is not a host ssh can reach; give an alias from your ssh "
        "config or user@host"
    )


def test_include_uncommitted_without_host_is_a_usage_error(remote):
    done = remote.relay("--include-uncommitted")
    assert done.returncode == 2
    assert one_line(done) == (
        "relay: --include-uncommitted goes with --host (a local --worktree run starts from HEAD)"
    )


# ---------------------------------------------------------------- discover, doctor


def test_discover_host_says_what_is_installed_there(remote):
    remote.host("devbox")
    done = delegate("discover", "--host", "devbox", "--json", env=remote.env, timeout=120)
    assert done.code == 0, done.err
    document = done.json()
    assert document["host"] == "devbox"
    assert document["python"].startswith("3.")
    assert document["git"].startswith("git version ")
    assert [entry["key"] for entry in document["discovered"]] == ["codex"]
    assert document["discovered"][0]["path"] == str(remote.fake.bin / "codex")


def test_doctor_host_judges_lanes_by_that_machine(remote):
    remote.host("devbox", path="/usr/bin:/bin")  # no codex there
    remote.config.mkdir(parents=True, exist_ok=True)
    lane = delegate("lane", "set", "feature", "--implementer", "codex", "--scope", "global",
                    env=remote.env)  # fmt: skip
    assert lane.code == 0, lane.err
    done = delegate("doctor", "--host", "devbox", "--json", "--cwd", str(remote.repo),
                    env=remote.env, timeout=120)  # fmt: skip
    assert done.code == 1, done.err
    report = done.json()
    assert report["host"]["host"] == "devbox"
    assert [(row["lane"], row["problem"]) for row in report["lanes"]] == [
        ("feature", "not-installed")]  # fmt: skip


def test_discover_host_unreachable_is_one_line(remote):
    host = remote.host("devbox")
    host.stop()
    done = delegate("discover", "--host", "devbox", env=remote.env, timeout=120)
    assert done.code == 2
    lines = [line for line in done.err.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("delegate: --host devbox: unreachable (")


def test_runs_cancel_reaches_a_run_there_whose_relay_here_is_gone(remote):
    remote.host("devbox")
    remote.fake.script({"run": {"actions": [{"wait": True}]}})
    out = kill_the_relay_here(remote)
    cancelled = delegate("runs", "cancel", str(out), "--json", env=remote.env, timeout=120)
    assert cancelled.code == 0, cancelled.err
    assert cancelled.json()["status"] == "aborted"
    assert (remote.result()["status"], remote.result()["signal"]) == ("aborted", "SIGINT")


def test_batch_takes_a_host_per_task(remote, tmp_path):
    remote.host("devbox")
    remote.fake.script({"run": EDIT})
    (tmp_path / "t.md").write_text("Do it.\n")
    batch = tmp_path / "batch.json"
    batch.write_text(json.dumps({"tasks": [
        {"brief": "t.md", "implementer": "codex", "host": "devbox"},
        {"brief": "t.md", "implementer": "codex"},
    ]}))  # fmt: skip
    remote.fake.install("codex")
    env = {**remote.env, "PATH": f"{remote.fake.bin}:{remote.env['PATH']}"}
    done = delegate("batch", str(batch), "--cd", str(remote.repo), "--json", env=env, timeout=180)
    assert done.code == 0, done.err
    runs = done.json()["runs"]
    assert [run.get("host") for run in runs] == ["devbox", None]
    assert [run["status"] for run in runs] == ["completed", "completed"]
