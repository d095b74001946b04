"""The grace periods a relay gives before SIGKILL, and the stderr tail it keeps.

DELEGATE_RELAY_KILL_GRACE is the watchdog's wait between SIGTERM and SIGKILL
(10 s by default); DELEGATE_RELAY_ABORT_GRACE is the wait when the relay
itself is told to stop (2 s by default). Each is shown to take effect both
ways: a short one kills a tree that ignores SIGTERM long before the default
would, and a long one lets an implementer that stops slowly finish.
Both live in the engine, so one relay stands for all of them.
"""

from __future__ import annotations

import signal
import time

from fakes import alive, wait_for
from relaykit import Bench, finish, read_pid

KEY = "codex"


def slow_to_stop(bench: Bench, delay: float) -> dict:
    """A run that, told to stop, takes `delay` seconds, writes stopped.txt and exits 0."""
    return {
        "on_term": {
            "delay": delay,
            "write": [str(bench.tmp / "stopped.txt"), "stopped\n"],
            "exit": 0,
        },
        "actions": [{"pid_file": str(bench.pid_file("child.pid"))}, {"wait": "forever"}],
    }


def deaf(bench: Bench) -> dict:
    """A run that ignores SIGTERM altogether."""
    return {
        "on_term": "ignore",
        "actions": [{"pid_file": str(bench.pid_file("child.pid"))}, {"wait": "forever"}],
    }


def test_a_short_kill_grace_kills_a_deaf_tree_long_before_the_default(tmp_path):
    bench = Bench(tmp_path, KEY)
    bench.script(deaf(bench))
    started = time.monotonic()
    run = bench.relay("--timeout", "1s", env=bench.fake.env(DELEGATE_RELAY_KILL_GRACE="0.2"))
    took = time.monotonic() - started
    assert (run.result["status"], run.result["signal"], run.code) == ("timeout", "SIGKILL", 137)
    # The default grace alone would take 1 s + 10 s.
    assert took < 6, took
    child = int(bench.pid_file("child.pid").read_text())
    wait_for(lambda: not alive(child), timeout=5)


def test_a_long_kill_grace_lets_a_slow_implementer_finish(tmp_path):
    bench = Bench(tmp_path, KEY)
    bench.script(slow_to_stop(bench, delay=1.0))
    run = bench.relay("--timeout", "1s", env=bench.fake.env(DELEGATE_RELAY_KILL_GRACE="8"))
    # It exited 0 on its own after the SIGTERM: a timeout still, but no SIGKILL.
    assert (run.result["status"], run.result["signal"], run.code) == ("timeout", None, 1)
    assert (tmp_path / "stopped.txt").read_text() == "stopped\n"


def test_a_short_kill_grace_does_not_wait_for_a_slow_implementer(tmp_path):
    bench = Bench(tmp_path, KEY)
    bench.script(slow_to_stop(bench, delay=1.0))
    run = bench.relay("--timeout", "1s", env=bench.fake.env(DELEGATE_RELAY_KILL_GRACE="0.2"))
    assert (run.result["status"], run.result["signal"], run.code) == ("timeout", "SIGKILL", 137)
    child = int(bench.pid_file("child.pid").read_text())
    wait_for(lambda: not alive(child), timeout=5)
    assert not (tmp_path / "stopped.txt").exists()


def abort(bench: Bench, grace: str) -> tuple[float, int]:
    """SIGTERM the relay once its implementer runs: (seconds to the relay's exit, its code)."""
    proc = bench.start(env=bench.fake.env(DELEGATE_RELAY_ABORT_GRACE=grace))
    read_pid(bench.pid_file("child.pid"))
    signalled = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    code, _out, _err = finish(proc)
    return time.monotonic() - signalled, code


def test_a_short_abort_grace_kills_a_deaf_tree_before_the_default(tmp_path):
    bench = Bench(tmp_path, KEY)
    bench.script(deaf(bench))
    took, code = abort(bench, "0.1")
    assert code == 143
    # The default grace alone is 2 s.
    assert took < 1.5, took
    assert (bench.result["status"], bench.result["signal"]) == ("aborted", "SIGTERM")
    child = int(bench.pid_file("child.pid").read_text())
    wait_for(lambda: not alive(child), timeout=5)


def test_a_long_abort_grace_lets_a_slow_implementer_finish(tmp_path):
    """It needs 2.5 s to stop: past the default 2 s, inside the 10 s given."""
    bench = Bench(tmp_path, KEY)
    bench.script(slow_to_stop(bench, delay=2.5))
    took, code = abort(bench, "10")
    assert code == 143
    assert took >= 2.5
    assert (tmp_path / "stopped.txt").read_text() == "stopped\n"
    assert bench.result["status"] == "aborted"


# ---------------------------------------------------------------- the stderr tail


def failing_run(bench: Bench, stderr: str) -> list[str]:
    bench.script({"actions": [{"stderr": stderr}], "exit": 3})
    run = bench.relay()
    assert (run.code, run.result["status"]) == (3, "failed"), run
    return run.result["stderrTail"]


def test_the_stderr_tail_keeps_the_last_twenty_lines(tmp_path):
    bench = Bench(tmp_path, KEY)
    lines = "".join(f"line {n}\n" for n in range(1, 31))
    # Blank lines are left out and trailing blanks trimmed, as the Node relays do.
    tail = failing_run(bench, lines + "   \n\nlast one   \n")
    assert tail == [*(f"line {n}" for n in range(12, 31)), "last one"]


def test_a_long_unfinished_last_line_is_kept_by_its_end_only(tmp_path):
    bench = Bench(tmp_path, KEY)
    long_line = "".join(f"{n:07d}," for n in range(20_000))  # 160,000 characters, no newline
    tail = failing_run(bench, "".join(f"line {n}\n" for n in range(1, 31)) + long_line)
    assert tail[:-1] == [f"line {n}" for n in range(12, 31)]
    # At most the last 64 KiB of a line that never ended.
    assert tail[-1] == long_line[-65536:]


def test_a_long_finished_line_is_kept_by_its_end_and_bounded(tmp_path):
    bench = Bench(tmp_path, KEY)
    long_line = "".join(f"{n:07d}," for n in range(25_000))  # 200,000 characters
    tail = failing_run(bench, f"before\n{long_line}\nafter\n")
    assert tail[0] == "before" and tail[2] == "after" and len(tail) == 3
    assert long_line.endswith(tail[1])
    assert 65536 <= len(tail[1]) < len(long_line)
