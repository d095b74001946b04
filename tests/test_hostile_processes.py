"""Nothing of a run outlives it, and nothing the implementer writes decides what we signal.

The fake implementer misbehaves on purpose: it leaves daemons in a session of
their own, leaves processes from its version probe, writes during the abort
grace, rewrites its run.json, and swaps its worktree's .git file.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess

import pytest
from conftest import PYTHON, commit_all, git, make_repo, tagged
from fakes import alive, relay_argv, wait_for
from relaykit import DETECT_ONLY, Bench, finish, read_pid

#: Every test here runs with the Linux mechanisms and without them (conftest).
pytestmark = pytest.mark.usefixtures("mechanisms")


def delegate(*args: str, env: dict, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run(
        [PYTHON, "-m", "delegate_skills.commands.cli", *args],
        capture_output=True, text=True, env=env, timeout=timeout,
    )  # fmt: skip


def escaped(pid: int) -> None:
    """Without the Linux mechanisms only the process group is swept (README): a
    daemon in a session of its own outlives the run. Pin that, then end it."""
    assert alive(pid)
    os.kill(pid, signal.SIGKILL)


def test_a_daemon_in_a_session_of_its_own_is_ended_with_the_run(tmp_path, mechanisms):
    bench = Bench(tmp_path, "codex")
    late = tmp_path / "late.txt"
    daemon = {"setsid": True, "late_write": [str(late), "after the run\n", 3],
              "pid_file": str(tmp_path / "daemon.pid")}  # fmt: skip
    bench.script({"actions": [{"grandchild": daemon}]})
    run = bench.relay(env=bench.fake.env(DELEGATE_RELAY_ABORT_GRACE="0.5"))
    assert run.code == 0, run
    pid = read_pid(tmp_path / "daemon.pid")
    if mechanisms == "posix":
        return escaped(pid)
    assert not alive(pid)
    assert "ended 1 process(es) Codex left running" in run.err
    assert not late.exists()


@pytest.mark.parametrize("mode", ["enforced", "detected"])
def test_a_daemon_that_escapes_its_group_is_ended_in_a_read_only_run_too(
    tmp_path, mode, mechanisms
):
    bench = Bench(tmp_path, "codex")
    # The pid file goes where a confined fake may write: its own record folder.
    daemon = {"setsid": True, "pid_file": str(bench.fake.calls_dir / "daemon.pid")}
    bench.script({"actions": [{"grandchild": daemon}]})
    run = bench.relay(
        "--read-only", env=bench.fake.env(**(DETECT_ONLY if mode == "detected" else {}))
    )
    assert run.code == 0, run
    pid = read_pid(bench.fake.calls_dir / "daemon.pid")  # it did start
    if mechanisms == "posix":
        return escaped(pid)
    assert tagged() == []
    assert run.result["readOnlyViolation"] is False


def test_processes_the_version_probe_leaves_are_ended(tmp_path, mechanisms):
    bench = Bench(tmp_path, "codex")
    leftover = {"hold_pipes": True, "setsid": True, "pid_file": str(tmp_path / "probe.pid")}
    bench.script({}, version={"actions": [{"grandchild": leftover}]})
    run = bench.relay()
    assert run.code == 0, run
    assert run.result["codexVersion"] == "fake-cli 0.0.0"
    if mechanisms == "posix":
        return escaped(read_pid(tmp_path / "probe.pid"))
    assert not alive(read_pid(tmp_path / "probe.pid"))


def test_runs_wait_returns_the_result_written_after_the_grace(tmp_path):
    """The first `aborted` result is written while the implementer may still write: no verdict."""
    bench = Bench(tmp_path, "codex")
    (bench.work / "tracked.txt").write_text("x\n")
    commit_all(bench.work)
    late = bench.work / "late.txt"
    bench.script(
        {
            "on_term": {"delay": 1.0, "write": [str(late), "written in the grace\n"]},
            "actions": [{"pid_file": str(tmp_path / "child.pid")}, {"wait": "forever"}],
        }
    )
    env = bench.fake.env(DELEGATE_RELAY_ABORT_GRACE="5", **DETECT_ONLY)
    proc = bench.start("--read-only", env=env)
    try:
        read_pid(tmp_path / "child.pid")
        proc.send_signal(signal.SIGTERM)
        wait_for(lambda: (bench.out / "result.json").exists())
        first = json.loads((bench.out / "result.json").read_text())
        waited = delegate("runs", "wait", str(bench.out), "--json", env=env)
    finally:
        code, _out, _err = finish(proc)
    assert code == 143
    if first.get("readOnlyViolation") is not True:
        assert first["readOnlyViolation"] is None
    result = json.loads(waited.stdout)["result"]
    assert result["status"] == "aborted"
    assert result["readOnlyViolation"] is True
    assert "late.txt" in result["readOnlyChanges"]


def test_a_rewritten_run_json_never_gets_another_process_signalled(tmp_path):
    bench = Bench(tmp_path, "codex")
    bystander = subprocess.Popen(["sleep", "600"], start_new_session=True)
    try:
        with open(f"/proc/{bystander.pid}/stat") as handle:
            fields = handle.read().rsplit(")", 1)[1].split()
        forged = {
            "schema": "delegate-run.v1", "implementer": "codex", "outDir": str(bench.out),
            "pid": 999999, "pidStart": "1", "group": bystander.pid, "groupStart": fields[19],
            "startedAt": "2026-01-01T00:00:00.000Z",
        }  # fmt: skip
        forge = {"write": [str(bench.out / "run.json"), json.dumps(forged)]}
        bench.script({"actions": [forge, {"pid_file": str(tmp_path / "child.pid")},
                                  {"wait": "forever"}]})  # fmt: skip
        relay = bench.start()
        try:
            read_pid(tmp_path / "child.pid")
            wait_for(lambda: json.loads((bench.out / "run.json").read_text())["pid"] == 999999)
            shown = delegate("runs", "show", str(bench.out), "--json", env=bench.fake.env())
            assert json.loads(shown.stdout)["status"] == "running"  # the record says so
            relay.send_signal(signal.SIGKILL)
            relay.wait()
            waited = delegate("runs", "wait", str(bench.out), "--json", env=bench.fake.env())
            assert json.loads(waited.stdout)["status"] == "lost"
            assert not alive(read_pid(tmp_path / "child.pid"))
        finally:
            relay.kill()
            relay.communicate()
        assert bystander.poll() is None  # never signalled
    finally:
        bystander.kill()
        bystander.wait()


def test_a_swapped_gitfile_runs_no_command_of_the_other_repository(tmp_path, home):
    source = make_repo(tmp_path / "source")
    (source / "a.txt").write_text("a\n")
    commit_all(source)
    evil = make_repo(tmp_path / "evil")
    marker = tmp_path / "fsmonitor-ran"
    git(evil, "config", "core.fsmonitor", f"touch {marker}; false")
    bench = Bench(tmp_path, "codex", repo=False)
    bench.work = source
    swap = {"write": [".git", f"gitdir: {evil / '.git'}\n"]}
    bench.script({"actions": [swap]})
    env = bench.fake.env(XDG_STATE_HOME=str(tmp_path / "state"), **DETECT_ONLY)
    run = bench.relay("--worktree", "--read-only", env=env)
    result = run.result
    assert not marker.exists()
    assert result["readOnlyViolation"] is True
    assert ".git" in result["readOnlyChanges"]


# ---------------------------------------------------------------- the POSIX fallback


def test_the_process_group_is_ended_either_way(tmp_path):
    bench = Bench(tmp_path, "codex")
    child = {"pid_file": str(tmp_path / "gc.pid"), "ignore_term": True}
    bench.script({"actions": [{"grandchild": child}]})
    run = bench.relay(env=bench.fake.env(DELEGATE_RELAY_ABORT_GRACE="0.3"))
    assert run.code == 0, run
    assert not alive(read_pid(tmp_path / "gc.pid"))


def test_sigterm_aborts_either_way(tmp_path):
    bench = Bench(tmp_path, "codex")
    bench.script({"actions": [{"pid_file": str(tmp_path / "child.pid")}, {"wait": "forever"}]})
    proc = subprocess.Popen(
        relay_argv("codex", *bench.args()), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, env=bench.fake.env(),
    )  # fmt: skip
    try:
        pid = read_pid(tmp_path / "child.pid")
        proc.send_signal(signal.SIGTERM)
        code, _out, _err = finish(proc)
    finally:
        proc.kill()
        proc.communicate()
    assert code == 143
    assert bench.result["status"] == "aborted"
    assert not alive(pid)


def test_posix_mode_reads_no_proc_and_still_sweeps_the_group(tmp_path):
    from delegate_skills.isolation import linux

    previous = os.environ.get(linux.POSIX_ONLY_ENV)
    os.environ[linux.POSIX_ONLY_ENV] = "1"
    try:
        assert linux.enabled() is False
        assert linux.stat_fields(os.getpid()) is None
        assert linux.pidfd_open(os.getpid()) is None
        assert linux.cgroup_create("x") is None
        table = linux.processes()  # from ps
        assert os.getpid() in {p.pid for p in table}
    finally:
        if previous is None:
            os.environ.pop(linux.POSIX_ONLY_ENV)
        else:
            os.environ[linux.POSIX_ONLY_ENV] = previous
