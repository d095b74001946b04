"""Finding and ending a run's processes without the cgroup (procgroup.py).

Where a writable cgroup v2 exists, the cgroup alone finds and kills every
process of a run, which hides the descendant view in the relay tests: a
daemon that left the implementer's process group is found as a descendant
of the relay (its subreaper), sent SIGTERM, and gone before `end` returns;
one that ignores SIGTERM is sent SIGKILL once the grace is over. (The
relay-level SIGTERM-ignoring test elsewhere may signal its grandchild before
it has installed SIG_IGN; these wait until it has.)
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest
from fakes import alive
from relaykit import Bench, read_pid

from delegate_skills.isolation.procgroup import RunProcesses

linux_only = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc")


@linux_only
def test_a_descendant_in_a_session_of_its_own_is_found_and_ended():
    child = subprocess.Popen(["sleep", "600"], start_new_session=True)
    try:
        processes = RunProcesses(ancestor=os.getpid())
        assert processes.alive() == [child.pid]
        assert processes.end(2.0, keep=child.pid) == [child.pid]
        assert child.wait(timeout=1) == -signal.SIGTERM
    finally:
        child.kill()
        child.wait()


#: Ignores SIGTERM, then says so on stdout (so the test never signals it too early).
DEAF = (
    "import os, signal, time\n"
    "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
    "os.write(1, b'r')\n"
    "time.sleep(600)\n"
)


@linux_only
def test_a_process_that_ignores_sigterm_is_killed_after_the_grace():
    child = subprocess.Popen(
        [sys.executable, "-S", "-c", DEAF], stdout=subprocess.PIPE, start_new_session=True
    )
    try:
        assert child.stdout.read(1) == b"r"
        processes = RunProcesses(ancestor=os.getpid())
        assert processes.end(0.2, keep=child.pid) == [child.pid]
        assert child.wait(timeout=1) == -signal.SIGKILL
    finally:
        child.kill()
        child.communicate()


def test_a_relays_grandchild_that_ignores_sigterm_is_killed(tmp_path):
    bench = Bench(tmp_path, "codex")
    pid_file = tmp_path / "deaf.pid"
    deaf = {"setsid": True, "ignore_term": True, "pid_file": str(pid_file)}  # ready when written
    bench.script({"actions": [{"grandchild": deaf}]})
    run = bench.relay(env=bench.fake.env(DELEGATE_RELAY_ABORT_GRACE="0.2"))
    assert run.code == 0, run
    pid = read_pid(pid_file)
    assert not alive(pid)
    assert f"relay: ended 1 process(es) Codex left running (pid {pid})" in run.err
