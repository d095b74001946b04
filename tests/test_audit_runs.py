"""What `runs` trusts before it signals anything, and how it writes its index (runs.py).

A pid counts as the run's relay only while its kernel start time is the
recorded one and it is not a zombie; a process group only while its leader
is the recorded process (or gone); a cgroup only when it is one of ours. The
runs index is replaced whole, never rewritten in place.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from delegate_skills.runs import view as runs

linux_only = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc start times")


class Private:
    """A private record as run_processes reads it."""

    def __init__(self, data: dict) -> None:
        self.data = data

    def get(self, key: str, default=None):
        return self.data.get(key, default)


@linux_only
def test_a_pid_counts_only_with_its_own_start_time():
    me = os.getpid()
    assert runs.pid_alive(me, runs.process_start(me)) is True
    assert runs.pid_alive(me, "1") is False  # the pid is someone else's now


@linux_only
def test_a_zombie_is_not_alive():
    child = subprocess.Popen(["true"])
    try:
        start = runs.process_start(child.pid)
        os.waitid(os.P_PID, child.pid, os.WEXITED | os.WNOWAIT)  # exited, not yet reaped
        assert runs.pid_alive(child.pid, start) is False
    finally:
        child.wait()


@linux_only
def test_only_the_recorded_group_and_one_of_our_cgroups_are_the_runs(tmp_path):
    me = os.getpid()
    other = tmp_path / "user.slice"
    other.mkdir()
    (other / "cgroup.kill").write_text("")
    reused = runs.run_processes(
        Private({"group": {"pgid": me, "start": "1"}, "cgroup": str(other), "token": "t0k"})
    )
    assert (reused.pgid, reused.cgroup, reused.token) == (None, None, b"DELEGATE_RUN_TOKEN=t0k")
    ours = tmp_path / "delegate-run-abcd2345"
    ours.mkdir()
    (ours / "cgroup.kill").write_text("")
    recorded = runs.run_processes(
        Private({"group": {"pgid": me, "start": runs.process_start(me)}, "cgroup": str(ours)})
    )
    assert (recorded.pgid, recorded.cgroup, recorded.token) == (me, str(ours), None)


def test_the_runs_index_is_replaced_whole(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    first, second = tmp_path / "run1", tmp_path / "run2"
    first.mkdir()
    second.mkdir()
    runs.remember(str(first))
    index = tmp_path / "state" / "delegate-skills" / "runs-index.json"
    before = os.stat(index).st_ino
    runs.remember(str(second))
    assert os.stat(index).st_ino != before  # a new file renamed over the old one
    assert json.loads(index.read_text()) == {"version": 1, "runs": [str(first), str(second)]}
    assert sorted(os.listdir(index.parent)) == ["runs-index.json", "runs-index.json.lock"]
