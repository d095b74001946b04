"""The live view: `runs watch`, and fanout's table of its runs while they go."""

from __future__ import annotations

import contextlib
import os
import pty
import signal
import subprocess

from conftest import PYTHON
from fakes import relay_argv
from relaykit import Bench, read_pid

from delegate_skills.commands.watch import Live, table

STATE = {"id": "ab12cd34", "outDir": "/r/a", "implementer": "codex", "lane": "feature",
         "status": "running", "elapsedSeconds": 75.2, "lastEvent": "turn.started: reading"}  # fmt: skip


def test_the_table():
    done = {**STATE, "id": None, "lane": None, "status": "completed", "elapsedSeconds": 3723,
            "lastEvent": "", "tokens": 1200,
            "changes": {"filesChanged": 2, "linesAdded": 10, "linesRemoved": 1}}  # fmt: skip
    assert table([STATE, done]) == [
        "run       implementer      status     elapsed  changes    tokens  last event",
        "ab12cd34  codex (feature)  running    1:15     -          -       turn.started: reading",
        "a         codex            completed  1:02:03  2f +10 -1  1200",
    ]
    assert table([{**STATE, "lastEvent": "x" * 300}], width=60)[1].endswith("…")


def test_on_a_pipe_only_starts_and_ends_are_said():
    said: list[str] = []
    live = Live(said.append, tty=False)
    live.update([STATE])
    live.update([STATE])
    live.update([{**STATE, "status": "completed"}])
    assert said == ["started ab12cd34 (codex)\n", "ab12cd34 ended: completed\n"]


def test_on_a_terminal_the_table_is_redrawn_and_an_end_rings():
    said: list[str] = []
    live = Live(said.append, tty=True)
    live.update([STATE])
    live.update([{**STATE, "status": "failed"}])
    first, second = said
    assert first.startswith("started ab12cd34 (codex)\nrun ")
    assert second.startswith("\x1b[2F\x1b[J\aab12cd34 ended: failed\nrun ")


def _read_until(fd: int, marker: bytes) -> bytes:
    shown = b""
    while marker not in shown:
        try:
            chunk = os.read(fd, 4096)
        except OSError:
            break
        if not chunk:
            break
        shown += chunk
    return shown


def test_runs_watch_follows_a_run_to_its_end_on_a_terminal(tmp_path):
    bench = Bench(tmp_path, "codex")
    go = tmp_path / "go"
    bench.script({"actions": [{"stdout": '{"type":"turn.started","text":"reading"}\n'},
                              {"pid_file": str(tmp_path / "child.pid")},
                              {"wait_for_file": str(go)}]})  # fmt: skip
    relay = subprocess.Popen(relay_argv("codex", *bench.args()), stdin=subprocess.DEVNULL,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                             env=bench.fake.env())  # fmt: skip
    child = read_pid(tmp_path / "child.pid")
    leader, follower = pty.openpty()
    try:
        watcher = subprocess.Popen([PYTHON, "-m", "delegate_skills", "runs", "watch"],
                                   stdout=follower, stderr=subprocess.DEVNULL,
                                   env=bench.fake.env())  # fmt: skip
    finally:
        os.close(follower)
    try:
        shown = _read_until(leader, b"turn.started: reading")
        assert b"run " in shown and b"codex" in shown and b"running" in shown
        go.write_text("")
        shown = _read_until(leader, b"ended: completed")
        assert b"\a" in shown
        assert watcher.wait(timeout=60) == 0
    finally:
        os.close(leader)
        for proc in (watcher, relay):
            proc.kill()
            proc.wait()
        with contextlib.suppress(ProcessLookupError):
            os.kill(child, signal.SIGKILL)


def test_fanout_shows_its_runs_live_on_a_terminal(tmp_path, home):
    import json

    from test_worktree import Source

    source = Source(tmp_path)
    source.bench.script({"actions": [{"stdout": '{"type":"turn.started","text":"go"}\n'}]})
    leader, follower = pty.openpty()
    try:
        proc = subprocess.Popen(
            [PYTHON, "-m", "delegate_skills", "fanout", "--brief", str(source.bench.brief),
             "--cd", str(source.repo), "--implementer", "codex", "--implementer", "codex"],
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=follower, env=source.env,
        )  # fmt: skip
    finally:
        os.close(follower)
    try:
        shown = _read_until(leader, b"ended: completed")
        out, _ = proc.communicate(timeout=120)
        shown += _read_until(leader, b"\x00")  # the rest, up to the end
    finally:
        os.close(leader)
        proc.kill()
        proc.wait()
    assert proc.returncode == 0
    text = shown.decode()
    assert "run " in text and "implementer" in text and "last event" in text
    assert text.count("ended: completed") == 2
    assert "fanout: started" not in text  # the live table replaces the progress lines
    assert [row["status"] for row in json.loads(out)["runs"]] == ["completed", "completed"]
