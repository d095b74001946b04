"""`delegate runs list|show|wait`: what is running, what finished, what was lost."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import time

from conftest import PYTHON
from fakes import relay_argv
from relaykit import Bench, finish, read_pid

from delegate_skills.commands.runs_cli import _run_text
from delegate_skills.runs import view as runs


def delegate_proc(*args: str, env: dict) -> subprocess.Popen:
    return subprocess.Popen(
        [PYTHON, "-m", "delegate_skills", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
    )


def run_json(*args: str, env: dict) -> tuple[int, dict]:
    done = subprocess.run(
        [PYTHON, "-m", "delegate_skills", *args, "--json"],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    return done.returncode, json.loads(done.stdout) if done.stdout.strip() else {}


def sleeping_bench(tmp_path, exit_code: int = 0) -> Bench:
    bench = Bench(tmp_path, "codex")
    bench.script(
        {
            "actions": [
                {"pid_file": str(tmp_path / "child.pid")},
                {"stdout": '{"type":"thread.started","thread_id":"t-9"}\n'},
                {"sleep": 0.5},
            ],
            "exit": exit_code,
        }
    )
    return bench


def test_list_shows_running_then_completed(tmp_path):
    bench = Bench(tmp_path, "codex")
    bench.script(
        {
            "actions": [{"pid_file": str(tmp_path / "child.pid")}, {"wait": "forever"}],
            "on_term": {"exit": 0},
        }
    )
    env = bench.fake.env(TMPDIR=str(tmp_path / "tmp"))
    proc = bench.start(env=env)
    read_pid(tmp_path / "child.pid")
    code, listing = run_json("runs", "list", "--root", str(tmp_path), env=env)
    assert code == 0
    (row,) = [r for r in listing["runs"] if r["outDir"] == str(bench.out)]
    assert (row["status"], row["implementer"], row["workdir"]) == (
        "running",
        "codex",
        str(bench.work),
    )
    assert row["elapsedSeconds"] >= 0
    proc.send_signal(signal.SIGTERM)
    finish(proc)
    code, listing = run_json("runs", "list", "--root", str(tmp_path), env=env)
    (row,) = [r for r in listing["runs"] if r["outDir"] == str(bench.out)]
    assert (row["status"], row["exitCode"]) == ("aborted", 143)


def test_wait_returns_the_result_and_its_exit_code(tmp_path):
    bench = sleeping_bench(tmp_path, exit_code=5)
    env = bench.fake.env()
    proc = bench.start(env=env)
    waiter = delegate_proc("runs", "wait", str(bench.out), "--json", env=env)
    out, _err = waiter.communicate(timeout=60)
    finish(proc)
    assert waiter.returncode == 5
    state = json.loads(out)
    assert state["status"] == "failed"
    assert state["result"]["exitCode"] == 5


def test_wait_times_out_with_124(tmp_path):
    bench = Bench(tmp_path, "codex")
    bench.script(
        {
            "actions": [{"pid_file": str(tmp_path / "child.pid")}, {"wait": "forever"}],
            "on_term": {"exit": 0},
        }
    )
    proc = bench.start()
    read_pid(tmp_path / "child.pid")
    started = time.monotonic()
    code, state = run_json("runs", "wait", str(bench.out), "--timeout", "1s", env=bench.fake.env())
    assert code == 124
    assert state["status"] == "running"
    assert time.monotonic() - started < 10
    proc.send_signal(signal.SIGTERM)
    finish(proc)


def test_wait_on_a_sigkilled_relay_reports_lost_quickly(tmp_path):
    bench = Bench(tmp_path, "codex")
    bench.script(
        {
            "actions": [{"pid_file": str(tmp_path / "child.pid")}, {"wait": "forever"}],
            "on_term": {"exit": 0},
        }
    )
    proc = subprocess.Popen(
        relay_argv("codex", *bench.args()),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=bench.fake.env(),
    )
    child = read_pid(tmp_path / "child.pid")
    waiter = delegate_proc("runs", "wait", str(bench.out), "--json", env=bench.fake.env())
    proc.kill()
    proc.wait()
    killed_at = time.monotonic()
    out, err = waiter.communicate(timeout=30)
    assert time.monotonic() - killed_at < 2
    assert waiter.returncode == 1
    assert json.loads(out)["status"] == "lost"
    assert "lost" in err.decode()
    with contextlib.suppress(ProcessLookupError):  # `wait` has ended the orphan already
        os.kill(child, signal.SIGKILL)


def test_show(tmp_path):
    bench = sleeping_bench(tmp_path)
    run = bench.relay()
    assert run.code == 0, run
    code, state = run_json("runs", "show", str(bench.out), env=bench.fake.env())
    assert code == 0
    assert (state["status"], state["result"]["threadId"]) == ("completed", "t-9")
    text = _run_text(runs.show(str(bench.out)))
    assert text.startswith("\nrelay: completed (exit 0)  ·  codex fake-cli 0.0.0")
    assert text.endswith("then commit from the orchestrator.")


def test_show_on_a_directory_without_a_run(tmp_path):
    done = subprocess.run(
        [PYTHON, "-m", "delegate_skills", "runs", "show", str(tmp_path)],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 2
    assert (
        done.stderr
        == f"delegate: {tmp_path}: no relay run here (no run record names this directory)\n"
    )


def test_run_json_marker(tmp_path):
    bench = sleeping_bench(tmp_path)
    bench.relay()
    marker = json.loads((bench.out / "run.json").read_text())
    assert marker["schema"] == "delegate-run.v1"
    assert (marker["implementer"], marker["workdir"], marker["outDir"]) == (
        "codex",
        str(bench.work),
        str(bench.out),
    )
    assert marker["pid"] > 0
