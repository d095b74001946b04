"""What `runs` trusts before it signals anything, and how the run store writes a record.

A pid counts as the run's relay only while its kernel start time is the
recorded one and it is not a zombie; a process group only while its leader
is the recorded process (or gone); a cgroup only when it is one of ours. A
record is replaced whole, never rewritten in place.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from delegate_skills.isolation.linux import process_start
from delegate_skills.runstore import liveness as runs
from delegate_skills.runstore import record as records

linux_only = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc start times")


def Private(data: dict) -> records.Record:
    """A record as run_processes reads it (never saved)."""
    return records.Record("abcd2345", data)


@linux_only
def test_a_pid_counts_only_with_its_own_start_time():
    me = os.getpid()
    assert runs.pid_alive(me, process_start(me)) is True
    assert runs.pid_alive(me, "1") is False  # the pid is someone else's now


@linux_only
def test_a_zombie_is_not_alive():
    child = subprocess.Popen(["true"])
    try:
        start = process_start(child.pid)
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
        Private({"group": {"pgid": me, "start": process_start(me)}, "cgroup": str(ours)})
    )
    assert (recorded.pgid, recorded.cgroup, recorded.token) == (me, str(ours), None)


def test_a_record_is_replaced_whole(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    record = records.new(str(tmp_path), implementer="codex")
    before = os.stat(record.path).st_ino
    record.update(lane="feature")
    assert os.stat(record.path).st_ino != before  # a new file renamed over the old one
    with open(record.path) as handle:
        saved = json.load(handle)
    assert (saved["implementer"], saved["lane"], saved["id"]) == ("codex", "feature", record.id)
    assert sorted(os.listdir(os.path.dirname(record.path))) == ["record.json", "record.json.lock"]
