"""`runs logs`: a run's events as readable lines, and -f following them to the end."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess

from conftest import PYTHON, ROOT, run
from relaykit import Bench, read_pid

from delegate_skills.runs.logs import readable

RUNS_PY = str(ROOT / "skills" / "codex-delegate" / "scripts" / "runs.py")
EVENTS = (
    '{"type":"thread.started","thread_id":"t-1"}\n'
    '{"type":"item.completed","item":{"type":"agent_message","text":"Reading the tests"}}\n'
    "not json at all\n"
)


def test_readable_lines_written_out():
    assert readable(b'{"type":"thread.started","thread_id":"t-1"}') == "thread.started"
    assert readable(b'{"type":"x","msg":{"message":"hello\\n  there"}}') == "x: hello there"
    assert readable(b'{"event":"tool","command":["ls","-la"]}') == "tool: ls"
    assert readable(b'{"nothing":1}') == "event"
    assert readable(b"  ") is None
    assert readable(b"plain text") == "plain text"
    assert readable(b"[1, 2]") == "[1, 2]"
    long = readable(json.dumps({"type": "t", "text": "y" * 500}).encode())
    assert len(long) == 200 and long.endswith("…")


def test_logs_of_a_finished_run(tmp_path):
    bench = Bench(tmp_path, "codex")
    bench.script({"actions": [{"stdout": EVENTS}]})
    assert bench.relay().code == 0
    expected = [
        "thread.started",
        "item.completed: Reading the tests",
        "not json at all",
    ]
    done = run([PYTHON, "-m", "delegate_skills", "runs", "logs", str(bench.out)],
               env=bench.fake.env())  # fmt: skip
    assert (done.code, done.out.splitlines()) == (0, expected)
    script = run([PYTHON, RUNS_PY, "logs", "--last"], env=bench.fake.env())
    assert (script.code, script.out.splitlines()) == (0, expected)


def test_follow_shows_events_as_they_come_and_ends_with_the_run(tmp_path):
    bench = Bench(tmp_path, "codex")
    go = tmp_path / "go"
    bench.script(
        {
            "actions": [
                {"stdout": '{"type":"turn.started","text":"first"}\n'},
                {"pid_file": str(tmp_path / "child.pid")},
                {"wait_for_file": str(go)},
                {"stdout": '{"type":"turn.completed","text":"second"}\n'},
            ]
        }
    )
    from fakes import relay_argv

    relay = subprocess.Popen(relay_argv("codex", *bench.args()), stdin=subprocess.DEVNULL,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                             env=bench.fake.env())  # fmt: skip
    child = read_pid(tmp_path / "child.pid")
    follower = subprocess.Popen(
        [PYTHON, "-m", "delegate_skills", "runs", "logs", "-f", str(bench.out)],
        stdout=subprocess.PIPE, text=True, env=bench.fake.env(),
    )  # fmt: skip
    try:
        assert follower.stdout.readline() == "turn.started: first\n"
        go.write_text("")
        assert follower.stdout.readline() == "turn.completed: second\n"
        assert follower.wait(timeout=60) == 0  # it ends with the run
        assert relay.wait(timeout=60) == 0
    finally:
        for proc in (follower, relay):
            proc.kill()
            proc.wait()
        with contextlib.suppress(ProcessLookupError):
            os.kill(child, signal.SIGKILL)
