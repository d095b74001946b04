"""No process of a run outlives it: swept at exit, tied to the relay, ended by `runs wait`."""

from __future__ import annotations

import json
import os
import signal
import sys

import pytest
from conftest import commit_all, delegate
from fakes import alive, wait_for
from relaykit import DETECT_ONLY, SHORT_GRACE, Bench, finish, read_pid

#: Every test here runs with the Linux mechanisms and without them (conftest).
pytestmark = pytest.mark.usefixtures("mechanisms")


def left_behind(bench: Bench, **grand) -> dict:
    """A run whose implementer starts a grandchild and exits 0 at once."""
    return {
        "actions": [
            {"grandchild": {"pid_file": str(bench.pid_file("grand.pid")), **grand}},
            {"pid_file": str(bench.pid_file("child.pid"))},
        ]
    }


def test_a_grandchild_left_running_is_ended_before_the_result(tmp_path):
    bench = Bench(tmp_path, "codex")
    bench.script(left_behind(bench))
    run = bench.relay()
    assert run.code == 0, run
    assert run.result["status"] == "completed"
    grand = int(bench.pid_file("grand.pid").read_text())
    assert not alive(grand)  # at once: the relay waited for it to go
    assert f"relay: ended 1 process(es) Codex left running (pid {grand})" in run.err


def test_a_grandchild_that_ignores_sigterm_is_killed(tmp_path):
    bench = Bench(tmp_path, "kimi")
    bench.script(left_behind(bench, ignore_term=True))
    run = bench.relay(env=bench.fake.env(DELEGATE_RELAY_ABORT_GRACE="0.2"))
    assert run.code == 0, run
    assert not alive(int(bench.pid_file("grand.pid").read_text()))


def test_a_clean_exit_says_nothing_about_processes(tmp_path):
    bench = Bench(tmp_path, "codex")
    bench.script({})
    run = bench.relay()
    assert run.code == 0, run
    assert "left running" not in run.err


@pytest.mark.parametrize("key", ["codex", "opencode", "vibe"])
def test_a_late_write_during_the_sweep_is_in_the_read_only_verdict(tmp_path, key):
    bench = Bench(tmp_path, key)
    (bench.work / "tracked.txt").write_text("original\n")
    commit_all(bench.work)
    late = bench.work / "late.txt"
    bench.script(left_behind(bench, term_write=[str(late), "written on the way out\n"]))
    flag = {"vibe": "--plan-only"}.get(key, "--read-only")
    run = bench.relay(flag, env=bench.fake.env(**DETECT_ONLY))
    assert late.read_text() == "written on the way out\n"
    assert run.result["readOnlyViolation"] is True, run
    assert "?? late.txt" in run.result["touchedFiles"]


@pytest.mark.parametrize("signame", ["SIGQUIT", "SIGUSR1"])
def test_sigquit_and_sigusr1_abort_like_sigterm(tmp_path, signame):
    bench = Bench(tmp_path, "codex")
    bench.script({"actions": [{"pid_file": str(bench.pid_file("child.pid"))}, {"wait": 1}]})
    proc = bench.start()
    try:
        child = read_pid(bench.pid_file("child.pid"))
        proc.send_signal(getattr(signal, signame))
        code, out, _err = finish(proc)
    finally:
        proc.kill()
    number = int(getattr(signal, signame))
    assert code == 128 + number
    result = bench.result
    assert (result["status"], result["exitCode"], result["signal"]) == (
        "aborted",
        128 + number,
        signame,
    )
    assert not alive(child)
    assert out.count("relay: aborted") == 1


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="parent-death signal is Linux")
def test_a_sigkilled_relay_takes_its_implementer_and_runs_wait_ends_the_rest(tmp_path, mechanisms):
    bench = Bench(tmp_path, "codex")
    bench.script(
        {
            "actions": [
                {"grandchild": {"pid_file": str(bench.pid_file("grand.pid"))}},
                {"pid_file": str(bench.pid_file("child.pid"))},
                {"wait": 1},
            ]
        }
    )
    proc = bench.start()
    grand = child = 0
    try:
        child = read_pid(bench.pid_file("child.pid"))
        grand = read_pid(bench.pid_file("grand.pid"))
        wait_for(lambda: "group" in json.loads((bench.out / "run.json").read_text()))
        proc.kill()
        proc.wait(timeout=30)
        if mechanisms == "linux":  # the parent-death signal; POSIX has none
            wait_for(lambda: not alive(child), timeout=10)
        shown = delegate("runs", "show", str(bench.out), "--json")
        assert json.loads(shown.out)["status"] == "orphaned", shown
        waited = delegate("runs", "wait", str(bench.out), "--json", timeout=60)
        assert waited.code == 1, waited
        assert json.loads(waited.out)["status"] == "lost"
        assert not alive(grand)
        assert not alive(child)
    finally:
        proc.kill()
        if alive(child):
            os.kill(child, signal.SIGKILL)
        if grand and alive(grand):
            os.kill(grand, signal.SIGKILL)


def test_run_json_names_the_implementers_group(tmp_path):
    bench = Bench(tmp_path, "codex")
    bench.script({"actions": [{"pid_file": str(bench.pid_file("child.pid"))}]})
    run = bench.relay()
    assert run.code == 0, run
    marker = json.loads((bench.out / "run.json").read_text())
    assert marker["group"] == int(bench.pid_file("child.pid").read_text())
    assert marker["pid"] != marker["group"]


def test_a_timeout_leaves_no_process_of_the_run(tmp_path):
    bench = Bench(tmp_path, "kimi")
    bench.script(
        {
            "on_term": "ignore",
            "actions": [
                {"grandchild": {"ignore_term": True, "pid_file": str(bench.pid_file("g.pid"))}},
                {"pid_file": str(bench.pid_file("child.pid"))},
                {"wait": 1},
            ],
        }
    )
    run = bench.relay("--timeout", "1s", env=bench.fake.env(**SHORT_GRACE))
    assert run.result["status"] == "timeout", run
    assert not alive(int(bench.pid_file("child.pid").read_text()))
    assert not alive(int(bench.pid_file("g.pid").read_text()))
