"""bubblewrap's own processes are not "left running" by the implementer.

Under `--unshare-pid` bubblewrap's outer process reports the command's exit
status as soon as its namespace init sends it, and the init may still be
leaving at that moment. The sweep gives what is left a moment to end by
itself before it signals anything; what ends then is not reported, and what
is still alive after it is signalled and named as before.
"""

from __future__ import annotations

import shutil
import subprocess

import pytest
from relaykit import Bench

from delegate_skills.isolation.procgroup import RunProcesses

needs_bwrap = pytest.mark.skipif(shutil.which("bwrap") is None, reason="needs bubblewrap")


def test_a_process_that_ends_by_itself_within_the_settle_time_is_not_reported():
    proc = subprocess.Popen(["sh", "-c", "read line; exit 0"], stdin=subprocess.PIPE,
                            start_new_session=True)  # fmt: skip
    try:
        group = RunProcesses(pgid=proc.pid)
        assert group.alive() == [proc.pid]
        proc.stdin.close()  # it ends by itself now
        assert group.end(5.0, keep=None, settle=10.0) == []
        assert proc.wait(timeout=10) == 0  # ended on its own: no SIGTERM reached it
    finally:
        proc.kill()
        proc.wait()


def test_without_a_settle_time_what_is_alive_is_signalled_and_reported():
    proc = subprocess.Popen(["sleep", "30"], start_new_session=True)
    try:
        assert RunProcesses(pgid=proc.pid).end(5.0, keep=proc.pid) == [proc.pid]
        assert proc.wait(timeout=10) == -15
    finally:
        proc.kill()
        proc.wait()


@needs_bwrap
def test_confined_runs_that_leave_nothing_report_nothing_left(tmp_path):
    bench = Bench(tmp_path, "codex")
    bench.script({"exit": 0})
    reported = []
    for n in range(8):  # the race is bubblewrap's; eight runs meet it here nearly always
        out = tmp_path / f"out{n}"
        run = bench.relay("--confine", "--out-dir", str(out), env=bench.fake.env())
        assert run.code == 0, run.err
        reported += [line for line in run.err.splitlines() if "left running" in line]
    assert reported == []
